// The LAPACK routines the host's LAPACK kernels call, as one C++ overload set per routine over float,
// double, complex<float> and complex<double>, on whichever BLAS the build links: Accelerate's new
// LAPACK interface on macOS (ACCELERATE_NEW_LAPACK; it declares these itself, with 32-bit integers and
// std::complex in C++), or the scipy-openblas32 wheel elsewhere, whose symbols carry a `scipy_` prefix
// and, being Fortran, a hidden length after the arguments for each character argument (declared
// below from the LAPACK reference interface: our own declarations, only the ones used here).
#pragma once

#include <complex>
#include <cstddef>

#if defined(JMP_BLAS_ACCELERATE)
#include <Accelerate/Accelerate.h>
#define JMP_LAPACK(name) name##_
#define JMP_STRLEN(...)
#define JMP_CBLAS(name) cblas_##name
#elif defined(JMP_BLAS_SCIPY_OPENBLAS)
#include <cblas.h>
#define JMP_LAPACK(name) scipy_##name##_
#define JMP_STRLEN(...) , __VA_ARGS__
#define JMP_CBLAS(name) scipy_cblas_##name
#else
#error "no BLAS configured"
#endif

namespace jmp::exec::host::lapack {

using c64 = std::complex<float>;
using c128 = std::complex<double>;

}  // namespace jmp::exec::host::lapack

#if defined(JMP_BLAS_SCIPY_OPENBLAS)
// Fortran LAPACK, column-major; `len` arguments are the hidden lengths of the character arguments.
extern "C" {
#define JMP_DECLARE_FOR(DECL) \
  DECL(s, float, float)       \
  DECL(d, double, double)     \
  DECL(c, jmp::exec::host::lapack::c64, float) DECL(z, jmp::exec::host::lapack::c128, double)

#define JMP_DECLARE_COMMON(p, T, R)                                                                           \
  void scipy_##p##potrf_(const char* uplo, const int* n, T* a, const int* lda, int* info, size_t len);        \
  void scipy_##p##getrf_(const int* m, const int* n, T* a, const int* lda, int* ipiv, int* info);             \
  void scipy_##p##geqrf_(const int* m, const int* n, T* a, const int* lda, T* tau, T* work, const int* lwork, \
                         int* info);                                                                          \
  void scipy_##p##gtsv_(const int* n, const int* nrhs, T* dl, T* d, T* du, T* b, const int* ldb, int* info);
JMP_DECLARE_FOR(JMP_DECLARE_COMMON)
#undef JMP_DECLARE_COMMON

void scipy_sorgqr_(const int* m, const int* n, const int* k, float* a, const int* lda, const float* tau, float* work,
                   const int* lwork, int* info);
void scipy_dorgqr_(const int* m, const int* n, const int* k, double* a, const int* lda, const double* tau, double* work,
                   const int* lwork, int* info);
void scipy_cungqr_(const int* m, const int* n, const int* k, jmp::exec::host::lapack::c64* a, const int* lda,
                   const jmp::exec::host::lapack::c64* tau, jmp::exec::host::lapack::c64* work, const int* lwork,
                   int* info);
void scipy_zungqr_(const int* m, const int* n, const int* k, jmp::exec::host::lapack::c128* a, const int* lda,
                   const jmp::exec::host::lapack::c128* tau, jmp::exec::host::lapack::c128* work, const int* lwork,
                   int* info);

#define JMP_DECLARE_REAL(p, T)                                                                                         \
  void scipy_##p##syevd_(const char* jobz, const char* uplo, const int* n, T* a, const int* lda, T* w, T* work,        \
                         const int* lwork, int* iwork, const int* liwork, int* info, size_t, size_t);                  \
  void scipy_##p##gesdd_(const char* jobz, const int* m, const int* n, T* a, const int* lda, T* s, T* u,               \
                         const int* ldu, T* vt, const int* ldvt, T* work, const int* lwork, int* iwork, int* info,     \
                         size_t);                                                                                      \
  void scipy_##p##geev_(const char* jobvl, const char* jobvr, const int* n, T* a, const int* lda, T* wr, T* wi, T* vl, \
                        const int* ldvl, T* vr, const int* ldvr, T* work, const int* lwork, int* info, size_t,         \
                        size_t);                                                                                       \
  void scipy_##p##sytrd_(const char* uplo, const int* n, T* a, const int* lda, T* d, T* e, T* tau, T* work,            \
                         const int* lwork, int* info, size_t);                                                         \
  void scipy_##p##geqp3_(const int* m, const int* n, T* a, const int* lda, int* jpvt, T* tau, T* work,                 \
                         const int* lwork, int* info);
JMP_DECLARE_REAL(s, float)
JMP_DECLARE_REAL(d, double)
#undef JMP_DECLARE_REAL

#define JMP_DECLARE_COMPLEX(p, T, R)                                                                              \
  void scipy_##p##heevd_(const char* jobz, const char* uplo, const int* n, T* a, const int* lda, R* w, T* work,   \
                         const int* lwork, R* rwork, const int* lrwork, int* iwork, const int* liwork, int* info, \
                         size_t, size_t);                                                                         \
  void scipy_##p##gesdd_(const char* jobz, const int* m, const int* n, T* a, const int* lda, R* s, T* u,          \
                         const int* ldu, T* vt, const int* ldvt, T* work, const int* lwork, R* rwork, int* iwork, \
                         int* info, size_t);                                                                      \
  void scipy_##p##geev_(const char* jobvl, const char* jobvr, const int* n, T* a, const int* lda, T* w, T* vl,    \
                        const int* ldvl, T* vr, const int* ldvr, T* work, const int* lwork, R* rwork, int* info,  \
                        size_t, size_t);                                                                          \
  void scipy_##p##hetrd_(const char* uplo, const int* n, T* a, const int* lda, R* d, R* e, T* tau, T* work,       \
                         const int* lwork, int* info, size_t);                                                    \
  void scipy_##p##geqp3_(const int* m, const int* n, T* a, const int* lda, int* jpvt, T* tau, T* work,            \
                         const int* lwork, R* rwork, int* info);
JMP_DECLARE_COMPLEX(c, jmp::exec::host::lapack::c64, float)
JMP_DECLARE_COMPLEX(z, jmp::exec::host::lapack::c128, double)
#undef JMP_DECLARE_COMPLEX
#undef JMP_DECLARE_FOR
}
#endif

namespace jmp::exec::host::lapack {

// ---- one overload per type of each routine (column-major, LAPACK's own arguments by value)

#define JMP_OVERLOAD_COMMON(p, T)                                                         \
  inline void potrf(char uplo, int n, T* a, int lda, int* info) {                         \
    JMP_LAPACK(p##potrf)(&uplo, &n, a, &lda, info JMP_STRLEN(1));                         \
  }                                                                                       \
  inline void getrf(int m, int n, T* a, int lda, int* ipiv, int* info) {                  \
    JMP_LAPACK(p##getrf)(&m, &n, a, &lda, ipiv, info);                                    \
  }                                                                                       \
  inline void geqrf(int m, int n, T* a, int lda, T* tau, T* work, int lwork, int* info) { \
    JMP_LAPACK(p##geqrf)(&m, &n, a, &lda, tau, work, &lwork, info);                       \
  }                                                                                       \
  inline void gtsv(int n, int nrhs, T* dl, T* d, T* du, T* b, int ldb, int* info) {       \
    JMP_LAPACK(p##gtsv)(&n, &nrhs, dl, d, du, b, &ldb, info);                             \
  }
JMP_OVERLOAD_COMMON(s, float)
JMP_OVERLOAD_COMMON(d, double)
JMP_OVERLOAD_COMMON(c, c64)
JMP_OVERLOAD_COMMON(z, c128)
#undef JMP_OVERLOAD_COMMON

#define JMP_OVERLOAD_ORGQR(name, T)                                                                    \
  inline void orgqr(int m, int n, int k, T* a, int lda, const T* tau, T* work, int lwork, int* info) { \
    JMP_LAPACK(name)(&m, &n, &k, a, &lda, tau, work, &lwork, info);                                    \
  }
JMP_OVERLOAD_ORGQR(sorgqr, float)
JMP_OVERLOAD_ORGQR(dorgqr, double)
JMP_OVERLOAD_ORGQR(cungqr, c64)
JMP_OVERLOAD_ORGQR(zungqr, c128)
#undef JMP_OVERLOAD_ORGQR

// Real: syevd; complex: heevd. `rwork` and `lrwork` are ignored for real types.
#define JMP_OVERLOAD_REAL(p, T)                                                                                       \
  inline void eigh(char jobz, char uplo, int n, T* a, int lda, T* w, T* work, int lwork, T*, int, int* iwork,         \
                   int liwork, int* info) {                                                                           \
    JMP_LAPACK(p##syevd)(&jobz, &uplo, &n, a, &lda, w, work, &lwork, iwork, &liwork, info JMP_STRLEN(1, 1));          \
  }                                                                                                                   \
  inline void gesdd(char jobz, int m, int n, T* a, int lda, T* s, T* u, int ldu, T* vt, int ldvt, T* work, int lwork, \
                    T*, int* iwork, int* info) {                                                                      \
    JMP_LAPACK(p##gesdd)(&jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, iwork, info JMP_STRLEN(1));     \
  }
JMP_OVERLOAD_REAL(s, float)
JMP_OVERLOAD_REAL(d, double)
#undef JMP_OVERLOAD_REAL

// QR with column pivoting; `rwork` (2n reals) is complex geqp3's and ignored for real types.
#define JMP_OVERLOAD_GEQP3_REAL(name, T)                                                                 \
  inline void geqp3(int m, int n, T* a, int lda, int* jpvt, T* tau, T* work, int lwork, T*, int* info) { \
    JMP_LAPACK(name)(&m, &n, a, &lda, jpvt, tau, work, &lwork, info);                                    \
  }
#define JMP_OVERLOAD_GEQP3_COMPLEX(name, T, R)                                                                 \
  inline void geqp3(int m, int n, T* a, int lda, int* jpvt, T* tau, T* work, int lwork, R* rwork, int* info) { \
    JMP_LAPACK(name)(&m, &n, a, &lda, jpvt, tau, work, &lwork, rwork, info);                                   \
  }
JMP_OVERLOAD_GEQP3_REAL(sgeqp3, float)
JMP_OVERLOAD_GEQP3_REAL(dgeqp3, double)
JMP_OVERLOAD_GEQP3_COMPLEX(cgeqp3, c64, float)
JMP_OVERLOAD_GEQP3_COMPLEX(zgeqp3, c128, double)
#undef JMP_OVERLOAD_GEQP3_REAL
#undef JMP_OVERLOAD_GEQP3_COMPLEX

// Hermitian (symmetric) tridiagonal reduction: sytrd for real types, hetrd for complex ones.
#define JMP_OVERLOAD_TRD(name, T, R)                                                                      \
  inline void hetrd(char uplo, int n, T* a, int lda, R* d, R* e, T* tau, T* work, int lwork, int* info) { \
    JMP_LAPACK(name)(&uplo, &n, a, &lda, d, e, tau, work, &lwork, info JMP_STRLEN(1));                    \
  }
JMP_OVERLOAD_TRD(ssytrd, float, float)
JMP_OVERLOAD_TRD(dsytrd, double, double)
JMP_OVERLOAD_TRD(chetrd, c64, float)
JMP_OVERLOAD_TRD(zhetrd, c128, double)
#undef JMP_OVERLOAD_TRD

#define JMP_OVERLOAD_COMPLEX(p, T, R)                                                                                 \
  inline void eigh(char jobz, char uplo, int n, T* a, int lda, R* w, T* work, int lwork, R* rwork, int lrwork,        \
                   int* iwork, int liwork, int* info) {                                                               \
    JMP_LAPACK(p##heevd)                                                                                              \
    (&jobz, &uplo, &n, a, &lda, w, work, &lwork, rwork, &lrwork, iwork, &liwork, info JMP_STRLEN(1, 1));              \
  }                                                                                                                   \
  inline void gesdd(char jobz, int m, int n, T* a, int lda, R* s, T* u, int ldu, T* vt, int ldvt, T* work, int lwork, \
                    R* rwork, int* iwork, int* info) {                                                                \
    JMP_LAPACK(p##gesdd)                                                                                              \
    (&jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, rwork, iwork, info JMP_STRLEN(1));                  \
  }                                                                                                                   \
  inline void geev(char jobvl, char jobvr, int n, T* a, int lda, T* w, T* vl, int ldvl, T* vr, int ldvr, T* work,     \
                   int lwork, R* rwork, int* info) {                                                                  \
    JMP_LAPACK(p##geev)                                                                                               \
    (&jobvl, &jobvr, &n, a, &lda, w, vl, &ldvl, vr, &ldvr, work, &lwork, rwork, info JMP_STRLEN(1, 1));               \
  }
JMP_OVERLOAD_COMPLEX(c, c64, float)
JMP_OVERLOAD_COMPLEX(z, c128, double)
#undef JMP_OVERLOAD_COMPLEX

// Real geev: eigenvalues as (wr, wi), conjugate pairs' vectors packed as (re, im) column pairs.
inline void geev_real(char jobvl, char jobvr, int n, float* a, int lda, float* wr, float* wi, float* vl, int ldvl,
                      float* vr, int ldvr, float* work, int lwork, int* info) {
  JMP_LAPACK(sgeev)(&jobvl, &jobvr, &n, a, &lda, wr, wi, vl, &ldvl, vr, &ldvr, work, &lwork, info JMP_STRLEN(1, 1));
}
inline void geev_real(char jobvl, char jobvr, int n, double* a, int lda, double* wr, double* wi, double* vl, int ldvl,
                      double* vr, int ldvr, double* work, int lwork, int* info) {
  JMP_LAPACK(dgeev)(&jobvl, &jobvr, &n, a, &lda, wr, wi, vl, &ldvl, vr, &ldvr, work, &lwork, info JMP_STRLEN(1, 1));
}

// ---- BLAS trsm through CBLAS, row-major: no copies. alpha = 1.
inline void trsm(bool left, bool lower, CBLAS_TRANSPOSE trans, bool unit, int m, int n, const float* a, int lda,
                 float* b, int ldb) {
  JMP_CBLAS(strsm)(CblasRowMajor, left ? CblasLeft : CblasRight, lower ? CblasLower : CblasUpper, trans,
                   unit ? CblasUnit : CblasNonUnit, m, n, 1.0f, a, lda, b, ldb);
}
inline void trsm(bool left, bool lower, CBLAS_TRANSPOSE trans, bool unit, int m, int n, const double* a, int lda,
                 double* b, int ldb) {
  JMP_CBLAS(dtrsm)(CblasRowMajor, left ? CblasLeft : CblasRight, lower ? CblasLower : CblasUpper, trans,
                   unit ? CblasUnit : CblasNonUnit, m, n, 1.0, a, lda, b, ldb);
}
inline void trsm(bool left, bool lower, CBLAS_TRANSPOSE trans, bool unit, int m, int n, const c64* a, int lda, c64* b,
                 int ldb) {
  const c64 one(1.0f);
  JMP_CBLAS(ctrsm)(CblasRowMajor, left ? CblasLeft : CblasRight, lower ? CblasLower : CblasUpper, trans,
                   unit ? CblasUnit : CblasNonUnit, m, n, &one, a, lda, b, ldb);
}
inline void trsm(bool left, bool lower, CBLAS_TRANSPOSE trans, bool unit, int m, int n, const c128* a, int lda, c128* b,
                 int ldb) {
  const c128 one(1.0);
  JMP_CBLAS(ztrsm)(CblasRowMajor, left ? CblasLeft : CblasRight, lower ? CblasLower : CblasUpper, trans,
                   unit ? CblasUnit : CblasNonUnit, m, n, &one, a, lda, b, ldb);
}

}  // namespace jmp::exec::host::lapack
