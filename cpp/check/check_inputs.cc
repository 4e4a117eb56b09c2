// Inputs of the self-check's programs: each range starts with its edge values (NaN, ±inf, -0.0,
// subnormals, the extremes, ties of the rounding rules, integer min and max), then pseudo-random
// values from a fixed seed, so a run on a Mac and a run here feed the same bytes.
#include <cmath>
#include <cstring>
#include <limits>

#include "check/check.h"
#include "support/float16.h"

namespace jmp::check {

namespace {

struct Random {
  uint64_t state;
  explicit Random(uint32_t seed) : state(0x9E3779B97F4A7C15ull ^ seed) {}
  uint64_t Next() {  // splitmix64
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double Uniform(double lo, double hi) { return lo + (hi - lo) * static_cast<double>(Next() >> 11) * 0x1p-53; }
};

// Smallest subnormal, largest subnormal, smallest normal and largest finite value of a float type.
struct FloatLimits {
  double min_sub, max_sub, min_normal, max;
};
FloatLimits LimitsOf(DType t) {
  switch (t) {
    case DType::kF16: return {0x1p-24, 0x1p-14 - 0x1p-24, 0x1p-14, 65504.0};
    case DType::kBF16: return {0x1p-133, 0x1p-126 - 0x1p-133, 0x1p-126, 0x1.FEp127};
    case DType::kF64:
    case DType::kC128:
      return {std::numeric_limits<double>::denorm_min(), 0x1p-1022 - std::numeric_limits<double>::denorm_min(),
              0x1p-1022, std::numeric_limits<double>::max()};
    default: return {0x1p-149, 0x1p-126 - 0x1p-149, 0x1p-126, static_cast<double>(std::numeric_limits<float>::max())};
  }
}

std::vector<double> FloatEdges(DType t, Range range) {
  const double nan = std::nan(""), inf = HUGE_VAL;
  const FloatLimits l = LimitsOf(t);
  switch (range) {
    case Range::kEdge:
      return {nan,          inf,           -inf,  0.0,    -0.0,        l.min_sub, -l.min_sub, l.max_sub,
              l.min_normal, -l.min_normal, l.max, -l.max, 1.0,         -1.0,      0.5,        -0.5,
              1.5,          2.5,           -2.5,  3.5,    -0.49999997, 1e-3,      100.0,      -100.0};
    case Range::kFinite:
      return {0.0,  -0.0, l.min_sub, -l.min_sub, l.max_sub, l.min_normal, -l.min_normal, l.max, -l.max, 1.0,
              -1.0, 0.5,  -0.5,      1.5,        2.5,       -2.5,         3.5,           1e-3,  100.0,  -100.0};
    case Range::kModerate:
      return {nan, inf, -inf, 0.0, -0.0, l.min_sub, -l.min_sub, l.min_normal, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5};
    case Range::kPositive: return {nan, inf, 0.0, l.min_sub, l.min_normal, 0.5, 1.0, 2.0, 100.0};
    case Range::kSmallInt: return {0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 4.0, -4.0};
    case Range::kUnit: return {0.0, -0.0, 1.0, -1.0, 0.5, -0.5};
  }
  return {};
}

double RandomFloat(Random& r, Range range) {
  switch (range) {
    case Range::kEdge:
    case Range::kFinite: return r.Uniform(-1000, 1000) * std::pow(10.0, std::floor(r.Uniform(-4, 1)));
    case Range::kModerate: return r.Uniform(-8, 8);
    case Range::kPositive: return std::exp(r.Uniform(-5, 5));
    case Range::kSmallInt: return std::floor(r.Uniform(-4, 5));
    case Range::kUnit: return r.Uniform(-1, 1);
  }
  return 0;
}

// Integers as (signed value, unsigned value) so that both halves of uint64 are reachable.
void IntEdges(DType t, Range range, std::vector<uint64_t>& out) {
  const int bits = BitWidth(t);
  const bool is_signed = IsSignedInt(t);
  const uint64_t umax = bits == 64 ? ~0ull : (1ull << bits) - 1;
  const int64_t smin = is_signed ? (bits == 64 ? std::numeric_limits<int64_t>::min() : -(1ll << (bits - 1))) : 0;
  const int64_t smax = is_signed ? (bits == 64 ? std::numeric_limits<int64_t>::max() : (1ll << (bits - 1)) - 1)
                                 : static_cast<int64_t>(umax >> 1);
  auto s = [](int64_t v) { return static_cast<uint64_t>(v); };
  if (range == Range::kEdge || range == Range::kFinite) {
    out = {0, 1, 2, 7, 100, s(smax), s(smax - 1)};
    if (is_signed)
      for (int64_t v : {int64_t{-1}, int64_t{-2}, int64_t{-7}, smin, smin + 1}) out.push_back(s(v));
    else
      out.insert(out.end(), {umax, umax - 1, s(smax) + 1});
  } else if (range == Range::kSmallInt || range == Range::kModerate) {
    out = {0, 1, 2, 3, 4};
    if (is_signed)
      for (int64_t v : {-1, -2, -3, -4}) out.push_back(s(v));
  } else {
    out = {0, 1};
  }
}

uint64_t RandomInt(Random& r, DType t, Range range) {
  const int bits = BitWidth(t);
  const bool is_signed = IsSignedInt(t);
  switch (range) {
    case Range::kEdge:
    case Range::kFinite: return r.Next();
    case Range::kModerate: return static_cast<uint64_t>(static_cast<int64_t>(r.Uniform(is_signed ? -100 : 0, 100)));
    case Range::kPositive: return static_cast<uint64_t>(r.Uniform(1, 100));
    case Range::kSmallInt:
      return static_cast<uint64_t>(static_cast<int64_t>(std::floor(r.Uniform(is_signed ? -4 : 0, 5))));
    case Range::kUnit: return r.Next() & 1;
  }
  (void)bits;
  return 0;
}

void PutFloat(DType t, double v, uint8_t* p) {
  switch (t) {
    case DType::kF16: {
      uint16_t h = DoubleToHalf(v);
      std::memcpy(p, &h, 2);
      return;
    }
    case DType::kBF16: {
      uint16_t h = FloatToBFloat16(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      return;
    }
    case DType::kF64:
    case DType::kC128: std::memcpy(p, &v, 8); return;
    default: {
      float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      return;
    }
  }
}

void PutInt(DType t, uint64_t v, uint8_t* p) { std::memcpy(p, &v, ByteSize(t)); }  // little-endian

}  // namespace

int64_t CountOf(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

double Epsilon(DType t) {
  switch (t) {
    case DType::kF16: return 0x1p-10;
    case DType::kBF16: return 0x1p-7;
    case DType::kF32:
    case DType::kC64: return 0x1p-23;
    case DType::kF64:
    case DType::kC128: return 0x1p-52;
    default: return 0;
  }
}

std::vector<uint8_t> Fill(DType t, int64_t n, Range range, uint32_t seed) {
  Random r(seed);
  const size_t width = ByteSize(t);
  std::vector<uint8_t> out(static_cast<size_t>(n) * width);
  if (IsFloat(t) || IsComplex(t)) {
    const DType part = RealOf(t);
    const size_t pw = ByteSize(part);
    std::vector<double> edges = FloatEdges(part, range);
    const size_t parts = IsComplex(t) ? 2 : 1;
    for (int64_t i = 0; i < n; ++i)
      for (size_t k = 0; k < parts; ++k) {
        const size_t j = static_cast<size_t>(i) * parts + k;  // complex: edges pair up shifted by one
        double v = j < edges.size() ? edges[(j + k * 7) % edges.size()] : RandomFloat(r, range);
        PutFloat(part, v, out.data() + static_cast<size_t>(i) * width + k * pw);
      }
  } else if (t == DType::kBool) {
    for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = i < 2 ? static_cast<uint8_t>(i) : (r.Next() >> 7) & 1;
  } else {
    std::vector<uint64_t> edges;
    IntEdges(t, range, edges);
    for (int64_t i = 0; i < n; ++i) {
      uint64_t v = static_cast<size_t>(i) < edges.size() ? edges[static_cast<size_t>(i)] : RandomInt(r, t, range);
      PutInt(t, v, out.data() + static_cast<size_t>(i) * width);
    }
  }
  return out;
}

std::vector<uint8_t> Encode(DType t, const std::vector<double>& values) {
  const size_t width = ByteSize(t);
  std::vector<uint8_t> out(values.size() * width, 0);
  for (size_t i = 0; i < values.size(); ++i) {
    uint8_t* p = out.data() + i * width;
    if (IsFloat(t) || IsComplex(t))
      PutFloat(RealOf(t), values[i], p);
    else if (t == DType::kBool)
      *p = values[i] != 0;
    else if (t == DType::kU64 && values[i] >= 0x1p63)
      PutInt(t, static_cast<uint64_t>(values[i]), p);
    else
      PutInt(t, static_cast<uint64_t>(static_cast<int64_t>(values[i])), p);
  }
  return out;
}

}  // namespace jmp::check
