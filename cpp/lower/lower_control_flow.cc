// while, if, case, func.call, composite and custom_call. Regions become While/If subgraphs; values a
// region uses from outside become extra parameters (loop-invariant carries for While).
#include <algorithm>

#include "lower/lower_context.h"
#include "lower/lower_families.h"

namespace jmp::mps {

namespace {

std::vector<TensorType> TypesOf(LowerContext& cx, const std::vector<int>& values) {
  std::vector<TensorType> types;
  for (int v : values) types.push_back(cx.Type(v));
  return types;
}

std::vector<TensorType> ResultTypes(LowerContext& cx) {
  std::vector<TensorType> types;
  for (size_t i = 0; i < cx.op().results.size(); ++i) types.push_back({cx.OutType(i).dtype, cx.OutType(i).shape});
  return types;
}

Status While(LowerContext& cx) {
  const shlo::Op& op = cx.op();
  if (op.regions.size() != 2) return cx.Unsupported("while needs a condition and a body");
  std::vector<int> init;
  for (size_t i = 0; i < op.operands.size(); ++i) {
    JMP_ASSIGN_OR_RETURN(int v, cx.In(i));
    init.push_back(v);
  }
  std::vector<TensorType> carried = TypesOf(cx, init);
  std::vector<int> cond_caps, body_caps;
  JMP_ASSIGN_OR_RETURN(Graph cond, cx.LowerRegionToSubgraph(op.regions[0], carried, &cond_caps));
  JMP_ASSIGN_OR_RETURN(Graph body, cx.LowerRegionToSubgraph(op.regions[1], carried, &body_caps));
  if (cond.outputs.size() != 1) return cx.Unsupported("while condition must return one value");
  if (body.outputs.size() != init.size()) return cx.Unsupported("while body returns the wrong number of values");
  const std::vector<int> outputs = EmitWhile(cx, init, std::move(cond), cond_caps, std::move(body), body_caps);
  for (size_t i = 0; i < init.size(); ++i) cx.Bind(i, outputs[i]);
  return Status::Ok();
}

using Builder = LowerContext::SubgraphBuilder;

// A branch of an If without results (branches that only call back, as jax.debug.print under lax.cond):
// every op has an output, so the If returns an empty bool array, as a token is, which no one reads.
Builder WithEmptyResult(LowerContext& cx, Builder build) {
  return [&cx, build = std::move(build)](const std::vector<int>& params) -> StatusOr<std::vector<int>> {
    JMP_ASSIGN_OR_RETURN(std::vector<int> values, build(params));
    if (values.empty()) values.push_back(cx.ConstantData(DType::kBool, {0}, {}));
    return values;
  };
}

// Emits If(pred, then, else) in the current scope; both branches take no parameters of their own.
// Without `out_types` it has one output, the empty bool array of WithEmptyResult.
StatusOr<std::vector<int>> EmitIf(LowerContext& cx, int pred, const Builder& then_build, const Builder& else_build,
                                  std::vector<TensorType> out_types) {
  const bool effects_only = out_types.empty();
  if (effects_only) out_types.push_back(TensorType{DType::kBool, {0}});
  std::vector<int> then_caps, else_caps;
  JMP_ASSIGN_OR_RETURN(Graph then_g,
                       cx.BuildSubgraph({}, effects_only ? WithEmptyResult(cx, then_build) : then_build, &then_caps));
  JMP_ASSIGN_OR_RETURN(Graph else_g,
                       cx.BuildSubgraph({}, effects_only ? WithEmptyResult(cx, else_build) : else_build, &else_caps));
  if (then_g.outputs.size() != out_types.size() || else_g.outputs.size() != out_types.size())
    return cx.Unsupported("branches return the wrong number of values");
  std::vector<int> caps = UnionOf(then_caps, else_caps);
  std::vector<TensorType> cap_types = TypesOf(cx, caps);
  AlignCaptures(then_g, 0, then_caps, caps, cap_types);
  AlignCaptures(else_g, 0, else_caps, caps, cap_types);
  std::vector<int> inputs = {cx.Reshape(pred, {})};
  inputs.insert(inputs.end(), caps.begin(), caps.end());
  Op op = cx.NewOp(OpKind::kIf, inputs);
  op.subgraphs.push_back(std::move(then_g));
  op.subgraphs.push_back(std::move(else_g));
  return cx.EmitOp(std::move(op), out_types);
}

// Lowers a parameterless region's block into the current scope; its terminator's operands come back.
Builder RegionBuilder(LowerContext& cx, const shlo::Region& region) {
  return [&cx, &region](const std::vector<int>&) -> StatusOr<std::vector<int>> {
    if (region.blocks.size() != 1 || !region.blocks[0].args.empty())
      return cx.Unsupported("branch regions must have one block without arguments");
    JMP_ASSIGN_OR_RETURN(const shlo::Op* terminator, cx.LowerBlock(region.blocks[0]));
    return cx.Values(terminator->operands);
  };
}

Status If(LowerContext& cx) {
  const shlo::Op& op = cx.op();
  if (op.regions.size() != 2) return cx.Unsupported("if needs two branches");
  JMP_ASSIGN_OR_RETURN(int pred, cx.In(0));
  std::vector<TensorType> out_types = ResultTypes(cx);
  JMP_ASSIGN_OR_RETURN(std::vector<int> outputs,
                       EmitIf(cx, pred, RegionBuilder(cx, op.regions[0]), RegionBuilder(cx, op.regions[1]), out_types));
  for (size_t i = 0; i < op.results.size(); ++i) cx.Bind(i, outputs[i]);
  return Status::Ok();
}

// case(index, b0..bn-1): if index == 0 then b0 else if index == 1 then b1 ... else bn-1, so an
// out-of-range index takes the last branch as StableHLO says.
Status Case(LowerContext& cx) {
  const shlo::Op& op = cx.op();
  size_t n = op.regions.size();
  if (n == 0) return cx.Unsupported("case without branches");
  int index_id = op.operands.at(0);
  std::vector<TensorType> out_types = ResultTypes(cx);
  std::vector<int> results_ids = op.results;
  std::function<StatusOr<std::vector<int>>(size_t)> build = [&](size_t k) -> StatusOr<std::vector<int>> {
    if (k + 1 == n) return RegionBuilder(cx, op.regions[k])({});
    JMP_ASSIGN_OR_RETURN(int index, cx.Value(index_id));
    DType t = cx.DTypeOf(index);
    int pred = cx.Compare(OpKind::kEqual, index, cx.Scalar(t, static_cast<double>(k)));
    return EmitIf(
        cx, pred, RegionBuilder(cx, op.regions[k]), [&build, k](const std::vector<int>&) { return build(k + 1); },
        out_types);
  };
  JMP_ASSIGN_OR_RETURN(std::vector<int> outputs, build(0));
  for (size_t i = 0; i < results_ids.size(); ++i) cx.BindShlo(results_ids[i], outputs[i]);
  return Status::Ok();
}

Status CallFunc(LowerContext& cx, const std::string& callee_name) {
  const shlo::Func* callee = cx.module().FindFunc(callee_name);
  if (!callee) return cx.Unsupported("call to an unknown function @" + callee_name);
  std::vector<int> args;
  for (size_t i = 0; i < cx.op().operands.size(); ++i) {
    JMP_ASSIGN_OR_RETURN(int v, cx.In(i));
    args.push_back(v);
  }
  std::vector<int> results_ids = cx.op().results;
  JMP_ASSIGN_OR_RETURN(std::vector<int> results, cx.InlineCall(*callee, args));
  if (results.size() != results_ids.size())
    return cx.Unsupported("@" + callee_name + " returns the wrong number of values");
  for (size_t i = 0; i < results.size(); ++i) cx.BindShlo(results_ids[i], results[i]);
  return Status::Ok();
}

Status Call(LowerContext& cx) {
  const shlo::Attr* callee = cx.op().Find("callee");
  if (!callee) return cx.Unsupported("call without a callee");
  if (IsManualComputationBody(callee->s)) return LowerRules().at(kManualComputationRule)(cx);
  return CallFunc(cx, callee->s);
}

// A composite is its decomposition unless a family registered a rule "composite:<name>" for it
// (e.g. chlo.top_k onto MPSGraph's topK).
Status Composite(LowerContext& cx) {
  const shlo::Attr* name = cx.op().Find("name");
  if (name) {
    const auto& rules = LowerRules();
    auto it = rules.find("composite:" + name->s);
    if (it != rules.end()) return it->second(cx);
  }
  const shlo::Attr* decomposition = cx.op().Find("decomposition");
  if (!decomposition) return cx.Unsupported("composite without a decomposition");
  return CallFunc(cx, decomposition->s);
}

// A custom call runs the rule a family registered as "custom_call:<target>" (e.g. XLA's Eigh in
// lower_eigh.cc); there is no fallback.
Status CustomCall(LowerContext& cx) {
  const shlo::Attr* target = cx.op().Find("call_target_name");
  std::string name = target ? target->s : "?";
  const auto& rules = LowerRules();
  auto it = rules.find("custom_call:" + name);
  if (it != rules.end()) return it->second(cx);
  return cx.Unsupported("custom_call target '" + name + "' is not supported");
}

}  // namespace

void RegisterControlFlowRules(std::map<std::string, LowerRule>& r) {
  RegisterRule(r, "stablehlo.while", &While);
  RegisterRule(r, "stablehlo.if", &If);
  RegisterRule(r, "stablehlo.case", &Case);
  RegisterRule(r, "func.call", &Call);
  RegisterRule(r, "stablehlo.composite", &Composite);
  RegisterRule(r, "stablehlo.custom_call", &CustomCall);
}

}  // namespace jmp::mps
