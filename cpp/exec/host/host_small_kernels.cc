// Kernels for elementwise ops on few elements, called straight by a bound plan (host_bound_plan.cc): a
// loop body's scalar index arithmetic and small carries run these thousands of times, where the generic
// kernels' per-call work (type dispatch, shape checks, the parallel split) costs more than the
// arithmetic. Each computes exactly what the generic kernel (host_elementwise.cc) computes for its op
// and type, with the same expression; ops and types not listed here keep the generic kernel.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "exec/host/host_fastmath.h"
#include "exec/host/host_kernels.h"

namespace jmp::exec::host {

namespace {

using K = mps::OpKind;

template <typename T>
using U = std::make_unsigned_t<T>;

// Binary arithmetic, as host_elementwise.cc's Arith lambdas: integers wrap (computed unsigned), float
// maximum and minimum propagate NaN and order -0 below +0.
struct AddOp {
  template <typename T>
  static T Apply(T x, T y) {
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(static_cast<U<T>>(x) + static_cast<U<T>>(y));
    else
      return x + y;
  }
};
struct SubOp {
  template <typename T>
  static T Apply(T x, T y) {
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(static_cast<U<T>>(x) - static_cast<U<T>>(y));
    else
      return x - y;
  }
};
struct MulOp {
  template <typename T>
  static T Apply(T x, T y) {
    if constexpr (std::is_integral_v<T>) {
      using W = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, U<T>>;
      return static_cast<T>(
          static_cast<U<T>>(static_cast<W>(static_cast<U<T>>(x)) * static_cast<W>(static_cast<U<T>>(y))));
    } else {
      return x * y;
    }
  }
};
struct DivOp {  // floats only
  template <typename T>
  static T Apply(T x, T y) {
    return x / y;
  }
};
struct MaxOp {
  template <typename T>
  static T Apply(T x, T y) {
    if constexpr (std::is_integral_v<T>)
      return x > y ? x : y;
    else
      return std::isnan(x) || std::isnan(y) ? std::numeric_limits<T>::quiet_NaN()
             : x > y                        ? x
             : x < y                        ? y
                                            : (std::signbit(x) ? y : x);
  }
};
struct MinOp {
  template <typename T>
  static T Apply(T x, T y) {
    if constexpr (std::is_integral_v<T>)
      return x < y ? x : y;
    else
      return std::isnan(x) || std::isnan(y) ? std::numeric_limits<T>::quiet_NaN()
             : x < y                        ? x
             : x > y                        ? y
                                            : (std::signbit(x) ? x : y);
  }
};
struct AndOp {
  template <typename T>
  static T Apply(T x, T y) {
    return static_cast<T>(x & y);
  }
};
struct OrOp {
  template <typename T>
  static T Apply(T x, T y) {
    return static_cast<T>(x | y);
  }
};
struct XorOp {
  template <typename T>
  static T Apply(T x, T y) {
    return static_cast<T>(x ^ y);
  }
};
struct ShlOp {
  template <typename T>
  static T Apply(T x, T y) {
    return fastmath::ShiftLeft(x, y);
  }
};
struct ShrOp {
  template <typename T>
  static T Apply(T x, T y) {
    return fastmath::ShiftRight(x, y);
  }
};

// Elements per chunk: a chunk's operands are read into locals before its results are written, so the
// compiler vectorises it without the overlap checks a loop over the buffers needs (and that cost more
// than the work at a few elements). An output is never part of an input (the plan gives every value its
// own place, or the very place of an input an elementwise op may overwrite), so the results are the same.
constexpr int64_t kChunk = 8;

template <typename T, typename Op>
void Binary(const uint8_t* const* in, uint8_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + kChunk <= n; i += kChunk) {
    T x[kChunk], y[kChunk], z[kChunk];
    std::memcpy(x, in[0] + i * sizeof(T), sizeof x);
    std::memcpy(y, in[1] + i * sizeof(T), sizeof y);
    for (int64_t k = 0; k < kChunk; ++k) z[k] = Op::Apply(x[k], y[k]);
    std::memcpy(out + i * sizeof(T), z, sizeof z);
  }
  const T* x = reinterpret_cast<const T*>(in[0]);
  const T* y = reinterpret_cast<const T*>(in[1]);
  T* z = reinterpret_cast<T*>(out);
  for (; i < n; ++i) z[i] = Op::Apply(x[i], y[i]);
}

// Comparisons give bool (one byte, 0 or 1).
struct EqOp {
  template <typename T>
  static bool Apply(T x, T y) {
    return x == y;
  }
};
struct NeOp {
  template <typename T>
  static bool Apply(T x, T y) {
    return x != y;
  }
};
struct LtOp {
  template <typename T>
  static bool Apply(T x, T y) {
    return x < y;
  }
};
struct LeOp {
  template <typename T>
  static bool Apply(T x, T y) {
    return x <= y;
  }
};
struct GtOp {
  template <typename T>
  static bool Apply(T x, T y) {
    return x > y;
  }
};
struct GeOp {
  template <typename T>
  static bool Apply(T x, T y) {
    return x >= y;
  }
};

template <typename T, typename Op>
void Compare(const uint8_t* const* in, uint8_t* out, int64_t n) {
  const T* x = reinterpret_cast<const T*>(in[0]);
  const T* y = reinterpret_cast<const T*>(in[1]);
  for (int64_t i = 0; i < n; ++i) out[i] = Op::Apply(x[i], y[i]) ? 1 : 0;
}

template <typename Op>
void CompareBool(const uint8_t* const* in, uint8_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = Op::Apply(in[0][i] != 0, in[1][i] != 0) ? 1 : 0;
}

struct LogicalAndOp {
  static bool Apply(bool x, bool y) { return x && y; }
};
struct LogicalOrOp {
  static bool Apply(bool x, bool y) { return x || y; }
};
struct LogicalXorOp {
  static bool Apply(bool x, bool y) { return x != y; }
};

template <typename Op>
void Logical(const uint8_t* const* in, uint8_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = Op::Apply(in[0][i] != 0, in[1][i] != 0) ? 1 : 0;
}

void Not(const uint8_t* const* in, uint8_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = in[0][i] != 0 ? 0 : 1;
}

template <typename T>
void Negative(const uint8_t* const* in, uint8_t* out, int64_t n) {
  const T* x = reinterpret_cast<const T*>(in[0]);
  T* y = reinterpret_cast<T*>(out);
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_integral_v<T>)
      y[i] = static_cast<T>(U<T>(0) - static_cast<U<T>>(x[i]));
    else
      y[i] = -x[i];
  }
}

template <typename T>
void BitwiseNot(const uint8_t* const* in, uint8_t* out, int64_t n) {
  const T* x = reinterpret_cast<const T*>(in[0]);
  T* y = reinterpret_cast<T*>(out);
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>(~x[i]);
}

// Select(pred, on_true, on_false) by element width; a one-element predicate picks a whole operand.
template <typename W>
void Select(const uint8_t* const* in, uint8_t* out, int64_t n) {
  const W* x = reinterpret_cast<const W*>(in[1]);
  const W* y = reinterpret_cast<const W*>(in[2]);
  W* z = reinterpret_cast<W*>(out);
  for (int64_t i = 0; i < n; ++i) z[i] = in[0][i] != 0 ? x[i] : y[i];
}
void SelectWhole(const uint8_t* const* in, uint8_t* out, int64_t bytes) {
  std::memcpy(out, in[0][0] != 0 ? in[1] : in[2], static_cast<size_t>(bytes));
}

// MultiplyAdd: only the sum rounded (std::fma), as host_multiply_add.cc; built per instruction-set level,
// and where the CPU has FMA (JMP_FMA_LOOP) it is one instruction rather than a call into libm per element.
JMP_FMA_LOOP(FmaF32, (const float* a, const float* b, const float* c, float* y, int64_t n), (a, b, c, y, n), {
  for (int64_t i = 0; i < n; ++i) y[i] = std::fma(a[i], b[i], c[i]);
})
JMP_FMA_LOOP(FmaF64, (const double* a, const double* b, const double* c, double* y, int64_t n), (a, b, c, y, n), {
  for (int64_t i = 0; i < n; ++i) y[i] = std::fma(a[i], b[i], c[i]);
})
template <typename T>
void MultiplyAdd(const uint8_t* const* in, uint8_t* out, int64_t n) {
  const T* a = reinterpret_cast<const T*>(in[0]);
  const T* b = reinterpret_cast<const T*>(in[1]);
  const T* c = reinterpret_cast<const T*>(in[2]);
  if constexpr (std::is_same_v<T, float>)
    FmaF32(a, b, c, reinterpret_cast<float*>(out), n);
  else
    FmaF64(a, b, c, reinterpret_cast<double*>(out), n);
}

template <typename T>
SmallKernel BinaryFor(K kind) {
  constexpr bool is_int = std::is_integral_v<T>;
  if (kind == K::kAdd) return Binary<T, AddOp>;
  if (kind == K::kSubtract) return Binary<T, SubOp>;
  if (kind == K::kMultiply) return Binary<T, MulOp>;
  if (kind == K::kMaximum) return Binary<T, MaxOp>;
  if (kind == K::kMinimum) return Binary<T, MinOp>;
  if constexpr (is_int) {
    if (kind == K::kBitwiseAnd) return Binary<T, AndOp>;
    if (kind == K::kBitwiseOr) return Binary<T, OrOp>;
    if (kind == K::kBitwiseXor) return Binary<T, XorOp>;
    if (kind == K::kBitwiseLeftShift) return Binary<T, ShlOp>;
    if (kind == K::kBitwiseRightShift) return Binary<T, ShrOp>;
  } else {
    if (kind == K::kDivide) return Binary<T, DivOp>;
  }
  return nullptr;
}

template <typename T>
SmallKernel CompareFor(K kind) {
  if (kind == K::kEqual) return Compare<T, EqOp>;
  if (kind == K::kNotEqual) return Compare<T, NeOp>;
  if (kind == K::kLessThan) return Compare<T, LtOp>;
  if (kind == K::kLessThanOrEqualTo) return Compare<T, LeOp>;
  if (kind == K::kGreaterThan) return Compare<T, GtOp>;
  if (kind == K::kGreaterThanOrEqualTo) return Compare<T, GeOp>;
  return nullptr;
}

bool IsComparison(K kind) {
  return kind == K::kEqual || kind == K::kNotEqual || kind == K::kLessThan || kind == K::kLessThanOrEqualTo ||
         kind == K::kGreaterThan || kind == K::kGreaterThanOrEqualTo;
}

// The types these kernels cover: calls f(T{}) for them, returns nullptr for the rest.
template <typename F>
SmallKernel ForType(DType t, F&& f) {
  switch (t) {
    case DType::kI8: return f(int8_t{});
    case DType::kI16: return f(int16_t{});
    case DType::kI32: return f(int32_t{});
    case DType::kI64: return f(int64_t{});
    case DType::kU8: return f(uint8_t{});
    case DType::kU16: return f(uint16_t{});
    case DType::kU32: return f(uint32_t{});
    case DType::kU64: return f(uint64_t{});
    case DType::kF32: return f(float{});
    case DType::kF64: return f(double{});
    default: return nullptr;  // bool, half types, complex: the generic kernels
  }
}

}  // namespace

SmallKernel SmallKernelFor(const mps::Graph& g, const mps::Op& op, int64_t* count) {
  if (op.outputs.size() != 1 || !op.subgraphs.empty()) return nullptr;
  const mps::TensorType& out = g.type(op.outputs[0]);
  *count = out.NumElements();
  const K kind = op.kind;
  if (kind == K::kSelect) {
    if (op.inputs.size() != 3) return nullptr;
    const mps::TensorType& p = g.type(op.inputs[0]);
    const mps::TensorType& x = g.type(op.inputs[1]);
    const mps::TensorType& y = g.type(op.inputs[2]);
    if (p.dtype != DType::kBool || x.dtype != out.dtype || y.dtype != out.dtype || x.NumElements() != *count ||
        y.NumElements() != *count)
      return nullptr;
    if (p.NumElements() == 1 && *count != 1) {  // as RunSelect: the chosen operand, whole
      *count = static_cast<int64_t>(out.ByteSize());
      return SelectWhole;
    }
    if (p.NumElements() != *count) return nullptr;
    switch (ByteSize(out.dtype)) {
      case 1: return Select<uint8_t>;
      case 2: return Select<uint16_t>;
      case 4: return Select<uint32_t>;
      case 8: return Select<uint64_t>;
      default: return nullptr;
    }
  }
  if (kind == K::kMultiplyAdd) {
    if (op.inputs.size() != 3 || (out.dtype != DType::kF32 && out.dtype != DType::kF64)) return nullptr;
    for (int v : op.inputs)
      if (g.type(v).dtype != out.dtype || g.type(v).NumElements() != *count) return nullptr;
    return out.dtype == DType::kF32 ? MultiplyAdd<float> : MultiplyAdd<double>;
  }
  if (op.inputs.size() == 1) {
    const mps::TensorType& x = g.type(op.inputs[0]);
    if (x.dtype != out.dtype || x.NumElements() != *count) return nullptr;
    if (kind == K::kNot) return x.dtype == DType::kBool ? Not : nullptr;
    if (kind == K::kNegative) return ForType(x.dtype, [](auto t) -> SmallKernel { return Negative<decltype(t)>; });
    if (kind == K::kBitwiseNot)
      return ForType(x.dtype, [](auto t) -> SmallKernel {
        using T = decltype(t);
        if constexpr (std::is_integral_v<T>)
          return BitwiseNot<T>;
        else
          return nullptr;
      });
    return nullptr;
  }
  if (op.inputs.size() != 2) return nullptr;
  const mps::TensorType& x = g.type(op.inputs[0]);
  const mps::TensorType& y = g.type(op.inputs[1]);
  if (x.dtype != y.dtype || x.shape != y.shape || x.NumElements() != *count) return nullptr;  // RunBinary's errors
  if (IsComparison(kind)) {
    if (out.dtype != DType::kBool) return nullptr;
    if (x.dtype == DType::kBool) {  // bool is equal or not, never ordered (the generic kernel's error)
      if (kind == K::kEqual) return CompareBool<EqOp>;
      if (kind == K::kNotEqual) return CompareBool<NeOp>;
      return nullptr;
    }
    return ForType(x.dtype, [kind](auto t) { return CompareFor<decltype(t)>(kind); });
  }
  if (out.dtype != x.dtype) return nullptr;
  if (x.dtype == DType::kBool) {
    if (kind == K::kLogicalAnd) return Logical<LogicalAndOp>;
    if (kind == K::kLogicalOr) return Logical<LogicalOrOp>;
    if (kind == K::kLogicalXor) return Logical<LogicalXorOp>;
    return nullptr;
  }
  return ForType(x.dtype, [kind](auto t) { return BinaryFor<decltype(t)>(kind); });
}

}  // namespace jmp::exec::host
