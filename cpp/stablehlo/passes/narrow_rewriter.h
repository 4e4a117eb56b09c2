// The narrow-type pass's rewriter, declared for its files: narrow_types.cc (the pass, the op tables
// and the rewrite of each op), narrow_floats.cc (float8/float4 computed in float32),
// narrow_convert.cc (converts and bitcasts) and narrow_int4.cc (int2/int4 arithmetic and @main's
// boundary).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "stablehlo/ir.h"
#include "stablehlo/passes/narrow_builder.h"
#include "support/dtype.h"
#include "support/status.h"

namespace jmp::shlo::narrow {

bool TypeIsNarrow(const Type& t);

bool In(const std::set<std::string>& s, const std::string& name);

// Ops whose region is a scalar computation applied by the op (reduce's body, sort's comparator, ...).
extern const std::set<std::string> kComputeRegions;

class Rewriter : narrow::Builder {
 public:
  explicit Rewriter(const Func& in) : Builder(in.value_types), in_(in) {}

  StatusOr<Func> Run(bool is_main);

 private:
  Status Refuse(const Op& op, DType t);

  // The first narrow dtype an op reads or writes (kF32 when none).
  DType NarrowIn(const Op& op, bool* any_nf, bool* any_i4) const;

  Status RewriteRegions(const Op& in, Op* out, bool retype_only);

  // Every value a region defines (block arguments, op results, nested regions').
  void DefinedIn(const Region& r, std::vector<int>* ids);

  Status RewriteBlock(const Block& in, Block* out, bool retype_only);

  Status RewriteOp(const Op& op, bool retype_only);

  // A float8 value a region captures, as float32: a constant stays a constant (the lowering recognises
  // sort comparators and reduce bodies by their constants), anything else is decoded.
  int DecodeCaptured(int v);

  // Renames the operands of every op in a region (nested ones too).
  static void Substitute(std::vector<Region>& regions, const std::map<int, int>& to);
  static void OperandsOf(const std::vector<Region>& regions, std::vector<int>* ids);

  // float8: decode operands, compute in float32, encode results. A region the op applies (reduce's
  // body, sort's comparator) computes in float32 throughout: its float8 values become float32, its
  // float8 constants are decoded here, and the float8 values it captures from outside (JAX hoists
  // region constants out) are decoded before the op.
  Status RewriteNarrowFloat(const Op& op, Op& copy);

  // JAX's float comparators canonicalise each side: select(x == 0, 0, x), select(x != x, NaN, x). In a
  // format without zero (e8m0fnu: its "0" is NaN) or without NaN (float4_e2m1fn: its "NaN" is -0) one
  // of those selects can never fire, but its decoded constants hide it from the sort lowering's
  // recogniser (lower_sort.cc). Such a select is its third operand: x == NaN and, for a value decoded
  // from a format without NaN, x != x are false.
  void DropDeadCanonicalisations(std::vector<Region>& regions, size_t captures_from);

  // int4/uint4: compute on the storage type, wrap the results back into 4 bits.
  Status RewriteInt4(const Op& op, Op& copy);

  Status RewriteConvert(const Op& op);

  int ToInt4(int x, DType from, DType to, int result = -1);

  // Narrow float (decoded to float32 `x`) -> integer, as XLA converts: a value at or beyond a bound of
  // the integer type *taken as a value of the float type* becomes that bound. float4_e2m1fn has no 127
  // (int8's largest): 127 saturates to 6, so 6 converts to 127, and -6 to -128.
  void NarrowFloatToInteger(int x, DType from, DType to, int result);

  Status RewriteBitcast(const Op& op);

  // @main's int2/int4 buffers hold ml_dtypes' layout (the low bits): sign-extend arguments on entry,
  // mask results on exit.
  Status MainBoundary(Block& block);

  const Func& in_;
  std::map<int, DType> promoted_;
  std::map<int, std::vector<uint8_t>> f8_constants_;  // float8 constants by value id: their bits  // float8 values of
                                                      // applied regions, now float32: their format
};

}  // namespace jmp::shlo::narrow
