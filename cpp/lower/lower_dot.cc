// dot_general as one batched MatMul: each operand is transposed to [batch, free, contracting] (lhs)
// or [batch, contracting, free] (rhs) and reshaped to rank 3 (or 2 without batch dims).
#include "lower/lower_context.h"
#include "lower/lower_matmul.h"

namespace jmp::mps {

namespace {

int64_t Product(const Shape& shape, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= shape[static_cast<size_t>(d)];
  return n;
}

std::vector<int64_t> FreeDims(size_t rank, const std::vector<int64_t>& batch, const std::vector<int64_t>& contract) {
  std::vector<int64_t> free;
  for (int64_t d = 0; d < static_cast<int64_t>(rank); ++d) {
    bool used = false;
    for (int64_t b : batch) used |= b == d;
    for (int64_t c : contract) used |= c == d;
    if (!used) free.push_back(d);
  }
  return free;
}

std::vector<int64_t> Concat3(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                             const std::vector<int64_t>& c) {
  std::vector<int64_t> out = a;
  out.insert(out.end(), b.begin(), b.end());
  out.insert(out.end(), c.begin(), c.end());
  return out;
}

}  // namespace

StatusOr<int> DotValue(LowerContext& cx, int lhs, int rhs, const std::vector<int64_t>& lb,
                       const std::vector<int64_t>& rb, const std::vector<int64_t>& lc, const std::vector<int64_t>& rc,
                       DType dtype) {
  DType t = dtype;
  // Bool: an OR of ANDs, computed as the count of true products (int32, k < 2^31) compared with 0.
  const bool boolean = t == DType::kBool;
  if (boolean) t = DType::kI32;
  const Shape ls = cx.ShapeOf(lhs), rs = cx.ShapeOf(rhs);
  if (lb.size() != rb.size() || lc.size() != rc.size()) return cx.Unsupported("mismatched dot dimension numbers");
  for (const auto* dims : {&lb, &lc})
    for (int64_t d : *dims)
      if (d < 0 || d >= static_cast<int64_t>(ls.size())) return cx.Unsupported("lhs dot dimension out of range");
  for (const auto* dims : {&rb, &rc})
    for (int64_t d : *dims)
      if (d < 0 || d >= static_cast<int64_t>(rs.size())) return cx.Unsupported("rhs dot dimension out of range");
  std::vector<int64_t> lf = FreeDims(ls.size(), lb, lc), rf = FreeDims(rs.size(), rb, rc);
  int64_t batch = Product(ls, lb), m = Product(ls, lf), k = Product(ls, lc), n = Product(rs, rf);
  // preferred_element_type: the operands are computed in the result's type.
  lhs = cx.Cast(lhs, t);
  rhs = cx.Cast(rhs, t);
  lhs = cx.Transpose(lhs, Concat3(lb, lf, lc));
  rhs = cx.Transpose(rhs, Concat3(rb, rc, rf));
  bool batched = !lb.empty();
  Shape l3 = batched ? Shape{batch, m, k} : Shape{m, k};
  Shape r3 = batched ? Shape{batch, k, n} : Shape{k, n};
  Shape o3 = batched ? Shape{batch, m, n} : Shape{m, n};
  lhs = cx.Reshape(lhs, l3);
  rhs = cx.Reshape(rhs, r3);
  int product = MatMul(cx, lhs, rhs);
  if (boolean) product = cx.Compare(OpKind::kNotEqual, product, cx.Splat(t, o3, 0));
  // The result: batch dims, then lhs's free dims, then rhs's.
  Shape shape;
  for (int64_t d : lb) shape.push_back(ls[static_cast<size_t>(d)]);
  for (int64_t d : lf) shape.push_back(ls[static_cast<size_t>(d)]);
  for (int64_t d : rf) shape.push_back(rs[static_cast<size_t>(d)]);
  return cx.Reshape(product, shape);
}

namespace {

Status LowerDot(LowerContext& cx, int lhs, int rhs, const std::vector<int64_t>& lb, const std::vector<int64_t>& rb,
                const std::vector<int64_t>& lc, const std::vector<int64_t>& rc) {
  const shlo::Type& out = cx.OutType(0);
  JMP_ASSIGN_OR_RETURN(int product, DotValue(cx, lhs, rhs, lb, rb, lc, rc, out.dtype));
  if (cx.ShapeOf(product) != out.shape)
    return cx.Unsupported("dot_general whose result type does not follow from its operands");
  cx.Bind(0, product);
  if (cx.partitioning().num_devices() > 1) cx.RecordDot(product, {lhs, rhs, lb, rb, lc, rc});
  return Status::Ok();
}

Status DotGeneral(LowerContext& cx) {
  const shlo::Attr* dn = cx.op().Find("dot_dimension_numbers");
  if (!dn || dn->kind != shlo::Attr::Kind::kDict) return cx.Unsupported("dot_general without dot_dimension_numbers");
  auto field = [&](const char* name) {
    auto it = dn->dict.find(name);
    return it == dn->dict.end() ? std::vector<int64_t>{} : it->second.ints;
  };
  JMP_ASSIGN_OR_RETURN(int lhs, cx.In(0));
  JMP_ASSIGN_OR_RETURN(int rhs, cx.In(1));
  return LowerDot(cx, lhs, rhs, field("lhs_batching_dimensions"), field("rhs_batching_dimensions"),
                  field("lhs_contracting_dimensions"), field("rhs_contracting_dimensions"));
}

Status Dot(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int lhs, cx.In(0));
  JMP_ASSIGN_OR_RETURN(int rhs, cx.In(1));
  int64_t lc = static_cast<int64_t>(cx.ShapeOf(lhs).size()) - 1;
  return LowerDot(cx, lhs, rhs, {}, {}, {lc}, {0});
}

}  // namespace

void RegisterDotRules(std::map<std::string, LowerRule>& r) {
  RegisterRule(r, "stablehlo.dot_general", &DotGeneral);
  RegisterRule(r, "stablehlo.dot", &Dot);
}

}  // namespace jmp::mps
