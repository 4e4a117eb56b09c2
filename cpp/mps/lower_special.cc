// (placeholder: this op family's lowering rules are being written)
#include "mps/lower_families.h"

namespace jmp::mps {

void RegisterSpecialRules(std::map<std::string, LowerRule>& r) {}

}  // namespace jmp::mps
