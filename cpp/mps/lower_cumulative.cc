// (placeholder: cumulative scans are being written)
#include "mps/lower_families.h"

namespace jmp::mps {

StatusOr<bool> TryLowerCumulative(LowerContext& cx) { return false; }

}  // namespace jmp::mps
