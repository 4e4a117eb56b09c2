// The one list of op families: each registers the StableHLO ops it lowers. A new family adds a line.
// Rule keys: an op's name ("stablehlo.add"); "composite:<name>" for a composite lowered other than by
// its decomposition (lower_control_flow.cc); "custom_call:<call_target_name>" for a custom call target.
#include "lower/lower_context.h"

namespace jmp::mps {

using Rules = std::map<std::string, LowerRule>;
void RegisterElementwiseRules(Rules& rules);
void RegisterConversionRules(Rules& rules);
void RegisterShapeRules(Rules& rules);
void RegisterDotRules(Rules& rules);
void RegisterReduceRules(Rules& rules);
void RegisterControlFlowRules(Rules& rules);
void RegisterDynamicSliceRules(Rules& rules);
void RegisterComplexRules(Rules& rules);
void RegisterFftRules(Rules& rules);
void RegisterSortRules(Rules& rules);
void RegisterConvRules(Rules& rules);
void RegisterGatherScatterRules(Rules& rules);
void RegisterSpecialRules(Rules& rules);
void RegisterPoolingRules(Rules& rules);
void RegisterReduceWindowRules(Rules& rules);
void RegisterLinalgRules(Rules& rules);
void RegisterEighRules(Rules& rules);
void RegisterRandomRules(Rules& rules);
void RegisterCallbackRules(Rules& rules);
void RegisterLapackRules(Rules& rules);
void RegisterCollectiveRules(Rules& rules);
void RegisterManualRules(Rules& rules);
void RegisterMetalKernelRules(Rules& rules);

const Rules& LowerRules() {
  static const Rules* rules = [] {
    auto* r = new Rules;
    RegisterElementwiseRules(*r);
    RegisterConversionRules(*r);
    RegisterShapeRules(*r);
    RegisterDotRules(*r);
    RegisterReduceRules(*r);
    RegisterControlFlowRules(*r);
    RegisterDynamicSliceRules(*r);
    RegisterComplexRules(*r);
    RegisterFftRules(*r);
    RegisterSortRules(*r);
    RegisterConvRules(*r);
    RegisterGatherScatterRules(*r);
    RegisterSpecialRules(*r);
    RegisterPoolingRules(*r);
    RegisterReduceWindowRules(*r);
    RegisterLinalgRules(*r);
    RegisterEighRules(*r);
    RegisterRandomRules(*r);
    RegisterCallbackRules(*r);
    RegisterMetalKernelRules(*r);
    RegisterLapackRules(*r);
    RegisterCollectiveRules(*r);
    RegisterManualRules(*r);
    return r;
  }();
  return *rules;
}

}  // namespace jmp::mps
