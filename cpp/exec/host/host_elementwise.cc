// Elementwise kernels: one typed loop per op and dtype, chosen once per op (never per element).
#include <cmath>
#include <cstring>
#include <limits>

#include "exec/host/host_domain.h"
#include "exec/host/host_fastmath.h"
#include "exec/host/host_kernels.h"
#include "exec/host/host_parallel.h"
#include "exec/host/host_types.h"
#include "mps/op_domain.h"

namespace jmp::exec::host {

namespace {

using UnOp = mps::UnaryOp;
using BinOp = mps::BinaryOp;

template <typename T>
using U = std::make_unsigned_t<T>;

// The cases below that a row's domain (op_kinds.def) leaves out are generated from it: a kernel for
// such a case would be a duplicate case label, a row of the domain without one an unhandled
// enumerator, so the kernels and the domains cannot drift apart. The verifier refuses such an op
// before any executor sees it; OutsideDomain answers a graph that skipped it.

// `work`: roughly how many simple operations one element costs (sets the parallel grain).
template <typename T, typename F>
void Map1(const OpArgs& a, F f, int64_t work = 1) {
  const T* x = reinterpret_cast<const T*>(a.in[0]);
  int64_t n = a.Count();
  using N = Num<T>;
  auto* y = reinterpret_cast<T*>(a.out[0]);
  ParallelFor(n, GrainFor(work), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) y[i] = N::Store(f(N::Load(x[i])));
  });
}

template <typename T, typename F>
void MapPredicate(const OpArgs& a, F f) {
  const T* x = reinterpret_cast<const T*>(a.in[0]);
  int64_t n = a.Count();
  uint8_t* y = a.out[0];
  ParallelFor(n, GrainFor(1), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) y[i] = f(Num<T>::Load(x[i])) ? 1 : 0;
  });
}

JMP_VECTOR_LOOP(ExpF32, (const float* x, float* y, int64_t begin, int64_t end), (x, y, begin, end), {
  for (int64_t i = begin; i < end; ++i) y[i] = fastmath::Exp(x[i]);
})
JMP_VECTOR_LOOP(TanhF32, (const float* x, float* y, int64_t begin, int64_t end), (x, y, begin, end), {
  for (int64_t i = begin; i < end; ++i) y[i] = fastmath::Tanh(x[i]);
})
JMP_VECTOR_LOOP(SigmoidF32, (const float* x, float* y, int64_t begin, int64_t end), (x, y, begin, end), {
  for (int64_t i = begin; i < end; ++i) y[i] = fastmath::Sigmoid(x[i]);
})

using F32Loop = void (*)(const float*, float*, int64_t, int64_t);

void MapF32(const OpArgs& a, F32Loop loop) {
  const float* x = reinterpret_cast<const float*>(a.in[0]);
  float* y = reinterpret_cast<float*>(a.out[0]);
  ParallelFor(a.Count(), GrainFor(16), [&](int64_t begin, int64_t end) { loop(x, y, begin, end); });
}

// exp, tanh and sigmoid through fastmath (vectorised) for every type computed in float.
template <typename T>
bool FastUnary(const OpArgs& a, UnOp op) {
  if (op != UnOp::kExponent && op != UnOp::kTanh && op != UnOp::kSigmoid) return false;
  if constexpr (std::is_same_v<T, float>) {
    MapF32(a, op == UnOp::kExponent ? ExpF32 : op == UnOp::kTanh ? TanhF32 : SigmoidF32);
    return true;
  } else if constexpr (std::is_same_v<typename Num<T>::C, float>) {
    if (op == UnOp::kExponent)
      Map1<T>(a, fastmath::Exp, 16);
    else if (op == UnOp::kTanh)
      Map1<T>(a, fastmath::Tanh, 16);
    else
      Map1<T>(a, fastmath::Sigmoid, 16);
    return true;
  }
  return false;
}

template <typename T>
Status FloatUnary(const OpArgs& a, UnOp op) {
  using C = typename Num<T>::C;
  if (FastUnary<T>(a, op)) return Status::Ok();
  if constexpr (std::is_same_v<T, double>)
    if (VectorUnary(a, op)) return Status::Ok();
  switch (op) {
    case UnOp::kIdentity: return RunCopyLike(a);
    case UnOp::kExponent: Map1<T>(a, [](C x) { return C(std::exp(x)); }); return Status::Ok();
    case UnOp::kExponentBase2: Map1<T>(a, [](C x) { return C(std::exp2(x)); }); return Status::Ok();
    case UnOp::kLogarithm: Map1<T>(a, [](C x) { return C(std::log(x)); }); return Status::Ok();
    case UnOp::kLogarithm2: Map1<T>(a, [](C x) { return C(std::log2(x)); }); return Status::Ok();
    case UnOp::kSquareRoot: Map1<T>(a, [](C x) { return C(std::sqrt(x)); }); return Status::Ok();
    case UnOp::kReverseSquareRoot: Map1<T>(a, [](C x) { return C(1) / C(std::sqrt(x)); }); return Status::Ok();
    case UnOp::kReciprocal: Map1<T>(a, [](C x) { return C(1) / x; }); return Status::Ok();
    case UnOp::kSin: Map1<T>(a, [](C x) { return C(std::sin(x)); }); return Status::Ok();
    case UnOp::kCos: Map1<T>(a, [](C x) { return C(std::cos(x)); }); return Status::Ok();
    case UnOp::kTan: Map1<T>(a, [](C x) { return C(std::tan(x)); }); return Status::Ok();
    case UnOp::kTanh: Map1<T>(a, [](C x) { return C(std::tanh(x)); }); return Status::Ok();
    case UnOp::kAsin: Map1<T>(a, [](C x) { return C(std::asin(x)); }); return Status::Ok();
    case UnOp::kAcos: Map1<T>(a, [](C x) { return C(std::acos(x)); }); return Status::Ok();
    case UnOp::kAtan: Map1<T>(a, [](C x) { return C(std::atan(x)); }); return Status::Ok();
    case UnOp::kSinh: Map1<T>(a, [](C x) { return C(std::sinh(x)); }); return Status::Ok();
    case UnOp::kCosh: Map1<T>(a, [](C x) { return C(std::cosh(x)); }); return Status::Ok();
    case UnOp::kAsinh: Map1<T>(a, [](C x) { return C(std::asinh(x)); }); return Status::Ok();
    case UnOp::kAcosh: Map1<T>(a, [](C x) { return C(std::acosh(x)); }); return Status::Ok();
    case UnOp::kAtanh: Map1<T>(a, [](C x) { return C(std::atanh(x)); }); return Status::Ok();
    case UnOp::kErf: Map1<T>(a, [](C x) { return C(std::erf(x)); }); return Status::Ok();
    case UnOp::kSigmoid: Map1<T>(a, [](C x) { return C(1) / (C(1) + C(std::exp(-x))); }); return Status::Ok();
    case UnOp::kFloor: Map1<T>(a, [](C x) { return C(std::floor(x)); }); return Status::Ok();
    case UnOp::kCeil: Map1<T>(a, [](C x) { return C(std::ceil(x)); }); return Status::Ok();
    case UnOp::kRint: Map1<T>(a, [](C x) { return C(std::nearbyint(x)); }); return Status::Ok();
    case UnOp::kRound: Map1<T>(a, [](C x) { return C(std::round(x)); }); return Status::Ok();
    case UnOp::kTruncate: Map1<T>(a, [](C x) { return C(std::trunc(x)); }); return Status::Ok();
    case UnOp::kNegative: Map1<T>(a, [](C x) { return -x; }); return Status::Ok();
    case UnOp::kAbsolute: Map1<T>(a, [](C x) { return C(std::fabs(x)); }); return Status::Ok();
    // Sign: NaN gives 0 (MPSGraph's documented behaviour), ±0 kept.
    case UnOp::kSign:
      Map1<T>(a, [](C x) { return x > 0 ? C(1) : x < 0 ? C(-1) : x == 0 ? x : C(0); });
      return Status::Ok();
    case UnOp::kIsFinite: MapPredicate<T>(a, [](C x) { return std::isfinite(x); }); return Status::Ok();
    case UnOp::kIsNaN: MapPredicate<T>(a, [](C x) { return std::isnan(x); }); return Status::Ok();
    case UnOp::kIsInfinite: MapPredicate<T>(a, [](C x) { return std::isinf(x); }); return Status::Ok();
#define JMP_MPS_UNARY(name, macos, selector, domain) JMP_DOMAIN_LACKS(domain, FLOAT, case UnOp::k##name:)
#include "mps/op_kinds.def"
      return OutsideDomain(a);
  }
  return Internal("unknown unary op");
}

template <typename T>
Status IntUnary(const OpArgs& a, UnOp op) {
  switch (op) {
    case UnOp::kIdentity: return RunCopyLike(a);
    case UnOp::kNegative:
      Map1<T>(a, [](T x) { return static_cast<T>(U<T>(0) - static_cast<U<T>>(x)); });
      return Status::Ok();
    case UnOp::kAbsolute:
      Map1<T>(a, [](T x) { return x < 0 ? static_cast<T>(U<T>(0) - static_cast<U<T>>(x)) : x; });
      return Status::Ok();
    case UnOp::kSign: Map1<T>(a, [](T x) { return static_cast<T>(x > 0 ? 1 : x < 0 ? -1 : 0); }); return Status::Ok();
    case UnOp::kBitwiseNot: Map1<T>(a, [](T x) { return static_cast<T>(~x); }); return Status::Ok();
    case UnOp::kPopulationCount:
      Map1<T>(a, [](T x) { return static_cast<T>(__builtin_popcountll(static_cast<uint64_t>(static_cast<U<T>>(x)))); });
      return Status::Ok();
#define JMP_MPS_UNARY(name, macos, selector, domain) JMP_DOMAIN_LACKS(domain, INT, case UnOp::k##name:)
#include "mps/op_kinds.def"
      return OutsideDomain(a);
  }
  return Internal("unknown unary op");
}

// RealPart and ImaginaryPart: complex64 -> float32, complex128 -> float64.
template <typename T>
Status ComplexPart(const OpArgs& a, bool real) {
  using R = typename T::value_type;
  int64_t n = a.Count();
  const T* z = reinterpret_cast<const T*>(a.in[0]);
  R* y = reinterpret_cast<R*>(a.out[0]);
  for (int64_t i = 0; i < n; ++i) y[i] = real ? z[i].real() : z[i].imag();
  return Status::Ok();
}

template <typename T>
Status ComplexUnary(const OpArgs& a, UnOp op) {
  switch (op) {
    case UnOp::kIdentity: return RunCopyLike(a);
    case UnOp::kExponent: Map1<T>(a, [](T x) { return std::exp(x); }); return Status::Ok();
    case UnOp::kLogarithm: Map1<T>(a, [](T x) { return std::log(x); }); return Status::Ok();
    case UnOp::kSquareRoot: Map1<T>(a, [](T x) { return std::sqrt(x); }); return Status::Ok();
    case UnOp::kNegative: Map1<T>(a, [](T x) { return -x; }); return Status::Ok();
    case UnOp::kRealPart: return ComplexPart<T>(a, true);
    case UnOp::kImaginaryPart: return ComplexPart<T>(a, false);
    case UnOp::kConjugate: Map1<T>(a, [](T x) { return std::conj(x); }); return Status::Ok();
#define JMP_MPS_UNARY(name, macos, selector, domain) JMP_DOMAIN_LACKS(domain, COMPLEX, case UnOp::k##name:)
#include "mps/op_kinds.def"
      return OutsideDomain(a);
  }
  return Internal("unknown unary op");
}

Status BoolUnary(const OpArgs& a, UnOp op) {
  switch (op) {
    case UnOp::kIdentity: return RunCopyLike(a);
    case UnOp::kNot: Map1<boolean>(a, [](bool x) { return !x; }); return Status::Ok();
#define JMP_MPS_UNARY(name, macos, selector, domain) JMP_DOMAIN_LACKS(domain, BOOL, case UnOp::k##name:)
#include "mps/op_kinds.def"
      return OutsideDomain(a);
  }
  return Internal("unknown unary op");
}

// ---- binary

template <typename T, typename R, typename F>
void Map2(const OpArgs& a, F f) {
  const T* x = reinterpret_cast<const T*>(a.in[0]);
  const T* y = reinterpret_cast<const T*>(a.in[1]);
  auto* z = reinterpret_cast<R*>(a.out[0]);
  int64_t n = a.Count();
  using N = Num<T>;
  if (a.uniform[1]) {
    const auto y0 = N::Load(y[0]);
    for (int64_t i = 0; i < n; ++i) z[i] = f(N::Load(x[i]), y0);
    return;
  }
  ParallelFor(n, GrainFor(1), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) z[i] = f(N::Load(x[i]), N::Load(y[i]));
  });
}

template <typename T, typename F>
void Arith(const OpArgs& a, F f) {
  using N = Num<T>;
  const T* x = reinterpret_cast<const T*>(a.in[0]);
  const T* y = reinterpret_cast<const T*>(a.in[1]);
  auto* z = reinterpret_cast<T*>(a.out[0]);
  int64_t n = a.Count();
  if (a.uniform[1]) {  // only in a fused tile: never worth splitting
    const auto y0 = N::Load(y[0]);
    for (int64_t i = 0; i < n; ++i) z[i] = N::Store(f(N::Load(x[i]), y0));
    return;
  }
  if (a.uniform[0]) {
    const auto x0 = N::Load(x[0]);
    for (int64_t i = 0; i < n; ++i) z[i] = N::Store(f(x0, N::Load(y[i])));
    return;
  }
  ParallelFor(n, GrainFor(1), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) z[i] = N::Store(f(N::Load(x[i]), N::Load(y[i])));
  });
}

// The six comparisons (complex values: Equal and NotEqual only); false for any other op.
template <typename T>
bool Compare(const OpArgs& a, BinOp op) {
  using C = typename Num<T>::C;
  if (op == BinOp::kEqual)
    Map2<T, uint8_t>(a, [](C x, C y) { return uint8_t(x == y); });
  else if (op == BinOp::kNotEqual)
    Map2<T, uint8_t>(a, [](C x, C y) { return uint8_t(x != y); });
  else if constexpr (kIsComplex<T>)
    return false;
  else if (op == BinOp::kLessThan)
    Map2<T, uint8_t>(a, [](C x, C y) { return uint8_t(x < y); });
  else if (op == BinOp::kLessThanOrEqualTo)
    Map2<T, uint8_t>(a, [](C x, C y) { return uint8_t(x <= y); });
  else if (op == BinOp::kGreaterThan)
    Map2<T, uint8_t>(a, [](C x, C y) { return uint8_t(x > y); });
  else if (op == BinOp::kGreaterThanOrEqualTo)
    Map2<T, uint8_t>(a, [](C x, C y) { return uint8_t(x >= y); });
  else
    return false;
  return true;
}

#define JMP_COMPARISONS                  \
  BinOp::kEqual : case BinOp::kNotEqual: \
  case BinOp::kLessThan:                 \
  case BinOp::kLessThanOrEqualTo:        \
  case BinOp::kGreaterThan:              \
  case BinOp::kGreaterThanOrEqualTo

// ComplexFromParts(re, im): float32 parts -> complex64, float64 parts -> complex128.
template <typename T>
Status ComplexFromParts(const OpArgs& a) {
  if constexpr (!std::is_same_v<T, float> && !std::is_same_v<T, double>) {
    return a.Unsupported("needs float32 or float64 parts");
  } else {
    int64_t n = a.Count();
    const T* re = reinterpret_cast<const T*>(a.in[0]);
    const T* im = reinterpret_cast<const T*>(a.in[1]);
    auto* z = reinterpret_cast<std::complex<T>*>(a.out[0]);
    for (int64_t i = 0; i < n; ++i) z[i] = std::complex<T>(re[i], im[i]);
    return Status::Ok();
  }
}

template <typename T>
Status FloatBinary(const OpArgs& a, BinOp op) {
  using C = typename Num<T>::C;
  switch (op) {
    case JMP_COMPARISONS: Compare<T>(a, op); return Status::Ok();
    case BinOp::kComplexFromParts: return ComplexFromParts<T>(a);
    case BinOp::kAdd: Arith<T>(a, [](C x, C y) { return x + y; }); return Status::Ok();
    case BinOp::kSubtract: Arith<T>(a, [](C x, C y) { return x - y; }); return Status::Ok();
    case BinOp::kMultiply: Arith<T>(a, [](C x, C y) { return x * y; }); return Status::Ok();
    case BinOp::kDivide: Arith<T>(a, [](C x, C y) { return x / y; }); return Status::Ok();
    case BinOp::kModulo: Arith<T>(a, [](C x, C y) { return C(std::fmod(x, y)); }); return Status::Ok();
    case BinOp::kMaximum:
      Arith<T>(a, [](C x, C y) {
        return std::isnan(x) || std::isnan(y) ? C(NAN) : x > y ? x : x < y ? y : (std::signbit(x) ? y : x);
      });
      return Status::Ok();
    case BinOp::kMinimum:
      Arith<T>(a, [](C x, C y) {
        return std::isnan(x) || std::isnan(y) ? C(NAN) : x < y ? x : x > y ? y : (std::signbit(x) ? x : y);
      });
      return Status::Ok();
    case BinOp::kPower: Arith<T>(a, [](C x, C y) { return C(std::pow(x, y)); }); return Status::Ok();
    case BinOp::kAtan2: Arith<T>(a, [](C x, C y) { return C(std::atan2(x, y)); }); return Status::Ok();
#define JMP_MPS_BINARY(name, macos, primary, secondary, domain) JMP_DOMAIN_LACKS(domain, FLOAT, case BinOp::k##name:)
#include "mps/op_kinds.def"
      return OutsideDomain(a);
  }
  return Internal("unknown binary op");
}

template <typename T>
Status IntBinary(const OpArgs& a, BinOp op) {
  using UT = U<T>;
  constexpr int bits = static_cast<int>(sizeof(T) * 8);
  switch (op) {
    case JMP_COMPARISONS: Compare<T>(a, op); return Status::Ok();
    case BinOp::kAdd:
      Arith<T>(a, [](T x, T y) { return static_cast<T>(static_cast<UT>(x) + static_cast<UT>(y)); });
      return Status::Ok();
    case BinOp::kSubtract:
      Arith<T>(a, [](T x, T y) { return static_cast<T>(static_cast<UT>(x) - static_cast<UT>(y)); });
      return Status::Ok();
    case BinOp::kMultiply:
      Arith<T>(a, [](T x, T y) {
        using W = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, UT>;
        return static_cast<T>(static_cast<UT>(static_cast<W>(static_cast<UT>(x)) * static_cast<W>(static_cast<UT>(y))));
      });
      return Status::Ok();
    // Divide truncates; x/0 -> 0 and MIN/-1 -> MIN here (the lowering selects StableHLO's results).
    case BinOp::kDivide:
      Arith<T>(a, [](T x, T y) {
        if (y == 0) return T(0);
        if constexpr (std::is_signed_v<T>)
          if (y == T(-1)) return static_cast<T>(UT(0) - static_cast<UT>(x));
        return static_cast<T>(x / y);
      });
      return Status::Ok();
    case BinOp::kModulo:
      Arith<T>(a, [](T x, T y) {
        if (y == 0) return T(0);
        if constexpr (std::is_signed_v<T>)
          if (y == T(-1)) return T(0);
        return static_cast<T>(x % y);
      });
      return Status::Ok();
    case BinOp::kMaximum: Arith<T>(a, [](T x, T y) { return x > y ? x : y; }); return Status::Ok();
    case BinOp::kMinimum: Arith<T>(a, [](T x, T y) { return x < y ? x : y; }); return Status::Ok();
    case BinOp::kBitwiseAnd: Arith<T>(a, [](T x, T y) { return static_cast<T>(x & y); }); return Status::Ok();
    case BinOp::kBitwiseOr: Arith<T>(a, [](T x, T y) { return static_cast<T>(x | y); }); return Status::Ok();
    case BinOp::kBitwiseXor: Arith<T>(a, [](T x, T y) { return static_cast<T>(x ^ y); }); return Status::Ok();
    // Shifts: amounts outside [0, bits) give 0, or the sign fill for a signed right shift.
    case BinOp::kBitwiseLeftShift:
      Arith<T>(a, [](T x, T y) {
        UT s = static_cast<UT>(y);
        return s >= UT(bits) ? T(0) : static_cast<T>(static_cast<UT>(static_cast<UT>(x) << s));
      });
      return Status::Ok();
    case BinOp::kBitwiseRightShift:
      Arith<T>(a, [](T x, T y) {
        UT s = static_cast<UT>(y);
        if constexpr (std::is_signed_v<T>) {
          if (s >= UT(bits)) return x < 0 ? T(-1) : T(0);
          return static_cast<T>(x >> s);
        } else {
          return s >= UT(bits) ? T(0) : static_cast<T>(x >> s);
        }
      });
      return Status::Ok();
#define JMP_MPS_BINARY(name, macos, primary, secondary, domain) JMP_DOMAIN_LACKS(domain, INT, case BinOp::k##name:)
#include "mps/op_kinds.def"
      return OutsideDomain(a);
  }
  return Internal("unknown binary op");
}

Status BoolBinary(const OpArgs& a, BinOp op) {
  switch (op) {
    case BinOp::kEqual:
    case BinOp::kNotEqual: Compare<boolean>(a, op); return Status::Ok();
    case BinOp::kLogicalAnd: Arith<boolean>(a, [](bool x, bool y) { return x && y; }); return Status::Ok();
    case BinOp::kLogicalOr: Arith<boolean>(a, [](bool x, bool y) { return x || y; }); return Status::Ok();
    case BinOp::kLogicalXor: Arith<boolean>(a, [](bool x, bool y) { return x != y; }); return Status::Ok();
#define JMP_MPS_BINARY(name, macos, primary, secondary, domain) JMP_DOMAIN_LACKS(domain, BOOL, case BinOp::k##name:)
#include "mps/op_kinds.def"
      return OutsideDomain(a);
  }
  return Internal("unknown binary op");
}

template <typename T>
Status ComplexBinary(const OpArgs& a, BinOp op) {
  switch (op) {
    case BinOp::kEqual:
    case BinOp::kNotEqual: Compare<T>(a, op); return Status::Ok();
    case BinOp::kAdd: Arith<T>(a, [](T x, T y) { return x + y; }); return Status::Ok();
    case BinOp::kSubtract: Arith<T>(a, [](T x, T y) { return x - y; }); return Status::Ok();
    // As XLA computes it, (ac - bd, ad + bc): std::complex's product recovers infinities from NaN
    // results (C99 Annex G) through a call into libgcc on every element.
    case BinOp::kMultiply:
      Arith<T>(a, [](T x, T y) {
        return T(x.real() * y.real() - x.imag() * y.imag(), x.real() * y.imag() + x.imag() * y.real());
      });
      return Status::Ok();
    case BinOp::kDivide: Arith<T>(a, [](T x, T y) { return x / y; }); return Status::Ok();
#define JMP_MPS_BINARY(name, macos, primary, secondary, domain) JMP_DOMAIN_LACKS(domain, COMPLEX, case BinOp::k##name:)
#include "mps/op_kinds.def"
      return OutsideDomain(a);
  }
  return Internal("unknown binary op");
}

#undef JMP_COMPARISONS

}  // namespace

Status RunUnary(const OpArgs& a, mps::UnaryOp op) {
  return Dispatch(a.InType(0).dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (kIsFloat<T>)
      return FloatUnary<T>(a, op);
    else if constexpr (kIsInt<T>)
      return IntUnary<T>(a, op);
    else if constexpr (kIsComplex<T>)
      return ComplexUnary<T>(a, op);
    else
      return BoolUnary(a, op);
  });
}

Status RunBinary(const OpArgs& a, mps::BinaryOp op) {
  DType t = a.InType(0).dtype;
  if (a.InType(1).dtype != t || a.InType(1).shape != a.InType(0).shape)
    return a.Unsupported("needs operands of one type");
  if (a.or_of_shifts) {
    if (VectorOrOfShifts(a)) return Status::Ok();
    return a.Unsupported("fuses an or of shifts of unsigned integers only");
  }
  if (VectorBinary(a, op)) return Status::Ok();
  return Dispatch(t, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (kIsFloat<T>)
      return FloatBinary<T>(a, op);
    else if constexpr (kIsInt<T>)
      return IntBinary<T>(a, op);
    else if constexpr (kIsComplex<T>)
      return ComplexBinary<T>(a, op);
    else
      return BoolBinary(a, op);
  });
}

}  // namespace jmp::exec::host
