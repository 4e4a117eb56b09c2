// Which dtypes the self-check sweeps for each op kind: those placement can send to Metal with it, which
// is the row's dtype domain (op_kinds.def) among the types MPSGraph has, except where said below.
#include "check/check.h"
#include "exec/placement.h"

namespace jmp::check {

std::vector<DType> MetalDTypes(mps::OpKind kind) {
  using K = mps::OpKind;
  using D = DType;
  // No MPSGraph call: placement never sends these to Metal. A user's kernel: the check has no source of
  // its own to compare, the user's reference is the check.
  if (mps::OpKindHostOnly(kind) || kind == K::kMetalKernel) return {};
  // Narrower than the row: the lowering emits the iota in int32 or int64 only and casts the result.
  if (kind == K::kCoordinateAlongAxis) return {D::kI32, D::kI64};
  const mps::DTypeDomain domain = mps::OpKindDomain(kind);
  std::vector<D> dtypes;
  for (D t : kAllDTypes)
    if (mps::MetalHasDType(t) && domain.Has(t)) dtypes.push_back(t);
  return dtypes;
}

}  // namespace jmp::check
