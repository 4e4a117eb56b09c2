// What every LAPACK kernel needs around its call: the element type chosen from the op's dtype, the
// batch walked matrix by matrix, row-major tensors copied to LAPACK's column-major and back, and NaN
// for a matrix LAPACK could not factor.
#pragma once

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "exec/host/host_kernels.h"
#include "exec/host/host_types.h"

namespace jmp::exec::host {

template <typename T>
struct RealOf {
  using type = T;
};
template <typename R>
struct RealOf<std::complex<R>> {
  using type = R;
};
template <typename T>
using Real = typename RealOf<T>::type;

// f(T{}) for the element type of `t` (f32, f64, c64, c128); anything else is the op's error.
template <typename F>
Status ForLapackType(const OpArgs& a, DType t, F&& f) {
  if (t == DType::kF32) return f(float{});
  if (t == DType::kF64) return f(double{});
  if (t == DType::kC64) return f(std::complex<float>{});
  if (t == DType::kC128) return f(std::complex<double>{});
  return a.Unsupported("is LAPACK's: float32, float64, complex64 and complex128 only");
}

// Matrices in the batch of a [..., m, n], and whether m and n fit LAPACK's 32-bit integers, workspace
// sizes included (gesdd's complex rwork is about 5 k^2 + 2 max(m, n) k for k = min(m, n)).
inline int64_t BatchOf(const std::vector<int64_t>& shape) {
  int64_t b = 1;
  for (size_t i = 0; i + 2 < shape.size(); ++i) b *= shape[i];
  return b;
}
inline bool FitsLapack(int64_t m, int64_t n) {
  return m >= 0 && n >= 0 && m * n <= (int64_t{1} << 28) && std::min(m, n) <= (int64_t{1} << 14);
}

// dst (m x n column-major, leading dimension m) = src (m x n row-major).
template <typename T>
void ToColumnMajor(const T* src, int64_t m, int64_t n, T* dst) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) dst[j * m + i] = src[i * n + j];
}
// dst (m x n row-major) = src (m x n column-major, leading dimension ld >= m).
template <typename T>
void FromColumnMajor(const T* src, int64_t m, int64_t n, int64_t ld, T* dst) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) dst[i * n + j] = src[j * ld + i];
}

template <typename T>
T NaNOf() {
  using R = Real<T>;
  if constexpr (kIsComplex<T>)
    return T(std::numeric_limits<R>::quiet_NaN(), std::numeric_limits<R>::quiet_NaN());
  else
    return std::numeric_limits<R>::quiet_NaN();
}
template <typename T>
void FillNaN(T* p, int64_t count) {
  for (int64_t i = 0; i < count; ++i) p[i] = NaNOf<T>();
}
template <typename T>
bool AllFinite(const T* p, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    if constexpr (kIsComplex<T>) {
      if (!std::isfinite(p[i].real()) || !std::isfinite(p[i].imag())) return false;
    } else if (!std::isfinite(p[i])) {
      return false;
    }
  }
  return true;
}

// A workspace query's answer (LAPACK returns it in the first element of the work array).
template <typename T>
int WorkSize(T w) {
  double v;
  if constexpr (kIsComplex<T>)
    v = static_cast<double>(w.real());
  else
    v = static_cast<double>(w);
  return v < 1 ? 1 : static_cast<int>(v) + 1;
}

template <typename T>
T* Typed(uint8_t* p) {
  return reinterpret_cast<T*>(p);
}
template <typename T>
const T* Typed(const uint8_t* p) {
  return reinterpret_cast<const T*>(p);
}

}  // namespace jmp::exec::host
