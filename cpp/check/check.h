// The self-check: every (op kind, dtype) the Metal executor runs, as small one-op MPS graphs run on
// the Metal side and on the host executor (the reference), compared bit for bit where the op is exact
// and within a bound stated per op otherwise; and one probe per ASSUMPTION row of op_kinds.def.
// jax_metal_plugin's `check` command reaches it through cpp/plugin/check_api.cc.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mps/graph.h"
#include "support/dtype.h"
#include "support/status.h"

namespace jmp::check {

// How one output is compared.
//   kExact  same bits (two NaNs agree whatever their payloads when `nan_any`)
//   kUlp    floats: |metal - host| in units in the last place of the host value (of `floor` when the
//           host value is smaller, for results near a zero crossing), at most `bound`; integers and
//           bools exactly; NaN agrees with NaN, an infinity only with itself
//   kScaled |metal - host| / scale at most `bound`, where `scale` is eps * length * operand norm (a
//           reduction's or product's error bound)
struct Tolerance {
  enum Kind { kExact, kUlp, kScaled } kind = kExact;
  double bound = 0;
  double floor = 0;
  double scale = 1;
  bool nan_any = true;
  std::string Describe() const;  // "exact", "4 ulp", "2 x eps*n*|x|"
};

// One small program of a case: a graph, its inputs and how each output is compared.
struct Program {
  std::string what;  // "edge values f16[600]", "axis 1 of [3,5,7]"
  mps::Graph graph;
  std::vector<std::vector<uint8_t>> inputs;
  std::vector<Tolerance> tolerance;  // per output; a single entry applies to all
  // Results other than the host's that the op's row also allows (every output's bytes), matched exactly.
  std::vector<std::vector<std::vector<uint8_t>>> alternatives;
};

struct Case {
  mps::OpKind kind;
  DType dtype;
  std::string probe;  // the ASSUMPTION it probes, or empty for a sweep case
  std::vector<Program> programs;
};

// The dtypes placement can send to Metal for an op kind: its row's dtype domain (op_kinds.def) among
// the types MetalHasDType accepts, narrower only where check_domain.cc says why; empty for host-only
// rows.
std::vector<DType> MetalDTypes(mps::OpKind kind);

// The programs of the sweep case (kind, dtype); `quick` leaves out the large shapes.
Status BuildSweepCase(mps::OpKind kind, DType dtype, bool quick, Case& c);

// One case per ASSUMPTION row: each probes exactly what the row assumes.
std::vector<Case> AssumptionProbes();

// The cases of a check as JSON, {"cases": [{"op", "dtype", "probe"?}, ...]} or {"error"}: `quick` runs a
// subset (every op kind, fewer dtypes, no large shapes); `only` restricts to "Op:dtype,..." pairs when
// not empty. The sweep pairs come first, then the assumption probes.
std::string ListCases(bool quick, const std::string& only);

// Runs case `index` of ListCases(quick, only) and returns its JSON object (op, dtype, status, worst
// error and bound, failures, each program's shape class and which programs failed). Before each
// program it appends "program K SHAPE \"what\"\n" to `journal_fd` (-1: none; SHAPE is the program's
// shape class, exec/capabilities.h, or "-"). The executors are made on the
// first call of a process; index -1 only makes them and returns {"side": the Metal side, as
// exec::CreateMetalSideExecutor names it} or {"error"}.
std::string RunListedCase(bool quick, const std::string& only, int index, int journal_fd);

// Input data and graphs, shared by the case builders (check_inputs.cc).
enum class Range { kEdge, kFinite, kModerate, kPositive, kSmallInt, kUnit };
std::vector<uint8_t> Fill(DType dtype, int64_t n, Range range, uint32_t seed);
std::vector<uint8_t> Encode(DType dtype, const std::vector<double>& values);  // complex: real parts
double Epsilon(DType dtype);  // machine epsilon of a float type (complex: its parts'), 0 otherwise
int64_t CountOf(const std::vector<int64_t>& shape);

// Compares host and metal results of one output (check_compare.cc): sets error in the tolerance's
// units (inf for a NaN/inf/shape disagreement) and returns whether it is within the bound.
bool Agree(DType dtype, const std::vector<uint8_t>& host, const std::vector<uint8_t>& metal, const Tolerance& tol,
           double& error);

}  // namespace jmp::check
