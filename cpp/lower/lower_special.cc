// Composites JAX sends for chlo ops: onto the MPSGraph op where one exists (erf, asinh, top_k),
// otherwise their decomposition is inlined (lower_control_flow.cc).
#include "lower/lower_elementwise.h"
#include "lower/lower_families.h"
#include "lower/lower_order.h"

namespace jmp::mps {

namespace {

template <OpKind K>
Status UnaryComposite(LowerContext& cx) {
  if (cx.op().operands.size() != 1 || cx.op().results.size() != 1) return cx.Unsupported("malformed composite");
  JMP_ASSIGN_OR_RETURN(int x, cx.In(0));
  DType t = cx.DTypeOf(x);
  if (!IsFloat(t)) {
    // Other types: the decomposition.
    const shlo::Attr* d = cx.op().Find("decomposition");
    const shlo::Func* f = d ? cx.module().FindFunc(d->s) : nullptr;
    if (!f) return cx.Unsupported("composite without a decomposition");
    JMP_ASSIGN_OR_RETURN(std::vector<int> r, cx.InlineCall(*f, {x}));
    cx.Bind(0, r.at(0));
    return Status::Ok();
  }
  cx.Bind(0, cx.Unary(K, x));
  return Status::Ok();
}

// top_k along the last axis. Floats are ranked by total order (NaN above +inf) as XLA does, by
// running TopK on total-order integer keys and gathering the values.
Status TopK(LowerContext& cx) {
  const shlo::Attr* attrs = cx.op().Find("composite_attributes");
  int64_t k = -1;
  if (attrs && attrs->kind == shlo::Attr::Kind::kDict) {
    auto it = attrs->dict.find("k");
    if (it != attrs->dict.end()) k = it->second.i;
  }
  if (k < 0 || cx.op().results.size() != 2) return cx.Unsupported("chlo.top_k without k");
  JMP_ASSIGN_OR_RETURN(int x, cx.In(0));
  const Shape shape = cx.ShapeOf(x);
  DType t = cx.DTypeOf(x);
  if (shape.empty() || k > shape.back() || t == DType::kBool || IsComplex(t))
    return cx.Unsupported("top_k of this operand");
  int keys = ToOrdered(cx, IsFloat(t) ? TotalOrderKey(cx, x) : x);
  Shape out = shape;
  out.back() = k;
  Op top = cx.NewOp(OpKind::kTopK, {keys});
  top.attrs = TopKAttrs{k};
  int indices = cx.EmitOp(std::move(top), {TensorType{cx.DTypeOf(keys), out}, TensorType{DType::kI32, out}})[1];
  int values = GatherAlongAxis(cx, x, indices, static_cast<int64_t>(shape.size()) - 1);
  cx.Bind(0, values);
  cx.Bind(1, cx.Cast(indices, cx.OutType(1).dtype));
  return Status::Ok();
}

}  // namespace

void RegisterSpecialRules(std::map<std::string, LowerRule>& r) {
  RegisterRule(r, "composite:chlo.erf", &UnaryComposite<OpKind::kErf>);
  RegisterRule(r, "composite:chlo.asinh", &UnaryComposite<OpKind::kAsinh>);
  RegisterRule(r, "composite:chlo.top_k", &TopK);
}

}  // namespace jmp::mps
