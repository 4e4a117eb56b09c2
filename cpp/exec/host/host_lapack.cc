// The LAPACK factorisations of op_kinds.def's "LAPACK" rows: Cholesky (potrf), triangular solves
// (trsm), LU (getrf), QR (geqrf) and its Householder product (orgqr/ungqr), and the Hermitian
// tridiagonal reduction (sytrd/hetrd), one batch matrix at a time.
#include <algorithm>
#include <numeric>
#include <vector>

#include "exec/host/host_kernels.h"
#include "exec/host/host_lapack.h"
#include "exec/host/host_lapack_util.h"

namespace jmp::exec::host {

namespace {

using Shape = std::vector<int64_t>;

template <typename T>
Status Cholesky(const OpArgs& a) {
  const Shape& s = a.InType(0).shape;
  const int64_t n = s.back(), batch = BatchOf(s);
  if (!FitsLapack(n, n)) return a.Unsupported("has a matrix too large for LAPACK");
  const bool lower = a.op.Attrs<mps::LapackAttrs>().lower;
  const T* in = Typed<T>(a.in[0]);
  T* out = Typed<T>(a.out[0]);
  std::vector<T> w(static_cast<size_t>(n * n));
  for (int64_t b = 0; b < batch; ++b, in += n * n, out += n * n) {
    ToColumnMajor(in, n, n, w.data());
    int info = 0;
    if (n) lapack::potrf(lower ? 'L' : 'U', static_cast<int>(n), w.data(), static_cast<int>(n), &info);
    if (info != 0) {
      FillNaN(out, n * n);
      continue;
    }
    FromColumnMajor(w.data(), n, n, n, out);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        if (lower ? j > i : j < i) out[i * n + j] = T(0);
  }
  return Status::Ok();
}

template <typename T>
Status TriangularSolve(const OpArgs& a) {
  const Shape& as = a.InType(0).shape;
  const Shape& bs = a.InType(1).shape;
  const size_t r = bs.size();
  const int64_t k = as.back(), m = bs[r - 2], n = bs[r - 1], batch = BatchOf(bs);
  if (!FitsLapack(m, n) || !FitsLapack(k, k)) return a.Unsupported("has a matrix too large for LAPACK");
  const mps::LapackAttrs& f = a.op.Attrs<mps::LapackAttrs>();
  const bool conj_only = kIsComplex<T> && f.conjugate && !f.transpose;
  const CBLAS_TRANSPOSE trans =
      !f.transpose ? CblasNoTrans : (kIsComplex<T> && f.conjugate ? CblasConjTrans : CblasTrans);
  const T* ain = Typed<T>(a.in[0]);
  const T* bin = Typed<T>(a.in[1]);
  T* out = Typed<T>(a.out[0]);
  std::vector<T> conj(conj_only ? static_cast<size_t>(k * k) : 0);
  for (int64_t b = 0; b < batch; ++b, ain += k * k, bin += m * n, out += m * n) {
    std::copy(bin, bin + m * n, out);
    if (m == 0 || n == 0) continue;
    const T* am = ain;
    if constexpr (kIsComplex<T>) {
      if (conj_only) {
        for (int64_t i = 0; i < k * k; ++i) conj[static_cast<size_t>(i)] = std::conj(ain[i]);
        am = conj.data();
      }
    }
    lapack::trsm(f.left_side, f.lower, trans, f.unit_diagonal, static_cast<int>(m), static_cast<int>(n), am,
                 static_cast<int>(k), out, static_cast<int>(n));
  }
  return Status::Ok();
}

template <typename T>
Status Lu(const OpArgs& a) {
  const Shape& s = a.InType(0).shape;
  const int64_t m = s[s.size() - 2], n = s.back(), k = std::min(m, n), batch = BatchOf(s);
  if (!FitsLapack(m, n)) return a.Unsupported("has a matrix too large for LAPACK");
  const T* in = Typed<T>(a.in[0]);
  T* out = Typed<T>(a.out[0]);
  int32_t* pivots = Typed<int32_t>(a.out[1]);
  int32_t* perm = Typed<int32_t>(a.out[2]);
  std::vector<T> w(static_cast<size_t>(m * n));
  std::vector<int> ipiv(static_cast<size_t>(k));
  for (int64_t b = 0; b < batch; ++b, in += m * n, out += m * n, pivots += k, perm += m) {
    ToColumnMajor(in, m, n, w.data());
    int info = 0;
    if (k) lapack::getrf(static_cast<int>(m), static_cast<int>(n), w.data(), static_cast<int>(m), ipiv.data(), &info);
    // info > 0 is an exactly singular U, still a factorisation (JAX's CPU backend keeps it).
    if (info < 0) FillNaN(w.data(), m * n);
    FromColumnMajor(w.data(), m, n, m, out);
    std::iota(perm, perm + m, 0);
    for (int64_t i = 0; i < k; ++i) {
      int32_t p = static_cast<int32_t>(ipiv[static_cast<size_t>(i)] - 1);
      if (p < 0 || p >= m) p = static_cast<int32_t>(i);  // never from LAPACK; keeps perm in bounds
      pivots[i] = p;
      std::swap(perm[i], perm[p]);
    }
  }
  return Status::Ok();
}

template <typename T>
Status Qr(const OpArgs& a) {
  const Shape& s = a.InType(0).shape;
  const int64_t m = s[s.size() - 2], n = s.back(), k = std::min(m, n), batch = BatchOf(s);
  if (!FitsLapack(m, n)) return a.Unsupported("has a matrix too large for LAPACK");
  const T* in = Typed<T>(a.in[0]);
  T* out = Typed<T>(a.out[0]);
  T* taus = Typed<T>(a.out[1]);
  std::vector<T> w(static_cast<size_t>(m * n));
  const int mi = static_cast<int>(m), ni = static_cast<int>(n);
  T query{};
  int info = 0;
  if (k) lapack::geqrf(mi, ni, w.data(), std::max(mi, 1), taus, &query, -1, &info);
  std::vector<T> work(static_cast<size_t>(WorkSize(query)));
  for (int64_t b = 0; b < batch; ++b, in += m * n, out += m * n, taus += k) {
    ToColumnMajor(in, m, n, w.data());
    info = 0;
    if (k) lapack::geqrf(mi, ni, w.data(), mi, taus, work.data(), static_cast<int>(work.size()), &info);
    if (info != 0) {
      FillNaN(w.data(), m * n);
      FillNaN(taus, k);
    }
    FromColumnMajor(w.data(), m, n, m, out);
  }
  return Status::Ok();
}

template <typename T>
Status PivotedQr(const OpArgs& a) {
  const Shape& s = a.InType(0).shape;
  const int64_t m = s[s.size() - 2], n = s.back(), k = std::min(m, n), batch = BatchOf(s);
  if (!FitsLapack(m, n)) return a.Unsupported("has a matrix too large for LAPACK");
  const T* in = Typed<T>(a.in[0]);
  const int32_t* pivots_in = Typed<int32_t>(a.in[1]);
  T* out = Typed<T>(a.out[0]);
  int32_t* pivots = Typed<int32_t>(a.out[1]);
  T* taus = Typed<T>(a.out[2]);
  std::vector<T> w(static_cast<size_t>(m * n));
  std::vector<Real<T>> rwork(static_cast<size_t>(2 * n + 1));
  std::vector<int> jpvt(static_cast<size_t>(n + 1));
  const int mi = static_cast<int>(m), ni = static_cast<int>(n);
  T query{};
  int info = 0;
  if (k) lapack::geqp3(mi, ni, w.data(), std::max(mi, 1), jpvt.data(), taus, &query, -1, rwork.data(), &info);
  std::vector<T> work(static_cast<size_t>(WorkSize(query)));
  for (int64_t b = 0; b < batch; ++b, in += m * n, out += m * n, pivots_in += n, pivots += n, taus += k) {
    ToColumnMajor(in, m, n, w.data());
    std::copy(pivots_in, pivots_in + n, jpvt.begin());
    info = 0;
    if (k)
      lapack::geqp3(mi, ni, w.data(), mi, jpvt.data(), taus, work.data(), static_cast<int>(work.size()), rwork.data(),
                    &info);
    if (info != 0) {
      FillNaN(w.data(), m * n);
      FillNaN(taus, k);
    }
    std::copy(jpvt.begin(), jpvt.begin() + n, pivots);
    FromColumnMajor(w.data(), m, n, m, out);
  }
  return Status::Ok();
}

template <typename T>
Status HouseholderProduct(const OpArgs& a) {
  const Shape& s = a.InType(0).shape;
  const int64_t m = s[s.size() - 2], n = s.back(), k = a.InType(1).shape.back(), batch = BatchOf(s);
  if (!FitsLapack(m, n)) return a.Unsupported("has a matrix too large for LAPACK");
  const T* in = Typed<T>(a.in[0]);
  const T* taus = Typed<T>(a.in[1]);
  T* out = Typed<T>(a.out[0]);
  std::vector<T> w(static_cast<size_t>(m * n));
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  T query{};
  int info = 0;
  if (n) lapack::orgqr(mi, ni, ki, w.data(), std::max(mi, 1), taus, &query, -1, &info);
  std::vector<T> work(static_cast<size_t>(WorkSize(query)));
  for (int64_t b = 0; b < batch; ++b, in += m * n, out += m * n, taus += k) {
    ToColumnMajor(in, m, n, w.data());
    info = 0;
    if (n) lapack::orgqr(mi, ni, ki, w.data(), mi, taus, work.data(), static_cast<int>(work.size()), &info);
    if (info != 0) FillNaN(w.data(), m * n);
    FromColumnMajor(w.data(), m, n, m, out);
  }
  return Status::Ok();
}

template <typename T>
Status Tridiagonal(const OpArgs& a) {
  using R = Real<T>;
  const Shape& s = a.InType(0).shape;
  const int64_t n = s.back(), batch = BatchOf(s);
  if (!FitsLapack(n, n) || n < 1) return a.Unsupported("has a matrix too large for LAPACK, or empty");
  const char uplo = a.op.Attrs<mps::LapackAttrs>().lower ? 'L' : 'U';
  const T* in = Typed<T>(a.in[0]);
  T* out = Typed<T>(a.out[0]);
  R* d = Typed<R>(a.out[1]);
  R* e = Typed<R>(a.out[2]);
  T* taus = Typed<T>(a.out[3]);
  std::vector<T> w(static_cast<size_t>(n * n));
  const int ni = static_cast<int>(n);
  T query{};
  int info = 0;
  lapack::hetrd(uplo, ni, w.data(), ni, d, e, taus, &query, -1, &info);
  std::vector<T> work(static_cast<size_t>(WorkSize(query)));
  for (int64_t b = 0; b < batch; ++b, in += n * n, out += n * n, d += n, e += n - 1, taus += n - 1) {
    ToColumnMajor(in, n, n, w.data());
    info = 0;
    lapack::hetrd(uplo, ni, w.data(), ni, d, e, taus, work.data(), static_cast<int>(work.size()), &info);
    if (info != 0) {
      FillNaN(w.data(), n * n);
      FillNaN(d, n);
      FillNaN(e, n - 1);
      FillNaN(taus, n - 1);
    }
    FromColumnMajor(w.data(), n, n, n, out);
  }
  return Status::Ok();
}

}  // namespace

Status RunLapackCholesky(const OpArgs& a) {
  return ForLapackType(a, a.InType(0).dtype, [&](auto t) { return Cholesky<decltype(t)>(a); });
}
Status RunLapackTriangularSolve(const OpArgs& a) {
  return ForLapackType(a, a.InType(0).dtype, [&](auto t) { return TriangularSolve<decltype(t)>(a); });
}
Status RunLapackLu(const OpArgs& a) {
  return ForLapackType(a, a.InType(0).dtype, [&](auto t) { return Lu<decltype(t)>(a); });
}
Status RunLapackQr(const OpArgs& a) {
  return ForLapackType(a, a.InType(0).dtype, [&](auto t) { return Qr<decltype(t)>(a); });
}
Status RunLapackHouseholderProduct(const OpArgs& a) {
  return ForLapackType(a, a.InType(0).dtype, [&](auto t) { return HouseholderProduct<decltype(t)>(a); });
}

Status RunLapackPivotedQr(const OpArgs& a) {
  return ForLapackType(a, a.InType(0).dtype, [&](auto t) { return PivotedQr<decltype(t)>(a); });
}

Status RunLapackTridiagonal(const OpArgs& a) {
  return ForLapackType(a, a.InType(0).dtype, [&](auto t) { return Tridiagonal<decltype(t)>(a); });
}

}  // namespace jmp::exec::host
