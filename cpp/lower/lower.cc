#include "lower/lower.h"

#include "lower/lower_context.h"
#include "lower/lower_multiply_add.h"
#include "mps/verify.h"
#include "stablehlo/passes/narrow_types.h"

namespace jmp::mps {

namespace {

StatusOr<Graph> LowerMain(const shlo::Module& module);

}  // namespace

// A program that reads fine can still be inconsistent (a corrupted artifact: an attribute index past
// its operand's rank, ...); bounds-checked accessors then throw, and that is a bad-input error.
StatusOr<Graph> LowerModule(const shlo::Module& module) {
  try {
    StatusOr<Graph> graph = [&]() -> StatusOr<Graph> {
      if (!shlo::HasNarrowTypes(module)) return LowerMain(module);
      JMP_ASSIGN_OR_RETURN(shlo::Module legal, shlo::LegalizeNarrowTypes(module));
      return LowerMain(legal);
    }();
    if (graph.ok()) {
      ContractMultiplyAdds(*graph);
      JMP_RETURN_IF_ERROR(VerifyGraph(*graph));
    }
    return graph;
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("inconsistent program: ") + e.what());
  }
}

namespace {

StatusOr<Graph> LowerMain(const shlo::Module& module) {
  const shlo::Func* main = module.FindFunc("main");
  if (!main) return InvalidArgument("the module has no function @main");
  if (main->body.blocks.size() != 1) return Unimplemented("@main must have exactly one block");
  const shlo::Block& block = main->body.blocks[0];
  if (block.args.size() != main->arg_types.size())
    return InvalidArgument("@main's block arguments do not match its signature");

  Graph graph;
  Scope scope;
  scope.graph = &graph;
  scope.func = main;
  for (size_t i = 0; i < block.args.size(); ++i) {
    const shlo::Type& t = main->arg_types[i];
    if (t.kind != shlo::Type::Kind::kTensor && t.kind != shlo::Type::Kind::kToken)
      return Unimplemented("@main argument " + std::to_string(i) + " has type " + t.ToString() +
                           "; only tensors and tokens are supported");
    int v = graph.AddValue(t.dtype, t.shape);
    graph.inputs.push_back(v);
    scope.env[block.args[i]] = v;
  }
  LowerContext cx(module);
  cx.SwapScope(&scope);
  JMP_ASSIGN_OR_RETURN(const shlo::Op* ret, cx.LowerBlock(block));
  for (int operand : ret->operands) {
    JMP_ASSIGN_OR_RETURN(int v, cx.Value(operand));
    graph.outputs.push_back(v);
  }
  return graph;
}

}  // namespace

}  // namespace jmp::mps
