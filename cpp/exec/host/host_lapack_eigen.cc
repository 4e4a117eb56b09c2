// The LAPACK eigen- and singular value decompositions of op_kinds.def's "LAPACK" rows: Hermitian
// eigh (syevd/heevd), SVD (gesdd) and the general eigenproblem (geev), one batch matrix at a time.
// Inputs that are not finite give NaN without calling LAPACK: its iterations are not specified for
// them (JAX's CPU backend does the same for geev).
#include <algorithm>
#include <tuple>
#include <vector>

#include "exec/host/host_kernels.h"
#include "exec/host/host_lapack.h"
#include "exec/host/host_lapack_util.h"

namespace jmp::exec::host {

namespace {

using Shape = std::vector<int64_t>;

template <typename T>
bool TriangleFinite(const T* a, int64_t n, bool lower) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = lower ? 0 : i; j <= (lower ? i : n - 1); ++j)
      if (!AllFinite(a + i * n + j, 1)) return false;
  return true;
}

template <typename T>
Status Eigh(const OpArgs& a) {
  using R = Real<T>;
  const Shape& s = a.InType(0).shape;
  const int64_t n = s.back(), batch = BatchOf(s);
  if (!FitsLapack(n, n)) return a.Unsupported("has a matrix too large for LAPACK");
  const bool lower = a.op.Attrs<mps::LapackAttrs>().lower;
  const char uplo = lower ? 'L' : 'U';
  const int ni = static_cast<int>(n), ld = std::max(ni, 1);
  const T* in = Typed<T>(a.in[0]);
  T* vectors = Typed<T>(a.out[0]);
  R* values = Typed<R>(a.out[1]);
  std::vector<T> w(static_cast<size_t>(n * n));
  T work_query{};
  R rwork_query{};
  int iwork_query = 0, info = 0;
  if (n) lapack::eigh('V', uplo, ni, w.data(), ld, values, &work_query, -1, &rwork_query, -1, &iwork_query, -1, &info);
  std::vector<T> work(static_cast<size_t>(WorkSize(work_query)));
  std::vector<R> rwork(static_cast<size_t>(WorkSize(rwork_query)));
  std::vector<int> iwork(static_cast<size_t>(std::max(iwork_query, 1)));
  for (int64_t b = 0; b < batch; ++b, in += n * n, vectors += n * n, values += n) {
    info = 0;
    if (!TriangleFinite(in, n, lower)) {
      info = -1;
    } else if (n) {
      ToColumnMajor(in, n, n, w.data());
      lapack::eigh('V', uplo, ni, w.data(), ni, values, work.data(), static_cast<int>(work.size()), rwork.data(),
                   static_cast<int>(rwork.size()), iwork.data(), static_cast<int>(iwork.size()), &info);
    }
    if (info != 0) {
      FillNaN(vectors, n * n);
      FillNaN(values, n);
      continue;
    }
    FromColumnMajor(w.data(), n, n, n, vectors);
  }
  return Status::Ok();
}

template <typename T>
void SetIdentity(T* p, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) p[i * cols + j] = T(i == j ? 1 : 0);
}

template <typename T>
Status Svd(const OpArgs& a) {
  using R = Real<T>;
  const Shape& s = a.InType(0).shape;
  const int64_t m = s[s.size() - 2], n = s.back(), k = std::min(m, n), mx = std::max(m, n), batch = BatchOf(s);
  if (!FitsLapack(m, n)) return a.Unsupported("has a matrix too large for LAPACK");
  const mps::LapackAttrs& f = a.op.Attrs<mps::LapackAttrs>();
  const bool uv = f.compute_uv;
  const char jobz = !uv ? 'N' : f.full_matrices ? 'A' : 'S';
  const int64_t ucols = f.full_matrices ? m : k, vtrows = f.full_matrices ? n : k;
  const int mi = static_cast<int>(m), ni = static_cast<int>(n);
  const int ldu = std::max(mi, 1), ldvt = std::max(static_cast<int>(vtrows), 1);
  const T* in = Typed<T>(a.in[0]);
  R* sv = Typed<R>(a.out[0]);
  T* u = uv ? Typed<T>(a.out[1]) : nullptr;
  T* vt = uv ? Typed<T>(a.out[2]) : nullptr;
  std::vector<T> w(static_cast<size_t>(m * n)), uw(uv ? static_cast<size_t>(m * ucols) : 1),
      vtw(uv ? static_cast<size_t>(vtrows * n) : 1);
  // rwork (complex only): LAPACK 3.7's bound, which JAX's CPU backend uses too.
  const int64_t rsize = !uv ? 7 * k : std::max(5 * k * k + 5 * k, 2 * mx * k + 2 * k * k + k);
  std::vector<R> rwork(static_cast<size_t>(std::max<int64_t>(rsize, 1)));
  std::vector<int> iwork(static_cast<size_t>(std::max<int64_t>(8 * k, 1)));
  T query{};
  int info = 0;
  if (k)
    lapack::gesdd(jobz, mi, ni, w.data(), ldu, sv, uw.data(), ldu, vtw.data(), ldvt, &query, -1, rwork.data(),
                  iwork.data(), &info);
  std::vector<T> work(static_cast<size_t>(WorkSize(query)));
  for (int64_t b = 0; b < batch; ++b, in += m * n, sv += k) {
    info = 0;
    if (k == 0) {
      if (uv) {
        SetIdentity(u, m, ucols);
        SetIdentity(vt, vtrows, n);
      }
    } else if (!AllFinite(in, m * n)) {
      info = -1;
    } else {
      ToColumnMajor(in, m, n, w.data());
      lapack::gesdd(jobz, mi, ni, w.data(), mi, sv, uw.data(), ldu, vtw.data(), ldvt, work.data(),
                    static_cast<int>(work.size()), rwork.data(), iwork.data(), &info);
    }
    if (info != 0) {
      FillNaN(sv, k);
      if (uv) FillNaN(u, m * ucols), FillNaN(vt, vtrows * n);
    } else if (uv && k) {
      FromColumnMajor(uw.data(), m, ucols, ldu, u);
      FromColumnMajor(vtw.data(), vtrows, n, ldvt, vt);
    }
    if (uv) u += m * ucols, vt += vtrows * n;
  }
  return Status::Ok();
}

// Column j of an n x n column-major matrix as a complex row-major column of `out` (n x n).
template <typename C, typename R>
void PutColumn(const R* re, const R* im, int64_t n, int64_t j, bool conjugate, C* out) {
  for (int64_t i = 0; i < n; ++i) {
    R imag = im ? im[i] : R(0);
    out[i * n + j] = C(re[i], conjugate ? -imag : imag);
  }
}

template <typename T>
Status Eig(const OpArgs& a) {
  using R = Real<T>;
  using C = std::complex<R>;
  const Shape& s = a.InType(0).shape;
  const int64_t n = s.back(), batch = BatchOf(s);
  if (!FitsLapack(n, n)) return a.Unsupported("has a matrix too large for LAPACK");
  const mps::LapackAttrs& f = a.op.Attrs<mps::LapackAttrs>();
  const char jobvl = f.compute_left ? 'V' : 'N', jobvr = f.compute_right ? 'V' : 'N';
  const int ni = static_cast<int>(n), ld = std::max(ni, 1);
  const T* in = Typed<T>(a.in[0]);
  C* w = Typed<C>(a.out[0]);
  C* vl = Typed<C>(a.out[1]);
  C* vr = Typed<C>(a.out[2]);
  const size_t nn = static_cast<size_t>(n * n);
  std::vector<T> aw(nn), vlw(nn), vrw(nn);
  std::vector<R> wr(static_cast<size_t>(n)), wi(static_cast<size_t>(n)), rwork(static_cast<size_t>(2 * n + 1));
  std::vector<C> wc(static_cast<size_t>(n));
  T query{};
  int info = 0;
  auto call = [&](T* work, int lwork) {
    if constexpr (kIsComplex<T>)
      lapack::geev(jobvl, jobvr, ni, aw.data(), ld, wc.data(), vlw.data(), ld, vrw.data(), ld, work, lwork,
                   rwork.data(), &info);
    else
      lapack::geev_real(jobvl, jobvr, ni, aw.data(), ld, wr.data(), wi.data(), vlw.data(), ld, vrw.data(), ld, work,
                        lwork, &info);
  };
  if (n) call(&query, -1);
  std::vector<T> work(static_cast<size_t>(WorkSize(query)));
  for (int64_t b = 0; b < batch; ++b, in += n * n, w += n, vl += n * n, vr += n * n) {
    std::fill(vl, vl + n * n, C(0));
    std::fill(vr, vr + n * n, C(0));
    info = 0;
    if (!AllFinite(in, n * n)) {
      info = -1;
    } else if (n) {
      ToColumnMajor(in, n, n, aw.data());
      call(work.data(), static_cast<int>(work.size()));
    }
    if (info != 0) {
      FillNaN(w, n);
      FillNaN(vl, n * n);
      FillNaN(vr, n * n);
      continue;
    }
    if constexpr (kIsComplex<T>) {
      std::copy(wc.begin(), wc.end(), w);
      if (f.compute_left) FromColumnMajor(vlw.data(), n, n, n, vl);
      if (f.compute_right) FromColumnMajor(vrw.data(), n, n, n, vr);
    } else {
      // A conjugate pair (wi[j] > 0, then wi[j + 1] < 0) shares columns j (real) and j + 1 (imaginary).
      for (int64_t j = 0; j < n; ++j) {
        w[j] = C(wr[static_cast<size_t>(j)], wi[static_cast<size_t>(j)]);
        const bool pair = wi[static_cast<size_t>(j)] != R(0) && j + 1 < n;
        for (auto [job, src, dst] : {std::tuple{f.compute_left, &vlw, vl}, std::tuple{f.compute_right, &vrw, vr}}) {
          if (!job) continue;
          const R* col = src->data() + j * n;
          if (!pair) {
            PutColumn(col, static_cast<const R*>(nullptr), n, j, false, dst);
          } else {
            PutColumn(col, col + n, n, j, false, dst);
            PutColumn(col, col + n, n, j + 1, true, dst);
          }
        }
        if (pair) {
          ++j;
          w[j] = C(wr[static_cast<size_t>(j)], wi[static_cast<size_t>(j)]);
        }
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Status RunLapackEigh(const OpArgs& a) {
  return ForLapackType(a, a.InType(0).dtype, [&](auto t) { return Eigh<decltype(t)>(a); });
}
Status RunLapackSvd(const OpArgs& a) {
  return ForLapackType(a, a.InType(0).dtype, [&](auto t) { return Svd<decltype(t)>(a); });
}
Status RunLapackEig(const OpArgs& a) {
  return ForLapackType(a, a.InType(0).dtype, [&](auto t) { return Eig<decltype(t)>(a); });
}

}  // namespace jmp::exec::host
