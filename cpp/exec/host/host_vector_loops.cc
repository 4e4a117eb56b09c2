// Elementwise loops built once per instruction-set level, SSE2 to AVX-512 (JMP_VECTOR_LOOP; the generic
// loops, one function per op and type behind the type dispatch, are built for the baseline only): float32 add,
// subtract, multiply, divide, maximum and minimum, the loops every elementwise chain is made of; the same in float64,
// and the 32/64-bit integer ones: a float64 random normal is threefry's uint32 arithmetic, a uint64 to float64
// conversion and erf_inv's float64 polynomials chosen by selects, and the generic loops ran those at
// half the vector width XLA:CPU uses. Each loop computes what the generic kernel computes, with the
// same expression; maximum and minimum keep its NaN and signed-zero rules, written so that they
// become blends.
#include <cmath>
#include <cstdint>
#include <limits>

#include "exec/host/host_fastmath.h"
#include "exec/host/host_kernels.h"
#include "exec/host/host_parallel.h"

namespace jmp::exec::host {

namespace {

using BinOp = mps::BinaryOp;

template <typename T>
JMP_FASTMATH T MaxF(T x, T y) {
  return fastmath::Maximum(x, y);
}
template <typename T>
JMP_FASTMATH T MinF(T x, T y) {
  return fastmath::Minimum(x, y);
}
template <typename T>
JMP_FASTMATH T AddF(T x, T y) {
  return x + y;
}
template <typename T>
JMP_FASTMATH T SubF(T x, T y) {
  return x - y;
}
template <typename T>
JMP_FASTMATH T MulF(T x, T y) {
  return x * y;
}
template <typename T>
JMP_FASTMATH T DivF(T x, T y) {
  return x / y;
}

// Integers wrap (computed unsigned); shifts by amounts outside [0, bits) give 0, or the sign fill for a
// signed right shift.
template <typename T>
using U = std::make_unsigned_t<T>;
template <typename T>
JMP_FASTMATH T AddI(T x, T y) {
  return static_cast<T>(static_cast<U<T>>(x) + static_cast<U<T>>(y));
}
template <typename T>
JMP_FASTMATH T SubI(T x, T y) {
  return static_cast<T>(static_cast<U<T>>(x) - static_cast<U<T>>(y));
}
template <typename T>
JMP_FASTMATH T MulI(T x, T y) {  // 32 and 64 bits: no promotion to int
  return static_cast<T>(static_cast<U<T>>(x) * static_cast<U<T>>(y));
}
template <typename T>
JMP_FASTMATH T AndI(T x, T y) {
  return static_cast<T>(x & y);
}
template <typename T>
JMP_FASTMATH T OrI(T x, T y) {
  return static_cast<T>(x | y);
}
template <typename T>
JMP_FASTMATH T XorI(T x, T y) {
  return static_cast<T>(x ^ y);
}
template <typename T>
JMP_FASTMATH T ShlI(T x, T y) {
  return fastmath::ShiftLeft(x, y);
}
template <typename T>
JMP_FASTMATH T ShrI(T x, T y) {
  return fastmath::ShiftRight(x, y);
}

// `uniform`: 0 both operands are arrays, 1 x is one element, 2 y is.
#define JMP_BINARY_LOOP_TO(Name, T, R, Op)                                                       \
  JMP_VECTOR_LOOP(Name, (const T* x, const T* y, R* z, int64_t begin, int64_t end, int uniform), \
                  (x, y, z, begin, end, uniform), {                                              \
                    if (uniform == 2) {                                                          \
                      const T b = y[0];                                                          \
                      for (int64_t i = begin; i < end; ++i) z[i] = Op(x[i], b);                  \
                    } else if (uniform == 1) {                                                   \
                      const T b = x[0];                                                          \
                      for (int64_t i = begin; i < end; ++i) z[i] = Op(b, y[i]);                  \
                    } else {                                                                     \
                      for (int64_t i = begin; i < end; ++i) z[i] = Op(x[i], y[i]);               \
                    }                                                                            \
                  })
#define JMP_BINARY_LOOP(Name, T, Op) JMP_BINARY_LOOP_TO(Name, T, T, Op)
#define JMP_FLOAT_LOOPS(Suffix, T)         \
  JMP_BINARY_LOOP(Add##Suffix, T, AddF<T>) \
  JMP_BINARY_LOOP(Sub##Suffix, T, SubF<T>) \
  JMP_BINARY_LOOP(Mul##Suffix, T, MulF<T>) \
  JMP_BINARY_LOOP(Div##Suffix, T, DivF<T>) \
  JMP_BINARY_LOOP(Max##Suffix, T, MaxF<T>) \
  JMP_BINARY_LOOP(Min##Suffix, T, MinF<T>)
JMP_FLOAT_LOOPS(F32, float)
JMP_FLOAT_LOOPS(F64, double)
#undef JMP_FLOAT_LOOPS
#define JMP_INT_LOOPS(Suffix, T)           \
  JMP_BINARY_LOOP(Add##Suffix, T, AddI<T>) \
  JMP_BINARY_LOOP(Sub##Suffix, T, SubI<T>) \
  JMP_BINARY_LOOP(Mul##Suffix, T, MulI<T>) \
  JMP_BINARY_LOOP(And##Suffix, T, AndI<T>) \
  JMP_BINARY_LOOP(Or##Suffix, T, OrI<T>)   \
  JMP_BINARY_LOOP(Xor##Suffix, T, XorI<T>) \
  JMP_BINARY_LOOP(Shl##Suffix, T, ShlI<T>) \
  JMP_BINARY_LOOP(Shr##Suffix, T, ShrI<T>)
JMP_INT_LOOPS(U32, uint32_t)
JMP_INT_LOOPS(I32, int32_t)
JMP_INT_LOOPS(U64, uint64_t)
JMP_INT_LOOPS(I64, int64_t)
#undef JMP_INT_LOOPS
#undef JMP_BINARY_LOOP

// Float comparisons: a relu's gradient masks by one (x > 0) per layer, and erf_inv picks its float64
// polynomial by two, with a splat bound (`uniform` as above). The generic loops compare one element at
// a time (their byte stores may alias the inputs).
#define JMP_COMPARE_LOOP(Name, T, Cmp)      \
  template <typename V>                     \
  JMP_FASTMATH uint8_t Name##Op(V x, V y) { \
    return static_cast<uint8_t>(x Cmp y);   \
  }                                         \
  JMP_BINARY_LOOP_TO(Name, T, uint8_t, Name##Op<T>)
#define JMP_COMPARE_LOOPS(Suffix, T)  \
  JMP_COMPARE_LOOP(Eq##Suffix, T, ==) \
  JMP_COMPARE_LOOP(Ne##Suffix, T, !=) \
  JMP_COMPARE_LOOP(Lt##Suffix, T, <)  \
  JMP_COMPARE_LOOP(Le##Suffix, T, <=) \
  JMP_COMPARE_LOOP(Gt##Suffix, T, >)  \
  JMP_COMPARE_LOOP(Ge##Suffix, T, >=)
JMP_COMPARE_LOOPS(F32, float)
JMP_COMPARE_LOOPS(F64, double)
#undef JMP_COMPARE_LOOPS
#undef JMP_COMPARE_LOOP
#undef JMP_BINARY_LOOP_TO

#define JMP_COMPARE_PICK(Suffix)                    \
  op == BinOp::kEqual                  ? Eq##Suffix \
  : op == BinOp::kNotEqual             ? Ne##Suffix \
  : op == BinOp::kLessThan             ? Lt##Suffix \
  : op == BinOp::kLessThanOrEqualTo    ? Le##Suffix \
  : op == BinOp::kGreaterThan          ? Gt##Suffix \
  : op == BinOp::kGreaterThanOrEqualTo ? Ge##Suffix \
                                       : nullptr

// float64 unary loops: log is erf_inv's (fastmath::Log, vectorised), sqrt, negative and absolute value
// the other unary ops of its polynomial selection; the generic loops call libm one element at a time.
JMP_FASTMATH double NegD(double x) { return -x; }
JMP_FASTMATH double AbsD(double x) { return std::fabs(x); }
JMP_FASTMATH double SqrtD(double x) { return std::sqrt(x); }
#define JMP_UNARY_LOOP(Name, T, Op)                                                           \
  JMP_VECTOR_LOOP(Name, (const T* x, T* y, int64_t begin, int64_t end), (x, y, begin, end), { \
    for (int64_t i = begin; i < end; ++i) y[i] = Op(x[i]);                                    \
  })
JMP_UNARY_LOOP(LogF64, double, fastmath::Log)
JMP_UNARY_LOOP(SqrtF64, double, SqrtD)
JMP_UNARY_LOOP(NegF64, double, NegD)
JMP_UNARY_LOOP(AbsF64, double, AbsD)
#undef JMP_UNARY_LOOP

// x << l | x >> r with l and r splats, one pass where two shifts and an or were three (a rotation:
// threefry makes 20 per random number).
#define JMP_OR_OF_SHIFTS_LOOP(Name, T)                                                                    \
  JMP_VECTOR_LOOP(Name, (const T* x, T l, T r, T* z, int64_t n), (x, l, r, z, n), {                       \
    for (int64_t i = 0; i < n; ++i) z[i] = static_cast<T>(ShlI(x[i], l) | fastmath::ShiftRight(x[i], r)); \
  })
JMP_OR_OF_SHIFTS_LOOP(OrOfShiftsU32, uint32_t)
JMP_OR_OF_SHIFTS_LOOP(OrOfShiftsU64, uint64_t)
#undef JMP_OR_OF_SHIFTS_LOOP

template <typename T>
void RunOrOfShifts(const OpArgs& a, void (*loop)(const T*, T, T, T*, int64_t)) {
  loop(reinterpret_cast<const T*>(a.in[0]), *reinterpret_cast<const T*>(a.in[1]), *reinterpret_cast<const T*>(a.in[2]),
       reinterpret_cast<T*>(a.out[0]), a.Count());
}

// R: the result's element type (a comparison's is a byte).
template <typename T, typename R = T>
using Loop = void (*)(const T*, const T*, R*, int64_t, int64_t, int);

template <typename T, typename R = T>
bool RunLoop(const OpArgs& a, Loop<T, R> loop) {
  if (!loop) return false;
  const T* x = reinterpret_cast<const T*>(a.in[0]);
  const T* y = reinterpret_cast<const T*>(a.in[1]);
  R* z = reinterpret_cast<R*>(a.out[0]);
  const int uniform = a.uniform[1] ? 2 : a.uniform[0] ? 1 : 0;
  if (uniform) {  // only in a fused tile: never worth splitting
    loop(x, y, z, 0, a.Count(), uniform);
    return true;
  }
  ParallelFor(a.Count(), GrainFor(1), [&](int64_t begin, int64_t end) { loop(x, y, z, begin, end, 0); });
  return true;
}

#define JMP_FLOAT_PICK(Suffix)           \
  op == BinOp::kAdd        ? Add##Suffix \
  : op == BinOp::kSubtract ? Sub##Suffix \
  : op == BinOp::kMultiply ? Mul##Suffix \
  : op == BinOp::kDivide   ? Div##Suffix \
  : op == BinOp::kMaximum  ? Max##Suffix \
  : op == BinOp::kMinimum  ? Min##Suffix \
                           : nullptr
#define JMP_INT_PICK(Suffix)                      \
  op == BinOp::kAdd                 ? Add##Suffix \
  : op == BinOp::kSubtract          ? Sub##Suffix \
  : op == BinOp::kMultiply          ? Mul##Suffix \
  : op == BinOp::kBitwiseAnd        ? And##Suffix \
  : op == BinOp::kBitwiseOr         ? Or##Suffix  \
  : op == BinOp::kBitwiseXor        ? Xor##Suffix \
  : op == BinOp::kBitwiseLeftShift  ? Shl##Suffix \
  : op == BinOp::kBitwiseRightShift ? Shr##Suffix \
                                    : nullptr

template <typename W>
JMP_FASTMATH W Pick(uint8_t p, W x, W y) {
  const W m = fastmath::SelectMask<W>(p);
  return static_cast<W>((x & m) | (y & static_cast<W>(~m)));
}
// `uniform`: bit 0 x is one element, bit 1 y is (a fused group's splats: erf_inv picks each polynomial
// coefficient from two of them, and reading whole tiles of them would stream them through the cache).
// With a splat the plain conditional compiles to a byte compare and blends, about twice as fast as the
// mask arithmetic (which widens each byte through a chain of shuffles); with two arrays the mask is faster.
// The array's element is loaded whatever the predicate: a load only on one side of the conditional
// needs a masked load to vectorise (AVX2 has one; SSE4.2 and NEON do not, and their loop branched on
// every element of a relu's mask).
#define JMP_SELECT_LOOP(Name, W)                                                                                   \
  JMP_VECTOR_LOOP(Name, (const uint8_t* p, const W* x, const W* y, W* z, int64_t begin, int64_t end, int uniform), \
                  (p, x, y, z, begin, end, uniform), {                                                             \
                    if (uniform == 3) {                                                                            \
                      const W a = x[0], b = y[0];                                                                  \
                      for (int64_t i = begin; i < end; ++i) z[i] = p[i] ? a : b;                                   \
                    } else if (uniform == 1) {                                                                     \
                      const W a = x[0];                                                                            \
                      for (int64_t i = begin; i < end; ++i) {                                                      \
                        const W b = y[i];                                                                          \
                        z[i] = p[i] ? a : b;                                                                       \
                      }                                                                                            \
                    } else if (uniform == 2) {                                                                     \
                      const W b = y[0];                                                                            \
                      for (int64_t i = begin; i < end; ++i) {                                                      \
                        const W a = x[i];                                                                          \
                        z[i] = p[i] ? a : b;                                                                       \
                      }                                                                                            \
                    } else {                                                                                       \
                      for (int64_t i = begin; i < end; ++i) z[i] = Pick<W>(p[i], x[i], y[i]);                      \
                    }                                                                                              \
                  })
JMP_SELECT_LOOP(Select32, uint32_t)
JMP_SELECT_LOOP(Select64, uint64_t)
#undef JMP_SELECT_LOOP

template <typename W>
void RunSelectLoop(const OpArgs& a, void (*loop)(const uint8_t*, const W*, const W*, W*, int64_t, int64_t, int)) {
  const W* x = reinterpret_cast<const W*>(a.in[1]);
  const W* y = reinterpret_cast<const W*>(a.in[2]);
  W* z = reinterpret_cast<W*>(a.out[0]);
  const int uniform = (a.uniform[1] ? 1 : 0) | (a.uniform[2] ? 2 : 0);
  if (uniform) {  // only in a fused tile: never worth splitting
    loop(a.in[0], x, y, z, 0, a.Count(), uniform);
    return;
  }
  ParallelFor(a.Count(), GrainFor(1), [&](int64_t begin, int64_t end) { loop(a.in[0], x, y, z, begin, end, 0); });
}

}  // namespace

bool VectorBinary(const OpArgs& a, mps::BinaryOp op) {
  switch (a.InType(0).dtype) {
    case DType::kF32:
      if (RunLoop<float, uint8_t>(a, JMP_COMPARE_PICK(F32))) return true;
      return RunLoop<float>(a, JMP_FLOAT_PICK(F32));
    case DType::kF64:
      if (RunLoop<double, uint8_t>(a, JMP_COMPARE_PICK(F64))) return true;
      return RunLoop<double>(a, JMP_FLOAT_PICK(F64));
    case DType::kU32: return RunLoop<uint32_t>(a, JMP_INT_PICK(U32));
    case DType::kI32: return RunLoop<int32_t>(a, JMP_INT_PICK(I32));
    case DType::kU64: return RunLoop<uint64_t>(a, JMP_INT_PICK(U64));
    case DType::kI64: return RunLoop<int64_t>(a, JMP_INT_PICK(I64));
    default: return false;
  }
}

bool VectorUnary(const OpArgs& a, mps::UnaryOp op) {
  using UnOp = mps::UnaryOp;
  if (a.InType(0).dtype != DType::kF64) return false;
  void (*loop)(const double*, double*, int64_t, int64_t) = op == UnOp::kLogarithm    ? LogF64
                                                           : op == UnOp::kSquareRoot ? SqrtF64
                                                           : op == UnOp::kNegative   ? NegF64
                                                           : op == UnOp::kAbsolute   ? AbsF64
                                                                                     : nullptr;
  if (!loop) return false;
  const double* x = reinterpret_cast<const double*>(a.in[0]);
  double* y = reinterpret_cast<double*>(a.out[0]);
  ParallelFor(a.Count(), GrainFor(op == UnOp::kLogarithm ? 16 : 1),
              [&](int64_t begin, int64_t end) { loop(x, y, begin, end); });
  return true;
}

bool VectorOrOfShifts(const OpArgs& a) {
  switch (a.OutType().dtype) {
    case DType::kU32: RunOrOfShifts<uint32_t>(a, OrOfShiftsU32); return true;
    case DType::kU64: RunOrOfShifts<uint64_t>(a, OrOfShiftsU64); return true;
    default: return false;
  }
}

bool VectorSelect(const OpArgs& a) {
  switch (ByteSize(a.OutType().dtype)) {
    case 4: RunSelectLoop<uint32_t>(a, Select32); return true;
    case 8: RunSelectLoop<uint64_t>(a, Select64); return true;
    default: return false;
  }
}

#undef JMP_FLOAT_PICK
#undef JMP_COMPARE_PICK
#undef JMP_INT_PICK

}  // namespace jmp::exec::host
