// Select, Clamp and Cast: the ternary elementwise ops and the conversions.
#include <cmath>
#include <cstring>
#include <limits>

#include "exec/host/host_fastmath.h"
#include "exec/host/host_kernels.h"
#include "exec/host/host_parallel.h"
#include "exec/host/host_types.h"

namespace jmp::exec::host {

namespace {

// Float -> integer: truncate toward zero, saturate, NaN -> 0 (op_kinds.def: Cast). float64 -> float16
// rounds once (DoubleToHalf); anything else -> float16/bfloat16 goes through float, as XLA's conversions
// do (float64 -> bfloat16 halfway cases round twice).
template <typename To, typename From>
To ConvertScalar(From v) {
  if constexpr (kIsBool<To>) {
    return To{static_cast<uint8_t>(Num<From>::Load(v) != typename Num<From>::C(0))};
  } else if constexpr (kIsComplex<To>) {
    if constexpr (kIsComplex<From>)
      return To(v);
    else
      return To(static_cast<typename To::value_type>(Num<From>::Load(v)), 0);
  } else if constexpr (kIsComplex<From>) {
    return Num<To>::Store(static_cast<typename Num<To>::C>(v.real()));
  } else if constexpr (kIsInt<To> && (kIsFloat<From>)) {
    double d = static_cast<double>(Num<From>::Load(v));
    if (std::isnan(d)) return To(0);
    if (d <= static_cast<double>(std::numeric_limits<To>::lowest())) return std::numeric_limits<To>::lowest();
    if (d >= static_cast<double>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return static_cast<To>(d);
  } else if constexpr (kIsBool<From>) {
    return Num<To>::Store(static_cast<typename Num<To>::C>(v.v ? 1 : 0));
  } else if constexpr (kIsInt<To> && kIsInt<From>) {
    return static_cast<To>(v);  // wraps: keeps the low bits
  } else if constexpr (std::is_same_v<To, f16> && std::is_same_v<From, double>) {
    return f16{DoubleToHalf(v)};
  } else {
    return Num<To>::Store(static_cast<typename Num<To>::C>(Num<From>::Load(v)));
  }
}

}  // namespace

Status RunSelect(const OpArgs& a) {
  size_t width = ByteSize(a.OutType().dtype);
  int64_t n = a.Count();
  const uint8_t* p = a.in[0];
  const uint8_t* x = a.in[1];
  const uint8_t* y = a.in[2];
  bool scalar_pred = a.InType(0).NumElements() == 1 && a.OutType().NumElements() != 1;
  if (!scalar_pred && VectorSelect(a)) return Status::Ok();
  auto run = [&](auto w) {
    using W = decltype(w);
    const W* xs = reinterpret_cast<const W*>(x);
    const W* ys = reinterpret_cast<const W*>(y);
    W* out = reinterpret_cast<W*>(a.out[0]);
    if (scalar_pred) {
      std::memcpy(out, p[0] ? xs : ys, static_cast<size_t>(n) * sizeof(W));
      return;
    }
    // A mask instead of a branch: masks from data (relu, pooling) defeat branch prediction.
    ParallelFor(n, GrainFor(1), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        W m = fastmath::SelectMask<W>(p[i]);
        out[i] = static_cast<W>((xs[i] & m) | (ys[i] & static_cast<W>(~m)));
      }
    });
  };
  switch (width) {
    case 1: run(uint8_t{}); break;
    case 2: run(uint16_t{}); break;
    case 4: run(uint32_t{}); break;
    case 8: run(uint64_t{}); break;
    default:
      for (int64_t i = 0; i < n; ++i)
        std::memcpy(a.out[0] + i * width, (p[scalar_pred ? 0 : i] ? x : y) + i * width, width);
  }
  return Status::Ok();
}

Status RunClamp(const OpArgs& a) {
  return Dispatch(a.OutType().dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (kIsComplex<T> || kIsBool<T>) {
      return a.Unsupported("is not defined for this type");
    } else {
      using N = Num<T>;
      const T* x = reinterpret_cast<const T*>(a.in[0]);
      const T* lo = reinterpret_cast<const T*>(a.in[1]);
      const T* hi = reinterpret_cast<const T*>(a.in[2]);
      T* y = reinterpret_cast<T*>(a.out[0]);
      int64_t n = a.Count();
      for (int64_t i = 0; i < n; ++i) {
        auto v = N::Load(x[i]);
        auto l = N::Load(lo[i]);
        auto h = N::Load(hi[i]);
        v = v < l ? l : v;
        y[i] = N::Store(v > h ? h : v);
      }
      return Status::Ok();
    }
  });
}

Status RunCast(const OpArgs& a) {
  int64_t n = a.Count();
  return Dispatch(a.InType(0).dtype, [&](auto from_tag) -> Status {
    using From = typename decltype(from_tag)::type;
    return Dispatch(a.OutType().dtype, [&](auto to_tag) -> Status {
      using To = typename decltype(to_tag)::type;
      const From* x = reinterpret_cast<const From*>(a.in[0]);
      To* y = reinterpret_cast<To*>(a.out[0]);
      ParallelFor(n, GrainFor(2), [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) y[i] = ConvertScalar<To, From>(x[i]);
      });
      return Status::Ok();
    });
  });
}

}  // namespace jmp::exec::host
