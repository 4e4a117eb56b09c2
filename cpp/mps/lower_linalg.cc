// stablehlo.triangular_solve and stablehlo.cholesky (jnp.linalg.solve, inv, cholesky, cho_solve,
// solve_triangular, multivariate normals) as one While of whole-matrix MPS ops each: every iteration
// solves one row (forward substitution) or factors one column (Cholesky-Crout), picking rows and
// columns with GatherAlongAxis, forming the dot products with what is done so far with one MatMul and
// writing the new row or column with a Select. n iterations; no dynamic shapes, nothing MPSGraph lacks.
#include <cmath>
#include <functional>
#include <map>

#include "mps/lower_families.h"

namespace jmp::mps {

namespace {

int Iota(LowerContext& cx, const Shape& shape, size_t axis) {
  Op& op = cx.Emit(OpKind::kCoordinateAlongAxis, {}, DType::kI32, shape);
  op.axes = {static_cast<int64_t>(axis)};
  return op.outputs[0];
}

// x's slice at index i (a rank-0 int32 value) along `axis`, the axis kept with size 1.
int PickAlong(LowerContext& cx, int x, int i, size_t axis) {
  Shape shape = cx.ShapeOf(x);
  shape[axis] = 1;
  return GatherAlongAxis(cx, x, cx.BroadcastTo(i, shape), static_cast<int64_t>(axis));
}

// Lanes of `shape` whose coordinate along `axis` compares to i (rank-0 int32) as `kind` says.
int CoordinateIs(LowerContext& cx, OpKind kind, const Shape& shape, size_t axis, int i) {
  return cx.Compare(kind, Iota(cx, shape, axis), cx.BroadcastTo(i, shape));
}

int SwapLastTwo(LowerContext& cx, int x) {
  std::vector<int64_t> perm;
  size_t rank = cx.ShapeOf(x).size();
  for (size_t d = 0; d < rank; ++d) perm.push_back(static_cast<int64_t>(d));
  std::swap(perm[rank - 1], perm[rank - 2]);
  return cx.Transpose(x, perm);
}

int ReverseAxes(LowerContext& cx, int x, std::vector<int64_t> axes) {
  Op& op = cx.Emit(OpKind::kReverse, {x}, cx.DTypeOf(x), cx.ShapeOf(x));
  op.axes = std::move(axes);
  return op.outputs[0];
}

using LoopBody = std::function<std::vector<int>(int i, const std::vector<int>& carries)>;

// body(i, carries) -> next carries for i = 0 .. n-1, as one While; the final carries.
StatusOr<std::vector<int>> CountedLoop(LowerContext& cx, int64_t n, const std::vector<int>& carries, const LoopBody& body) {
  std::vector<int> init = {cx.Scalar(DType::kI32, 0)};
  init.insert(init.end(), carries.begin(), carries.end());
  std::vector<TensorType> types;
  for (int v : init) types.push_back(cx.Type(v));
  std::vector<int> captures;
  JMP_ASSIGN_OR_RETURN(Graph cond, cx.BuildSubgraph(types, [&](const std::vector<int>& p) -> StatusOr<std::vector<int>> {
    return std::vector<int>{cx.Compare(OpKind::kLessThan, p[0], cx.Scalar(DType::kI32, static_cast<double>(n)))};
  }, &captures));
  if (!captures.empty()) return cx.Unsupported("loop condition captured outer values");
  JMP_ASSIGN_OR_RETURN(Graph step, cx.BuildSubgraph(types, [&](const std::vector<int>& p) -> StatusOr<std::vector<int>> {
    std::vector<int> next = body(p[0], std::vector<int>(p.begin() + 1, p.end()));
    next.insert(next.begin(), cx.Binary(OpKind::kAdd, p[0], cx.Scalar(DType::kI32, 1)));
    return next;
  }, &captures));
  if (!captures.empty()) return cx.Unsupported("loop body captured outer values");
  Op* w = nullptr;
  cx.EmitMulti(OpKind::kWhile, init, types, &w);
  w->subgraphs.push_back(std::move(cond));
  w->subgraphs.push_back(std::move(step));
  return std::vector<int>(w->outputs.begin() + 1, w->outputs.end());
}

// The float type a factorisation computes in: float32 (f16/bf16 widened), or an error.
StatusOr<DType> ComputeType(LowerContext& cx, DType t) {
  if (t == DType::kF32 || t == DType::kF16 || t == DType::kBF16) return DType::kF32;
  return cx.Unsupported("is supported for float32, float16 and bfloat16, not " + std::string(DTypeName(t)));
}

bool FlagAttr(LowerContext& cx, const char* name) {
  const shlo::Attr* a = cx.op().Find(name);
  return a && a->kind == shlo::Attr::Kind::kBool && a->b;
}

// Solves L X = B for lower-triangular L [..., n, n] and B [..., n, m] by forward substitution:
// X_i = (B_i - sum_{j<i} L_ij X_j) / L_ii. Entries of L above the diagonal are never read (masked
// before the product, so an inf there cannot turn into NaN).
StatusOr<int> ForwardSubstitution(LowerContext& cx, int l, int b, bool unit_diagonal) {
  const Shape bshape = cx.ShapeOf(b);
  const size_t rank = bshape.size();
  const size_t rows = rank - 2, cols = rank - 1;
  const DType type = cx.DTypeOf(b);
  int x = cx.Splat(type, bshape, 0);
  // The body below runs in the loop's own graph: it may use only its carries `c` (value ids are
  // per graph), and types and shapes copied from outside.
  JMP_ASSIGN_OR_RETURN(std::vector<int> done, CountedLoop(cx, bshape[rows], {l, b, x}, [&](int i, const std::vector<int>& c) {
    int row = PickAlong(cx, c[0], i, rows);                                    // [..., 1, n]
    int below = CoordinateIs(cx, OpKind::kLessThan, cx.ShapeOf(row), cols, i);
    int known = cx.Select(below, row, cx.Splat(cx.DTypeOf(row), cx.ShapeOf(row), 0));
    Shape one_row = bshape;
    one_row[rows] = 1;
    int sum = cx.Emit(OpKind::kMatMul, {known, c[2]}, type, one_row).outputs[0];  // [..., 1, m]
    int xi = cx.Binary(OpKind::kSubtract, PickAlong(cx, c[1], i, rows), sum);
    if (!unit_diagonal) xi = cx.Binary(OpKind::kDivide, xi, cx.BroadcastTo(PickAlong(cx, row, i, cols), one_row));
    int is_row_i = CoordinateIs(cx, OpKind::kEqual, bshape, rows, i);
    return std::vector<int>{c[0], c[1], cx.Select(is_row_i, cx.BroadcastTo(xi, bshape), c[2])};
  }));
  return done[2];
}

// op(a) X = b (left side) or X op(a) = b, op the transpose or not, a lower or upper triangular. Every
// case becomes a lower-triangular left-side solve: transposes turn right into left and upper into
// lower, and reversing rows and columns turns upper into lower.
Status TriangularSolve(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int a, cx.In(0));
  JMP_ASSIGN_OR_RETURN(int b, cx.In(1));
  const Shape ashape = cx.ShapeOf(a), bshape = cx.ShapeOf(b);
  const size_t rank = ashape.size();
  DType t = cx.DTypeOf(b);
  JMP_ASSIGN_OR_RETURN(DType ct, ComputeType(cx, t));
  if (rank < 2 || bshape.size() != rank || ashape[rank - 1] != ashape[rank - 2] || cx.DTypeOf(a) != t)
    return cx.Unsupported("needs square matrices a and matching b");
  bool left = FlagAttr(cx, "left_side"), lower = FlagAttr(cx, "lower"), unit = FlagAttr(cx, "unit_diagonal");
  const shlo::Attr* tr = cx.op().Find("transpose_a");
  bool transpose = tr && (tr->s == "TRANSPOSE" || tr->s == "ADJOINT");
  const int64_t n = ashape[rank - 1];
  if (bshape[left ? rank - 2 : rank - 1] != n) return cx.Unsupported("b does not match a");
  for (size_t d = 0; d + 2 < rank; ++d)
    if (ashape[d] != bshape[d]) return cx.Unsupported("batch dimensions of a and b differ");
  if (n == 0 || cx.Type(b).NumElements() == 0) {
    cx.Bind(0, b);
    return Status::Ok();
  }
  a = cx.Cast(a, ct);
  b = cx.Cast(b, ct);
  if (transpose) {
    a = SwapLastTwo(cx, a);
    lower = !lower;
  }
  if (!left) {  // X A = B  <=>  A^T X^T = B^T
    a = SwapLastTwo(cx, a);
    lower = !lower;
    b = SwapLastTwo(cx, b);
  }
  const int64_t rows = static_cast<int64_t>(rank - 2), cols = static_cast<int64_t>(rank - 1);
  if (!lower) {  // J U J is lower triangular for the reversal J
    a = ReverseAxes(cx, a, {rows, cols});
    b = ReverseAxes(cx, b, {rows});
  }
  JMP_ASSIGN_OR_RETURN(int x, ForwardSubstitution(cx, a, b, unit));
  if (!lower) x = ReverseAxes(cx, x, {rows});
  if (!left) x = SwapLastTwo(cx, x);
  cx.Bind(0, cx.Cast(x, t));
  return Status::Ok();
}

// Cholesky-Crout, one column per iteration: c = A[:, j] - L L[j, :]^T, L_jj = sqrt(c_j), L_ij = c_i /
// L_jj below the diagonal. Only a's lower triangle is read (its upper one for lower = false, by
// factoring the transpose); the result's other triangle is zero. A matrix that is not positive
// definite gives a factor of NaNs, as XLA's CPU backend does.
Status Cholesky(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int a, cx.In(0));
  const Shape shape = cx.ShapeOf(a);
  const size_t rank = shape.size();
  DType t = cx.DTypeOf(a);
  JMP_ASSIGN_OR_RETURN(DType ct, ComputeType(cx, t));
  if (rank < 2 || shape[rank - 1] != shape[rank - 2]) return cx.Unsupported("needs square matrices");
  bool lower = !cx.op().Find("lower") || FlagAttr(cx, "lower");
  if (shape[rank - 1] == 0 || cx.Type(a).NumElements() == 0) {
    cx.Bind(0, a);
    return Status::Ok();
  }
  a = cx.Cast(a, ct);
  if (!lower) a = SwapLastTwo(cx, a);
  const size_t rows = rank - 2, cols = rank - 1;
  Shape column = shape;
  column[cols] = 1;
  int l = cx.Splat(ct, shape, 0);
  JMP_ASSIGN_OR_RETURN(std::vector<int> done, CountedLoop(cx, shape[rows], {a, l}, [&](int j, const std::vector<int>& c) {
    int lj = PickAlong(cx, c[1], j, rows);  // row j of L: zero from column j on
    int products = cx.Emit(OpKind::kMatMul, {c[1], SwapLastTwo(cx, lj)}, ct, column).outputs[0];
    int col = cx.Binary(OpKind::kSubtract, PickAlong(cx, c[0], j, cols), products);
    int diag = cx.BroadcastTo(cx.Unary(OpKind::kSquareRoot, PickAlong(cx, col, j, rows)), column);
    int scaled = cx.Select(CoordinateIs(cx, OpKind::kEqual, column, rows, j), diag, cx.Binary(OpKind::kDivide, col, diag));
    int kept = cx.Select(CoordinateIs(cx, OpKind::kGreaterThanOrEqualTo, column, rows, j), scaled, cx.Splat(ct, column, 0));
    int is_col_j = CoordinateIs(cx, OpKind::kEqual, shape, cols, j);
    return std::vector<int>{c[0], cx.Select(is_col_j, cx.BroadcastTo(kept, shape), c[1])};
  }));
  // A failed factorisation is NaN throughout, per matrix, as on XLA's CPU backend.
  int factor = done[1];
  int nan = cx.Emit(OpKind::kIsNaN, {factor}, DType::kBool, shape).outputs[0];
  Shape one = shape;
  one[rows] = one[cols] = 1;
  Op& any_nan = cx.Emit(OpKind::kReductionOr, {nan}, DType::kBool, one);
  any_nan.axes = {static_cast<int64_t>(rows), static_cast<int64_t>(cols)};
  int failed = any_nan.outputs[0];  // read before emitting more ops moves the op list
  factor = cx.Select(cx.BroadcastTo(failed, shape), cx.Splat(ct, shape, NAN), factor);
  if (!lower) factor = SwapLastTwo(cx, factor);
  cx.Bind(0, cx.Cast(factor, t));
  return Status::Ok();
}

}  // namespace

void RegisterLinalgRules(std::map<std::string, LowerRule>& r) {
  RegisterRule(r, "stablehlo.triangular_solve", &TriangularSolve);
  RegisterRule(r, "stablehlo.cholesky", &Cholesky);
}

}  // namespace jmp::mps
