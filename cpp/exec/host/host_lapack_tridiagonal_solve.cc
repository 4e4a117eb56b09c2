// LapackTridiagonalSolve (op_kinds.def): LAPACK's gtsv, or, with `perturb_singular`, a pivoted
// elimination that perturbs tiny pivots (LAPACK's xLAGTF/xLAGTS method, which has no complex routine and
// solves one right-hand side at a time, so it is written here for every dtype and all columns at once).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "exec/host/host_lapack.h"
#include "exec/host/host_lapack_util.h"

namespace jmp::exec::host {

namespace {

template <typename T>
Real<T> Abs(T v) {
  return std::abs(v);
}

template <typename T>
Real<T> RealPart(T v) {
  if constexpr (kIsComplex<T>)
    return v.real();
  else
    return v;
}

// Makes `pivot` safe to divide the row by: a pivot below one is moved away from zero by `perturb`
// (doubling each time) while dividing would overflow, or, if it is tiny but the row is tinier, the pivot
// and the row are scaled up together (xLAGTS's rule).
template <typename T>
void PerturbPivot(Real<T> perturb, T& pivot, T* row, int64_t k) {
  using R = Real<T>;
  const R eps = std::numeric_limits<R>::epsilon();
  const R tiny = std::numeric_limits<R>::min(), small = R(1) / std::numeric_limits<R>::max();
  const R safe_min = small < tiny ? tiny : small * (R(1) + eps);
  const R big = R(1) / safe_min;
  R size = Abs(pivot);
  if (!(size < R(1))) return;  // NaN too
  perturb = std::copysign(std::max(std::abs(perturb), safe_min), RealPart(pivot));
  R largest = 0;
  for (int64_t j = 0; j < k; ++j) largest = std::max(largest, Abs(row[j]));
  while (size < R(1)) {
    if (size < safe_min && size != R(0) && !(largest * safe_min > size)) {
      pivot *= big;
      for (int64_t j = 0; j < k; ++j) row[j] *= big;
      return;
    }
    if (size >= safe_min && !(largest > size * big)) return;
    pivot += perturb;
    perturb *= R(2);
    size = Abs(pivot);
  }
}

// One system: dl, d, du of length n, b and x n x k row-major (x may be b's copy). u holds U's three
// diagonals per row (pivot, first and second super-diagonal; row interchanges make the second).
template <typename T>
void SolvePerturbed(int64_t n, int64_t k, const T* dl, const T* d, const T* du, const T* b, T* x, std::vector<T>& u,
                    std::vector<T>& row) {
  using R = Real<T>;
  auto xr = [&](int64_t i) { return x + i * k; };
  auto br = [&](int64_t i) { return b + i * k; };
  if (n == 0) return;
  u.assign(static_cast<size_t>(3 * n), T(0));
  auto U = [&](int64_t i, int c) -> T& { return u[static_cast<size_t>(3 * i + c)]; };
  U(0, 0) = d[0];
  U(0, 1) = n > 1 ? du[0] : T(0);
  R largest = std::max(Abs(U(0, 0)), Abs(U(0, 1)));
  R scale = Abs(U(0, 0)) + Abs(U(0, 1));
  std::copy(br(0), br(0) + k, xr(0));
  for (int64_t i = 0; i + 1 < n; ++i) {
    const bool inner = i + 2 < n;  // row i + 1 has a super-diagonal
    U(i + 1, 0) = d[i + 1];
    const R next_scale = Abs(dl[i + 1]) + Abs(d[i + 1]) + (inner ? Abs(du[i + 1]) : R(0));
    if (dl[i + 1] == T(0)) {
      scale = next_scale;
      U(i + 1, 1) = inner ? du[i + 1] : T(0);
      std::copy(br(i + 1), br(i + 1) + k, xr(i + 1));
    } else if (Abs(dl[i + 1]) / next_scale <= (U(i, 0) == T(0) ? R(0) : Abs(U(i, 0)) / scale)) {
      const T factor = dl[i + 1] / U(i, 0);  // eliminate row i + 1 with row i
      U(i + 1, 0) -= factor * U(i, 1);
      U(i + 1, 1) = inner ? du[i + 1] : T(0);
      for (int64_t j = 0; j < k; ++j) xr(i + 1)[j] = br(i + 1)[j] - factor * xr(i)[j];
      scale = next_scale;
    } else {
      const T factor = U(i, 0) / dl[i + 1];  // swap rows i and i + 1, then eliminate
      const T above = U(i, 1);
      U(i, 0) = dl[i + 1];
      U(i + 1, 0) = above - factor * d[i + 1];
      U(i, 1) = d[i + 1];
      if (inner) {
        U(i, 2) = du[i + 1];
        U(i + 1, 1) = -factor * du[i + 1];
      }
      for (int64_t j = 0; j < k; ++j) {
        const T swapped = xr(i)[j];
        xr(i)[j] = br(i + 1)[j];
        xr(i + 1)[j] = swapped - factor * br(i + 1)[j];
      }
      scale = Abs(U(i + 1, 0)) + Abs(U(i + 1, 1));
    }
    if (inner)
      for (int c = 0; c < 3; ++c) largest = std::max(largest, Abs(U(i, c)));
  }
  largest = std::max(largest, Abs(U(n - 1, 0)));
  const R perturb = std::numeric_limits<R>::epsilon() * (n == 1 ? Abs(d[0]) : largest);
  row.resize(static_cast<size_t>(k));
  for (int64_t i = n - 1; i >= 0; --i) {
    for (int64_t j = 0; j < k; ++j) {
      T v = xr(i)[j];
      if (i + 1 < n) v -= U(i, 1) * xr(i + 1)[j];
      if (i + 2 < n) v -= U(i, 2) * xr(i + 2)[j];
      row[static_cast<size_t>(j)] = v;
    }
    T pivot = U(i, 0);
    PerturbPivot<T>(perturb, pivot, row.data(), k);
    if (n == 1) {
      for (int64_t j = 0; j < k; ++j) xr(i)[j] = row[static_cast<size_t>(j)] / pivot;
    } else {
      const T inverse = T(1) / pivot;
      for (int64_t j = 0; j < k; ++j) xr(i)[j] = row[static_cast<size_t>(j)] * inverse;
    }
  }
}

template <typename T>
Status TridiagonalSolve(const OpArgs& a) {
  const std::vector<int64_t>& s = a.InType(3).shape;
  const int64_t n = s[s.size() - 2], k = s.back(), batch = BatchOf(s);
  if (!FitsLapack(n, k)) return a.Unsupported("has a system too large for LAPACK");
  const T* dl = Typed<T>(a.in[0]);
  const T* d = Typed<T>(a.in[1]);
  const T* du = Typed<T>(a.in[2]);
  const T* b = Typed<T>(a.in[3]);
  T* x = Typed<T>(a.out[0]);
  if (a.op.Attrs<mps::LapackAttrs>().perturb_singular) {
    std::vector<T> u, row;
    for (int64_t i = 0; i < batch; ++i, dl += n, d += n, du += n, b += n * k, x += n * k)
      SolvePerturbed(n, k, dl, d, du, b, x, u, row);
    return Status::Ok();
  }
  if (n == 0 || k == 0) return Status::Ok();
  std::vector<T> lower(static_cast<size_t>(n)), diagonal(static_cast<size_t>(n)), upper(static_cast<size_t>(n));
  std::vector<T> w(static_cast<size_t>(n * k));
  for (int64_t i = 0; i < batch; ++i, dl += n, d += n, du += n, b += n * k, x += n * k) {
    std::copy(dl + 1, dl + n, lower.begin());
    std::copy(d, d + n, diagonal.begin());
    std::copy(du, du + n - 1, upper.begin());
    ToColumnMajor(b, n, k, w.data());
    int info = 0;
    const int ni = static_cast<int>(n);
    lapack::gtsv(ni, static_cast<int>(k), lower.data(), diagonal.data(), upper.data(), w.data(), ni, &info);
    if (info != 0) FillNaN(w.data(), n * k);  // singular: NaN, as JAX's CPU lowering gives
    FromColumnMajor(w.data(), n, k, n, x);
  }
  return Status::Ok();
}

}  // namespace

Status RunLapackTridiagonalSolve(const OpArgs& a) {
  return ForLapackType(a, a.InType(3).dtype, [&](auto t) { return TridiagonalSolve<decltype(t)>(a); });
}

}  // namespace jmp::exec::host
