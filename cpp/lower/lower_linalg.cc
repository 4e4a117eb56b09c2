// stablehlo.triangular_solve and stablehlo.cholesky (jnp.linalg.solve, inv, cholesky, cho_solve,
// solve_triangular, multivariate normals) as one While of whole-matrix MPS ops each: every iteration
// solves one row (forward substitution) or factors one column (Cholesky-Crout), picking rows and
// columns with GatherAlongAxis, forming the dot products with what is done so far with one MatMul and
// writing the new row or column with a Select. n iterations; no dynamic shapes, nothing MPSGraph lacks.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "lower/lower_families.h"
#include "lower/lower_lapack.h"
#include "lower/lower_matmul.h"
#include "lower/lower_matrix.h"

namespace jmp::mps {

namespace {

int ReverseAxes(LowerContext& cx, int x, std::vector<int64_t> axes) {
  return cx.Emit(OpKind::kReverse, {x}, cx.DTypeOf(x), cx.ShapeOf(x), AxesAttrs{std::move(axes)});
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
  JMP_ASSIGN_OR_RETURN(std::vector<int> done,
                       CountedLoop(cx, bshape[rows], {l, b, x}, [&](int i, const std::vector<int>& c) {
                         int row = PickAlong(cx, c[0], i, rows);  // [..., 1, n]
                         int below = CoordinateIs(cx, OpKind::kLessThan, cx.ShapeOf(row), cols, i);
                         int known = cx.Select(below, row, cx.Splat(cx.DTypeOf(row), cx.ShapeOf(row), 0));
                         Shape one_row = bshape;
                         one_row[rows] = 1;
                         int sum = MatMul(cx, known, c[2]);  // [..., 1, m]
                         int xi = cx.Binary(OpKind::kSubtract, PickAlong(cx, c[1], i, rows), sum);
                         if (!unit_diagonal)
                           xi = cx.Binary(OpKind::kDivide, xi, cx.BroadcastTo(PickAlong(cx, row, i, cols), one_row));
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
  if (UsesLapack(cx.DTypeOf(a))) return LapackTriangularSolve(cx);
  JMP_ASSIGN_OR_RETURN(int b, cx.In(1));
  const Shape ashape = cx.ShapeOf(a), bshape = cx.ShapeOf(b);
  const size_t rank = ashape.size();
  DType t = cx.DTypeOf(b);
  JMP_ASSIGN_OR_RETURN(DType ct, FactorisationType(cx, t));
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
// definite (a pivot <= 0, as potrf decides: positive semidefinite singular matrices fail too) gives a
// factor of NaNs, as XLA's CPU backend does.
Status Cholesky(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int a, cx.In(0));
  if (UsesLapack(cx.DTypeOf(a))) return LapackCholesky(cx);
  const Shape shape = cx.ShapeOf(a);
  const size_t rank = shape.size();
  DType t = cx.DTypeOf(a);
  JMP_ASSIGN_OR_RETURN(DType ct, FactorisationType(cx, t));
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
  JMP_ASSIGN_OR_RETURN(
      std::vector<int> done, CountedLoop(cx, shape[rows], {a, l}, [&](int j, const std::vector<int>& c) {
        int lj = PickAlong(cx, c[1], j, rows);  // row j of L: zero from column j on
        int products = MatMul(cx, c[1], SwapLastTwo(cx, lj));
        int col = cx.Binary(OpKind::kSubtract, PickAlong(cx, c[0], j, cols), products);
        // A pivot that is not positive (zero included: a singular matrix) fails, as LAPACK's potrf does.
        int pivot = PickAlong(cx, col, j, rows);
        int positive = cx.Compare(OpKind::kGreaterThan, pivot, cx.Splat(ct, cx.ShapeOf(pivot), 0));
        int root = cx.Select(positive, cx.Unary(OpKind::kSquareRoot, pivot), cx.Splat(ct, cx.ShapeOf(pivot), NAN));
        int diag = cx.BroadcastTo(root, column);
        int scaled =
            cx.Select(CoordinateIs(cx, OpKind::kEqual, column, rows, j), diag, cx.Binary(OpKind::kDivide, col, diag));
        int kept = cx.Select(CoordinateIs(cx, OpKind::kGreaterThanOrEqualTo, column, rows, j), scaled,
                             cx.Splat(ct, column, 0));
        int is_col_j = CoordinateIs(cx, OpKind::kEqual, shape, cols, j);
        return std::vector<int>{c[0], cx.Select(is_col_j, cx.BroadcastTo(kept, shape), c[1])};
      }));
  // A failed factorisation is NaN throughout, per matrix, as on XLA's CPU backend.
  int factor = done[1];
  int failed = AnyNaNPerMatrix(cx, factor);
  factor = cx.Select(cx.BroadcastTo(failed, shape), cx.Splat(ct, shape, NAN), factor);
  if (!lower) factor = SwapLastTwo(cx, factor);
  cx.Bind(0, cx.Cast(factor, t));
  return Status::Ok();
}

// The Householder vector of column j of the factored matrix: 1 at row j, the stored entries below it,
// zero above ([..., m, 1]).
int HouseholderVector(LowerContext& cx, int factored, int j, const Shape& column) {
  const size_t rows = column.size() - 2;
  int stored = PickAlong(cx, factored, j, rows + 1);
  int below = CoordinateIs(cx, OpKind::kGreaterThan, column, rows, j);
  int v = cx.Select(below, stored, cx.Splat(cx.DTypeOf(stored), column, 0));
  return cx.Select(CoordinateIs(cx, OpKind::kEqual, column, rows, j), cx.Splat(cx.DTypeOf(stored), column, 1), v);
}

// x - tau v (v^T x) for x [..., m, n], v [..., m, 1], tau [..., 1, 1]: a reflector applied.
int Reflect(LowerContext& cx, int x, int v, int tau) {
  Shape xs = cx.ShapeOf(x);
  int vtx = MatMul(cx, SwapLastTwo(cx, v), x);  // [..., 1, n]
  int outer = MatMul(cx, v, vtx);               // [..., m, n]
  return cx.Binary(OpKind::kSubtract, x, cx.Binary(OpKind::kMultiply, cx.BroadcastTo(tau, xs), outer));
}

// XLA's "Qr" custom call, LAPACK's geqrf: R in and above the diagonal, the Householder vectors v_j
// (unit leading entry implied) below it, and taus [..., min(m, n)], with H_j = I - tau_j v_j v_j^T and
// LAPACK's convention beta = -sign(alpha) ||x|| (tau = 0 where the column is already reduced).
Status Qr(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int a, cx.In(0));
  if (UsesLapack(cx.DTypeOf(a))) return LapackQr(cx);
  const Shape shape = cx.ShapeOf(a);
  const size_t rank = shape.size();
  DType t = cx.DTypeOf(a);
  JMP_ASSIGN_OR_RETURN(DType ct, FactorisationType(cx, t));
  if (rank < 2 || cx.op().results.size() != 2) return cx.Unsupported("needs a matrix and two results");
  const size_t rows = rank - 2, cols = rank - 1;
  const int64_t k = std::min(shape[rows], shape[cols]);
  Shape taus_shape(shape.begin(), shape.end() - 2);
  taus_shape.push_back(k);
  if (k == 0) {
    cx.Bind(0, a);
    cx.Bind(1, cx.Splat(t, taus_shape, 0));
    return Status::Ok();
  }
  Shape column = shape, scalar = shape, tau_row = taus_shape;
  column[cols] = 1;
  scalar[rows] = scalar[cols] = 1;
  tau_row.insert(tau_row.end() - 1, 1);  // [..., 1, k]
  int w = cx.Cast(a, ct);
  JMP_ASSIGN_OR_RETURN(
      std::vector<int> done,
      CountedLoop(cx, k, {w, cx.Splat(ct, shape, 0), cx.Splat(ct, tau_row, 0)}, [&](int j, const std::vector<int>& c) {
        // x: column j from row j down.
        int col = PickAlong(cx, c[0], j, cols);
        int x =
            cx.Select(CoordinateIs(cx, OpKind::kGreaterThanOrEqualTo, column, rows, j), col, cx.Splat(ct, column, 0));
        int alpha = PickAlong(cx, x, j, rows);  // [..., 1, 1]
        int tail = cx.Select(CoordinateIs(cx, OpKind::kGreaterThan, column, rows, j), x, cx.Splat(ct, column, 0));
        int tail_sq = SumOver(cx, cx.Binary(OpKind::kMultiply, tail, tail), {static_cast<int64_t>(rows)});
        int norm =
            cx.Unary(OpKind::kSquareRoot, cx.Binary(OpKind::kAdd, cx.Binary(OpKind::kMultiply, alpha, alpha), tail_sq));
        int negative = cx.Compare(OpKind::kLessThan, alpha, cx.Splat(ct, scalar, 0));
        int beta = cx.Select(negative, norm, cx.Unary(OpKind::kNegative, norm));
        int reduced = cx.Compare(OpKind::kEqual, tail_sq, cx.Splat(ct, scalar, 0));
        int tau = cx.Select(reduced, cx.Splat(ct, scalar, 0),
                            cx.Binary(OpKind::kDivide, cx.Binary(OpKind::kSubtract, beta, alpha), beta));
        int scale = cx.Select(reduced, cx.Splat(ct, scalar, 1), cx.Binary(OpKind::kSubtract, alpha, beta));
        int v_tail = cx.Binary(OpKind::kDivide, tail, cx.BroadcastTo(scale, column));
        int v = cx.Select(CoordinateIs(cx, OpKind::kEqual, column, rows, j), cx.Splat(ct, column, 1), v_tail);
        int reflected = Reflect(cx, c[0], v, tau);
        // Column j becomes exactly (.., beta, 0, ..): no rounding residue below the diagonal.
        int new_col = cx.Select(CoordinateIs(cx, OpKind::kEqual, column, rows, j),
                                cx.BroadcastTo(cx.Select(reduced, alpha, beta), column), x);
        new_col = cx.Select(
            CoordinateIs(cx, OpKind::kLessThan, column, rows, j), col,
            cx.Select(CoordinateIs(cx, OpKind::kGreaterThan, column, rows, j), cx.Splat(ct, column, 0), new_col));
        int is_col_j = CoordinateIs(cx, OpKind::kEqual, shape, cols, j);
        int next_w = cx.Select(is_col_j, cx.BroadcastTo(new_col, shape), reflected);
        int next_v = cx.Select(is_col_j, cx.BroadcastTo(v_tail, shape), c[1]);
        int next_tau = cx.Select(CoordinateIs(cx, OpKind::kEqual, tau_row, tau_row.size() - 1, j),
                                 cx.BroadcastTo(tau, tau_row), c[2]);
        return std::vector<int>{next_w, next_v, next_tau};
      }));
  // R on and above the diagonal, the vectors below it.
  int above = cx.Compare(OpKind::kLessThanOrEqualTo, cx.Iota(shape, rows), cx.Iota(shape, cols));
  int factored = cx.Select(above, done[0], done[1]);
  cx.Bind(0, cx.Cast(factored, t));
  cx.Bind(1, cx.Cast(cx.Reshape(done[2], taus_shape), t));
  return Status::Ok();
}

// XLA's "ProductOfElementaryHouseholderReflectors" (LAPACK's orgqr): the first n columns of
// H_0 H_1 ... H_{k-1} for the vectors below the diagonal of a [..., m, n] and taus [..., k], applied
// right to left to the m x n identity.
Status HouseholderProduct(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int a, cx.In(0));
  if (UsesLapack(cx.DTypeOf(a))) return LapackHouseholderProduct(cx);
  JMP_ASSIGN_OR_RETURN(int taus, cx.In(1));
  const Shape shape = cx.ShapeOf(a), tshape = cx.ShapeOf(taus);
  const size_t rank = shape.size();
  DType t = cx.DTypeOf(a);
  JMP_ASSIGN_OR_RETURN(DType ct, FactorisationType(cx, t));
  if (rank < 2 || tshape.size() != rank - 1 || tshape.back() > std::min(shape[rank - 2], shape[rank - 1]))
    return cx.Unsupported("needs a matrix and at most min(m, n) taus");
  const size_t rows = rank - 2, cols = rank - 1;
  const int64_t k = tshape.back();
  int eye = Identity(cx, shape, ct);
  if (k == 0) {
    cx.Bind(0, cx.Cast(eye, t));
    return Status::Ok();
  }
  Shape column = shape, scalar = shape, tau_row = tshape;
  column[cols] = 1;
  scalar[rows] = scalar[cols] = 1;
  tau_row.insert(tau_row.end() - 1, 1);
  int tau_rows = cx.Reshape(cx.Cast(taus, ct), tau_row);
  JMP_ASSIGN_OR_RETURN(
      std::vector<int> done, CountedLoop(cx, k, {cx.Cast(a, ct), tau_rows, eye}, [&](int i, const std::vector<int>& c) {
        int j = cx.Binary(OpKind::kSubtract, cx.Scalar(DType::kI32, static_cast<double>(k - 1)), i);  // right to left
        int v = HouseholderVector(cx, c[0], j, column);
        int tau = cx.Reshape(PickAlong(cx, c[1], j, tau_row.size() - 1), scalar);
        return std::vector<int>{c[0], c[1], Reflect(cx, c[2], v, tau)};
      }));
  cx.Bind(0, cx.Cast(done[2], t));
  return Status::Ok();
}

}  // namespace

void RegisterLinalgRules(std::map<std::string, LowerRule>& r) {
  RegisterRule(r, "stablehlo.triangular_solve", &TriangularSolve);
  RegisterRule(r, "stablehlo.cholesky", &Cholesky);
  // What JAX emits for QR on platforms without LAPACK kernels.
  RegisterRule(r, "custom_call:Qr", &Qr);
  RegisterRule(r, "custom_call:ProductOfElementaryHouseholderReflectors", &HouseholderProduct);
}

}  // namespace jmp::mps
