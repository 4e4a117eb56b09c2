// The MPS op graph: what the lowering produces and both executors run. One op is one MPSGraph call
// with MPSGraph's semantics (op_kinds.def says which call and what it assumes).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mps/op_attrs.h"
#include "support/dtype.h"

namespace jmp::mps {

enum class OpKind : uint16_t {  // declared in mps/op_attrs.h
#define JMP_MPS_OP(name, macos, selector, domain) k##name,
#include "mps/op_kinds.def"
};

inline constexpr OpKind kAllOpKinds[] = {
#define JMP_MPS_OP(name, macos, selector, domain) OpKind::k##name,
#include "mps/op_kinds.def"
};

// The table's JMP_MPS_UNARY and JMP_MPS_BINARY rows again, as enums of their own: the host's
// elementwise kernels switch over these (without `default:`), so a new row fails the build until
// each of them says what it does for the row.
enum class UnaryOp : uint8_t {
#define JMP_MPS_UNARY(name, macos, selector, domain) k##name,
#include "mps/op_kinds.def"
};
enum class BinaryOp : uint8_t {
#define JMP_MPS_BINARY(name, macos, primary, secondary, domain) k##name,
#include "mps/op_kinds.def"
};

// The BINARY row's enum for its op kind; false for any other kind.
bool BinaryOpOf(OpKind kind, BinaryOp* op);

std::string_view OpKindName(OpKind kind);      // "Add"
std::string_view OpKindSelector(OpKind kind);  // the MPSGraph selector
int OpKindMacOS(OpKind kind);                  // 1100 = macOS 11.0; 0 for a JMP_HOST_OP row
bool OpKindHostOnly(OpKind kind);              // a JMP_HOST_OP row: MPSGraph has no call for it

// The element types an op kind computes on (op_kinds.def's domain column, mps/op_domain.h).
struct DTypeDomain {
  int floats = 0;  // 0 none, 1 every float type, 2 f32 and f64, 3 f16, bf16 and f32, 4 f16, f32 and f64
  int ints = 0;    // 0 none, 1 every integer type, 2 int32 and int64
  bool bools = false, complexes = false;
  bool Has(DType t) const;
};
DTypeDomain OpKindDomain(OpKind kind);
std::string_view OpKindDomainName(OpKind kind);  // "FloatComplex", as the row spells it

struct TensorType {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  int64_t NumElements() const;
  size_t ByteSize() const { return static_cast<size_t>(NumElements()) * jmp::ByteSize(dtype); }
  std::string ToString() const;  // "f32[2,3]"
};

struct Graph;

struct Op {
  OpKind kind;
  std::vector<int> inputs;       // value ids
  std::vector<int> outputs;      // value ids
  OpAttrs attrs;                 // the alternative AttrsKindOf(kind) names (the verifier checks it)
  std::vector<Graph> subgraphs;  // While and If (op_kinds.def); value ids are local to each subgraph
  std::string location;          // source location of the StableHLO op it came from, for errors

  // The parameters, as the op's kind takes them. On a verified graph the alternative is the kind's; on
  // another (a unit test's, built by hand) a wrong one reads as A's defaults rather than throwing.
  template <typename A>
  const A& Attrs() const {
    if (const A* a = std::get_if<A>(&attrs)) return *a;
    static const A kDefaults{};
    return kDefaults;
  }
};

// Whether running the op matters beyond its results, so it is never folded, moved or skipped: a
// Python callback, or an all-reduce other processes take part in.
bool HasEffects(const Op& op);

struct Graph {
  std::vector<TensorType> values;  // indexed by value id
  std::vector<int> inputs;         // the executable's parameters, in order
  std::vector<int> outputs;        // its results, in order (may repeat, may be inputs)
  std::vector<Op> ops;             // in execution order

  int AddValue(DType dtype, std::vector<int64_t> shape);
  const TensorType& type(int value) const { return values[static_cast<size_t>(value)]; }
  std::string ToString() const;  // one op a line: "%3 = Add(%1, %2) : f32[4]"
  // The same with notes on the top-level ops (placement's segments and executors): before[i], when not
  // empty, is a line of its own ahead of op i (index ops.size(): ahead of the return), after[i] ends
  // op i's line.
  std::string ToString(const std::vector<std::string>& before, const std::vector<std::string>& after) const;
};

}  // namespace jmp::mps
