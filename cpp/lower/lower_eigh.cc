// XLA's "Eigh" custom call: the eigenvalues and eigenvectors of symmetric matrices. JAX emits it for
// eigh on platforms without LAPACK or cuSOLVER (the plugin's Python side registers JAX's TPU lowering
// for "metal": it calls this for matrices up to 256 and splits larger ones with QDWH first), so it
// carries jnp.linalg.eigh, svd, pinv, lstsq and matrix 2-norms.
//
// Cyclic Jacobi in parallel order: the matrix is padded to even size m with a dummy index 0 that is
// never coupled to anything, positions (2k, 2k+1) are rotated together, n/2 disjoint rotations as a few
// whole-matrix ops, then every index but 0 moves one seat round a circle (the round-robin tournament),
// so m - 1 steps pair every two indices once: one sweep. Rotations are applied in Rutishauser's form
// x_p - s (x_q + tau x_p), tau = s / (1 + c): with c and s rounded, c x_p - s x_q would stretch every
// vector by up to an ulp per rotation, thousands of rotations per column. Each sweep ends by
// symmetrising (rows and columns round differently); sweeps repeat until the off-diagonal mass is below
// tol^2 of the total (the Frobenius norm is rotation invariant) or stops shrinking, then one more,
// whose quadratic convergence takes the residue to rounding level.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "lower/custom_call_config.h"
#include "lower/lower_families.h"
#include "lower/lower_lapack.h"
#include "lower/lower_matrix.h"

namespace jmp::mps {

namespace {

// Which seat's occupant each seat takes in the next round of the circle method: seats (2k, 2k+1)
// play each other, seat 0 stays, everyone else moves one place round.
std::vector<int32_t> NextRound(int64_t m) {
  const int64_t h = m / 2;
  std::vector<int32_t> from(static_cast<size_t>(m));
  auto top = [](int64_t k) { return static_cast<size_t>(2 * k); };
  auto bottom = [](int64_t k) { return static_cast<size_t>(2 * k + 1); };
  from[top(0)] = 0;
  if (h == 1) {
    from[bottom(0)] = 1;
    return from;
  }
  from[top(1)] = static_cast<int32_t>(bottom(0));
  for (int64_t k = 1; k + 1 < h; ++k) from[top(k + 1)] = static_cast<int32_t>(top(k));
  from[bottom(h - 1)] = static_cast<int32_t>(top(h - 1));
  for (int64_t k = 0; k + 1 < h; ++k) from[bottom(k)] = static_cast<int32_t>(bottom(k + 1));
  return from;
}

Shape With(Shape batch, std::initializer_list<int64_t> tail) {
  batch.insert(batch.end(), tail);
  return batch;
}

// Every matrix's entries x[i, min(i + offset, m - 1)] as [..., m, 1].
int Diagonal(LowerContext& cx, int x, int64_t offset = 0) {
  Shape mat = cx.ShapeOf(x);
  const int64_t m = mat.back();
  std::vector<int32_t> columns;
  for (int64_t i = 0; i < m; ++i) columns.push_back(static_cast<int32_t>(std::min(i + offset, m - 1)));
  Shape column = mat;
  column.back() = 1;
  int index = cx.BroadcastTo(cx.Reshape(cx.Int32Constant({m}, columns), {m, 1}), column);
  return GatherAlongAxis(cx, x, index, static_cast<int64_t>(mat.size()) - 1);
}

// The largest off-diagonal share of the squared Frobenius norm over the batch (a float scalar).
int OffDiagonalShare(LowerContext& cx, int x) {
  Shape mat = cx.ShapeOf(x);
  const int64_t rows = static_cast<int64_t>(mat.size()) - 2, cols = rows + 1;
  DType t = cx.DTypeOf(x);
  int squares = cx.Binary(OpKind::kMultiply, x, x);
  int total = SumOver(cx, squares, {rows, cols});
  int off_mask = cx.Binary(OpKind::kSubtract, cx.Splat(t, mat, 1), Identity(cx, mat, t));
  int off = SumOver(cx, cx.Binary(OpKind::kMultiply, squares, off_mask), {rows, cols});
  Shape one = cx.ShapeOf(total);
  int empty = cx.Compare(OpKind::kEqual, total, cx.Splat(t, one, 0));
  int share = cx.Binary(OpKind::kDivide, off, total);
  // A zero matrix is diagonal; one with a NaN is done (its result becomes NaN) and must not stop the
  // batch's other matrices.
  int nan = cx.Emit(OpKind::kIsNaN, {share}, DType::kBool, one);
  share = cx.Select(cx.Binary(OpKind::kLogicalOr, empty, nan), cx.Splat(t, one, 0), share);
  std::vector<int64_t> all;
  for (size_t d = 0; d < mat.size(); ++d) all.push_back(static_cast<int64_t>(d));
  int result = cx.Emit(OpKind::kReductionMaximum, {share}, t, Shape(mat.size(), 1), AxesAttrs{all});
  return cx.Reshape(result, {});
}

// The Jacobi rotation that zeroes a_pq of each pair's 2x2 block, as (s, tau = s / (1 + c)) [..., h, 1]
// (Golub and Van Loan's symmetric Schur decomposition): with the angle's cotangent-of-double
// z = (a_qq - a_pp) / (2 a_pq), t = sign(z) / (|z| + sqrt(1 + z^2)), c = 1 / sqrt(1 + t^2), s = t c;
// the identity where a_pq is already zero.
std::pair<int, int> Rotations(LowerContext& cx, int app, int aqq, int apq) {
  Shape s = cx.ShapeOf(app);
  DType t = cx.DTypeOf(app);
  auto k = [&](double v) { return cx.Splat(t, s, v); };
  auto mul = [&](int a, int b) { return cx.Binary(OpKind::kMultiply, a, b); };
  auto add = [&](int a, int b) { return cx.Binary(OpKind::kAdd, a, b); };
  auto div = [&](int a, int b) { return cx.Binary(OpKind::kDivide, a, b); };
  int zero = cx.Compare(OpKind::kEqual, apq, k(0));
  int safe_apq = cx.Select(zero, k(1), apq);
  int z = div(cx.Binary(OpKind::kSubtract, aqq, app), mul(k(2), safe_apq));
  int abs_z = cx.Unary(OpKind::kAbsolute, z);
  // sqrt(1 + z^2) without overflowing: |z| sqrt(1 + 1/z^2) once |z| > 1.
  int big = cx.Compare(OpKind::kGreaterThan, abs_z, k(1));
  int inv = div(k(1), cx.Select(big, z, k(1)));
  int root = cx.Select(big, mul(abs_z, cx.Unary(OpKind::kSquareRoot, add(k(1), mul(inv, inv)))),
                       cx.Unary(OpKind::kSquareRoot, add(k(1), mul(z, z))));
  int sign = cx.Select(cx.Compare(OpKind::kLessThan, z, k(0)), k(-1), k(1));
  int tan = div(sign, add(abs_z, root));
  int c = div(k(1), cx.Unary(OpKind::kSquareRoot, add(k(1), mul(tan, tan))));
  int sn = cx.Select(zero, k(0), mul(tan, c));
  return {sn, div(sn, add(k(1), c))};
}

// x's entries at p = 2k and q = 2k+1 along `axis` (of size m) replaced by c x_p - s x_q and
// s x_p + c x_q, computed as x_p - s (x_q + tau x_p) and x_q + s (x_p - tau x_q); s and tau [..., h, 1].
int RotatePairs(LowerContext& cx, int x, size_t axis, int s, int tau) {
  const Shape shape = cx.ShapeOf(x);
  const DType t = cx.DTypeOf(x);
  const int64_t h = shape[axis] / 2;
  Shape split = shape;  // [..., h, 2, ...] with the pair index at axis + 1
  split[axis] = h;
  split.insert(split.begin() + static_cast<std::ptrdiff_t>(axis) + 1, 2);
  int pairs = cx.Reshape(x, split);
  Shape half = split;
  half[axis + 1] = 1;
  Shape starts(split.size(), 0), ends = split;
  ends[axis + 1] = 1;
  int xp = cx.Slice(pairs, starts, ends);
  starts[axis + 1] = 1;
  ends[axis + 1] = 2;
  int xq = cx.Slice(pairs, starts, ends);
  // c and s laid along `axis` of `half`, broadcast over the rest.
  Shape coef(half.size(), 1);
  for (size_t d = 0; d + 2 < shape.size(); ++d) coef[d] = shape[d];
  coef[axis] = h;
  int sb = cx.BroadcastTo(cx.Reshape(s, coef), half);
  int tb = cx.BroadcastTo(cx.Reshape(tau, coef), half);
  auto mul = [&](int a, int b) { return cx.Binary(OpKind::kMultiply, a, b); };
  int np = cx.Binary(OpKind::kSubtract, xp, mul(sb, cx.Binary(OpKind::kAdd, xq, mul(tb, xp))));
  int nq = cx.Binary(OpKind::kAdd, xq, mul(sb, cx.Binary(OpKind::kSubtract, xp, mul(tb, xq))));
  int joined = cx.Emit(OpKind::kConcat, {np, nq}, t, split, AxisAttrs{static_cast<int64_t>(axis) + 1});
  return cx.Reshape(joined, shape);
}

// x with seat i along `axis` taking the entry at seat from[i].
int Reseat(LowerContext& cx, int x, size_t axis, const std::vector<int32_t>& from) {
  const Shape shape = cx.ShapeOf(x);
  Shape along(shape.size(), 1);
  along[axis] = shape[axis];
  int index = cx.BroadcastTo(cx.Reshape(cx.Int32Constant({static_cast<int64_t>(from.size())}, from), along), shape);
  return GatherAlongAxis(cx, x, index, static_cast<int64_t>(axis));
}

// One round: every seat pair (2k, 2k+1) of a rotated to zero its off-diagonal entry (rows and columns
// of a, columns of v), then everyone but seat 0 moves on.
std::vector<int> Round(LowerContext& cx, int a, int v, const std::vector<int32_t>& next) {
  const Shape mat = cx.ShapeOf(a);
  const size_t rows = mat.size() - 2, cols = mat.size() - 1;
  const int64_t h = mat[cols] / 2;
  Shape batch(mat.begin(), mat.end() - 2);
  Shape pair = With(batch, {h, 2});
  int diag = cx.Reshape(Diagonal(cx, a), pair);
  int super = cx.Reshape(Diagonal(cx, a, 1), pair);  // a[i, i + 1] at row i
  Shape first_end = pair, second_start(pair.size(), 0);
  first_end.back() = 1;
  second_start.back() = 1;
  int app = cx.Slice(diag, Shape(pair.size(), 0), first_end);
  int aqq = cx.Slice(diag, second_start, pair);
  int apq = cx.Slice(super, Shape(pair.size(), 0), first_end);
  auto [s, tau] = Rotations(cx, app, aqq, apq);
  a = RotatePairs(cx, RotatePairs(cx, a, rows, s, tau), cols, s, tau);
  v = RotatePairs(cx, v, cols, s, tau);
  return {Reseat(cx, Reseat(cx, a, rows, next), cols, next), Reseat(cx, v, cols, next)};
}

Status Eigh(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int a, cx.In(0));
  const Shape shape = cx.ShapeOf(a);
  const size_t rank = shape.size();
  const DType t = cx.DTypeOf(a);
  if (UsesLapack(t)) return LapackEigh(cx);
  JMP_ASSIGN_OR_RETURN(DType ct, FactorisationType(cx, t));
  if (rank < 2 || shape[rank - 1] != shape[rank - 2] || cx.op().results.size() != 2)
    return cx.Unsupported("needs square matrices and two results (eigenvectors, eigenvalues)");
  // JAX's "lower,sort_eigenvalues,max_sweeps,tol" (stablehlo/custom_calls.def); a bound that is not
  // positive means the default.
  StatusOr<CustomCallConfig> config = CustomCallConfig::Of(cx.op());
  if (!config.ok()) return cx.Unsupported(config.status().message());
  const bool lower = config->Bool("lower", true), sort = config->Bool("sort_eigenvalues", true);
  const int64_t max_sweeps = config->Int("max_sweeps", 0) > 0 ? config->Int("max_sweeps", 0) : 100;
  const double config_tol = config->Float("tol", 0) > 0 ? config->Float("tol", 0) : 1e-6;
  const size_t rows = rank - 2, cols = rank - 1;
  const int64_t n = shape[cols];
  Shape batch(shape.begin(), shape.end() - 2);
  Shape values_shape = With(batch, {n});
  if (n == 0 || cx.Type(a).NumElements() == 0) {
    cx.Bind(0, a);
    cx.Bind(1, cx.Splat(t, values_shape, 0));
    return Status::Ok();
  }
  int x = cx.Cast(a, ct);
  // The symmetric matrix the referenced triangle describes.
  int row = cx.Iota(shape, static_cast<int64_t>(rows)), col = cx.Iota(shape, static_cast<int64_t>(cols));
  int keep = cx.Compare(lower ? OpKind::kGreaterThanOrEqualTo : OpKind::kLessThanOrEqualTo, row, col);
  x = cx.Select(keep, x, SwapLastTwo(cx, x));
  // Even size with the dummy seat 0 in front when n is odd.
  const int64_t pad = n % 2, m = n + pad;
  const Shape mat = With(batch, {m, m});
  if (pad) {
    int tall = cx.Emit(OpKind::kConcat, {cx.Splat(ct, With(batch, {1, n}), 0), x}, ct, With(batch, {m, n}),
                       AxisAttrs{static_cast<int64_t>(rows)});
    x = cx.Emit(OpKind::kConcat, {cx.Splat(ct, With(batch, {m, 1}), 0), tall}, ct, mat,
                AxisAttrs{static_cast<int64_t>(cols)});
  }
  int v = Identity(cx, mat, ct);
  const std::vector<int32_t> next = NextRound(m);
  // Rounding leaves an off-diagonal share of about m ulps^2 no sweep removes; a sweep that no longer
  // shrinks the share by a tenth has met that floor.
  const double tol = std::max(config_tol, 2.0 * std::sqrt(static_cast<double>(m)) * 0x1p-23);
  // Carries: sweeps done, sweeps left once converged (1 extra), the last off-diagonal share, a, v.
  std::vector<int> init = {cx.Scalar(DType::kI32, 0), cx.Scalar(DType::kI32, 1), cx.Scalar(ct, INFINITY), x, v};
  JMP_ASSIGN_OR_RETURN(
      std::vector<int> done,
      WhileLoop(
          cx, init,
          [&](const std::vector<int>& c) {
            int more = cx.Compare(OpKind::kLessThan, c[0], cx.Scalar(DType::kI32, static_cast<double>(max_sweeps)));
            int unfinished = cx.Compare(OpKind::kGreaterThan, c[1], cx.Scalar(DType::kI32, 0));
            return cx.Binary(OpKind::kLogicalAnd, more, unfinished);
          },
          [&](const std::vector<int>& c) -> StatusOr<std::vector<int>> {
            JMP_ASSIGN_OR_RETURN(std::vector<int> av,
                                 CountedLoop(cx, m - 1, {c[3], c[4]}, [&](int, const std::vector<int>& s) {
                                   return Round(cx, s[0], s[1], next);
                                 }));
            int sym = cx.Binary(OpKind::kMultiply, cx.Binary(OpKind::kAdd, av[0], SwapLastTwo(cx, av[0])),
                                cx.Splat(ct, mat, 0.5));
            av[0] = sym;
            // Converged unless the share is still above tol^2 and shrinking.
            int share = OffDiagonalShare(cx, sym);
            int above = cx.Compare(OpKind::kGreaterThan, share, cx.Scalar(ct, tol * tol));
            int shrinking =
                cx.Compare(OpKind::kLessThan, share, cx.Binary(OpKind::kMultiply, c[2], cx.Scalar(ct, 0.9)));
            int converged = cx.Unary(OpKind::kNot, cx.Binary(OpKind::kLogicalAnd, above, shrinking));
            int one = cx.Scalar(DType::kI32, 1);
            int left = cx.Select(converged, cx.Binary(OpKind::kSubtract, c[1], one), c[1]);
            return std::vector<int>{cx.Binary(OpKind::kAdd, c[0], one), left, share, av[0], av[1]};
          }));
  int values = cx.Reshape(Diagonal(cx, done[3]), With(batch, {m}));
  int vectors = done[4];
  if (pad) {
    Shape starts(rank - 1, 0);
    starts.back() = 1;
    values = cx.Slice(values, starts, With(batch, {m}));
    Shape mstarts(rank, 0);
    mstarts[rows] = mstarts[cols] = 1;
    vectors = cx.Slice(vectors, mstarts, mat);
  }
  if (sort) {
    int order =
        cx.Emit(OpKind::kArgSort, {values}, DType::kI32, values_shape, SortAttrs{static_cast<int64_t>(rank - 2)});
    values = GatherAlongAxis(cx, values, order, static_cast<int64_t>(rank - 2));
    int columns = cx.BroadcastTo(cx.Reshape(order, With(batch, {1, n})), shape);
    vectors = GatherAlongAxis(cx, vectors, columns, static_cast<int64_t>(cols));
  }
  // A matrix with a NaN gives NaN throughout, as LAPACK's failure does on the CPU backend.
  int failed = AnyNaNPerMatrix(cx, x);
  vectors = cx.Select(cx.BroadcastTo(failed, shape), cx.Splat(ct, shape, NAN), vectors);
  values = cx.Select(cx.BroadcastTo(cx.Reshape(failed, With(batch, {1})), values_shape),
                     cx.Splat(ct, values_shape, NAN), values);
  cx.Bind(0, cx.Cast(vectors, t));
  cx.Bind(1, cx.Cast(values, t));
  return Status::Ok();
}

}  // namespace

void RegisterEighRules(std::map<std::string, LowerRule>& r) { RegisterRule(r, "custom_call:Eigh", &Eigh); }

}  // namespace jmp::mps
