// A user's Metal kernel (jax_metal_plugin.metal_kernel) reaches us as stablehlo.composite
// "jax_metal.metal_kernel": its attributes hold the kernel (source, entry, grid, threadgroup) and its
// decomposition is the user's reference implementation. It becomes one MetalKernel op whose subgraph is
// that reference, so the host runs the reference wherever Metal does not run the kernel.
#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "lower/lower_context.h"

namespace jmp::mps {

namespace {

StatusOr<std::string> StringAttr(LowerContext& cx, const shlo::AttrMap& attrs, const std::string& name) {
  auto it = attrs.find(name);
  if (it == attrs.end() || it->second.kind != shlo::Attr::Kind::kString)
    return cx.Unsupported("metal_kernel: the string attribute '" + name + "' is missing");
  return it->second.s;
}

// Three positive sizes, x y z, as an integer array attribute in either of its spellings.
StatusOr<std::array<int64_t, 3>> SizeAttr(LowerContext& cx, const shlo::AttrMap& attrs, const std::string& name) {
  auto it = attrs.find(name);
  std::vector<int64_t> v;
  if (it != attrs.end() && it->second.kind == shlo::Attr::Kind::kInts) v = it->second.ints;
  if (it != attrs.end() && it->second.kind == shlo::Attr::Kind::kArray)
    for (const shlo::Attr& e : it->second.array)
      if (e.kind == shlo::Attr::Kind::kInt) v.push_back(e.i);
  if (it != attrs.end() && it->second.kind == shlo::Attr::Kind::kTensor && it->second.type.dtype == DType::kI64)
    for (size_t k = 0; k + 8 <= it->second.data.size(); k += 8) {
      int64_t x;
      std::memcpy(&x, it->second.data.data() + k, 8);
      v.push_back(x);
    }
  if (v.size() != 3 || v[0] < 1 || v[1] < 1 || v[2] < 1)
    return cx.Unsupported("metal_kernel: '" + name + "' must be three positive integers (x, y, z)");
  return std::array<int64_t, 3>{v[0], v[1], v[2]};
}

Status MetalKernel(LowerContext& cx) {
  const shlo::Op& op = cx.op();
  const shlo::Attr* attributes = op.Find("composite_attributes");
  const shlo::Attr* decomposition = op.Find("decomposition");
  if (!attributes || attributes->kind != shlo::Attr::Kind::kDict || !decomposition)
    return cx.Unsupported("metal_kernel: needs its attributes and a reference implementation");
  const shlo::Func* reference = cx.module().FindFunc(decomposition->s);
  if (!reference) return cx.Unsupported("metal_kernel: the reference @" + decomposition->s + " is missing");
  MetalKernelAttrs attrs;
  JMP_ASSIGN_OR_RETURN(attrs.source, StringAttr(cx, attributes->dict, "source"));
  JMP_ASSIGN_OR_RETURN(attrs.entry, StringAttr(cx, attributes->dict, "entry"));
  JMP_ASSIGN_OR_RETURN(attrs.grid, SizeAttr(cx, attributes->dict, "grid"));
  JMP_ASSIGN_OR_RETURN(attrs.threadgroup, SizeAttr(cx, attributes->dict, "threadgroup"));

  std::vector<int> inputs;
  std::vector<TensorType> in_types, out_types;
  for (size_t i = 0; i < op.operands.size(); ++i) {
    if (cx.InType(i).kind != shlo::Type::Kind::kTensor) return cx.Unsupported("metal_kernel: operands must be arrays");
    JMP_ASSIGN_OR_RETURN(int v, cx.In(i));
    inputs.push_back(v);
    in_types.push_back(cx.graph().type(v));
  }
  for (size_t i = 0; i < op.results.size(); ++i) {
    if (cx.OutType(i).kind != shlo::Type::Kind::kTensor) return cx.Unsupported("metal_kernel: results must be arrays");
    out_types.push_back({cx.OutType(i).dtype, cx.OutType(i).shape});
  }
  std::vector<int> captures;
  JMP_ASSIGN_OR_RETURN(
      Graph body,
      cx.BuildSubgraph(
          in_types, [&](const std::vector<int>& params) { return cx.InlineCall(*reference, params); }, &captures));
  if (!captures.empty()) return cx.Unsupported("metal_kernel: the reference reads values other than its arguments");
  if (body.outputs.size() != out_types.size())
    return cx.Unsupported("metal_kernel: the reference returns " + std::to_string(body.outputs.size()) +
                          " arrays, the kernel " + std::to_string(out_types.size()));
  Op kernel = cx.NewOp(OpKind::kMetalKernel, std::move(inputs));
  kernel.attrs = std::move(attrs);
  kernel.subgraphs.push_back(std::move(body));
  std::vector<int> values = cx.EmitOp(std::move(kernel), out_types);
  for (size_t i = 0; i < values.size(); ++i) cx.Bind(i, values[i]);
  return Status::Ok();
}

}  // namespace

void RegisterMetalKernelRules(std::map<std::string, LowerRule>& r) {
  RegisterRule(r, "composite:jax_metal.metal_kernel", &MetalKernel);
}

}  // namespace jmp::mps
