// (placeholder: this op family's lowering rules are being written)
#include "mps/lower_families.h"

namespace jmp::mps {

void RegisterPoolingRules(std::map<std::string, LowerRule>& r) {}

}  // namespace jmp::mps

namespace jmp::mps {

StatusOr<bool> TryLowerPooling(LowerContext& cx) { return false; }

}  // namespace jmp::mps
