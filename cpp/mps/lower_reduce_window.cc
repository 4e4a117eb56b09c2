// reduce_window: a prefix scan (cumsum and friends, as JAX emits them), else a pooling window.
#include "mps/lower_families.h"

namespace jmp::mps {

namespace {

Status ReduceWindow(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(bool done, TryLowerCumulative(cx));
  if (done) return Status::Ok();
  JMP_ASSIGN_OR_RETURN(done, TryLowerPooling(cx));
  if (done) return Status::Ok();
  return cx.Unsupported("reduce_window not recognised");
}

}  // namespace

void RegisterReduceWindowRules(std::map<std::string, LowerRule>& r) {
  RegisterRule(r, "stablehlo.reduce_window", &ReduceWindow);
}

}  // namespace jmp::mps
