// Comparing the Metal side's bytes with the host executor's, element by element.
#include <cmath>
#include <cstring>
#include <sstream>

#include "check/check_builder.h"
#include "support/float16.h"

namespace jmp::check {

namespace {

double ReadFloat(DType part, const uint8_t* p) {
  switch (part) {
    case DType::kF16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return HalfToFloat(h);
    }
    case DType::kBF16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return BFloat16ToFloat(h);
    }
    case DType::kF64: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    default: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
  }
}

double ReadInt(DType t, const uint8_t* p) {
  uint64_t u = 0;
  std::memcpy(&u, p, ByteSize(t));
  if (IsSignedInt(t)) {
    const int bits = BitWidth(t);
    if (bits < 64 && (u >> (bits - 1)) & 1) u |= ~0ull << bits;  // sign-extend
    return static_cast<double>(static_cast<int64_t>(u));
  }
  return static_cast<double>(u);
}

double MinSubnormal(DType part) {
  return part == DType::kF16 ? 0x1p-24 : part == DType::kBF16 ? 0x1p-133 : part == DType::kF64 ? 0x1p-1074 : 0x1p-149;
}

// One unit in the last place at x's magnitude.
double Ulp(DType part, double x) {
  x = std::fabs(x);
  if (x == 0 || !std::isfinite(x)) return MinSubnormal(part);
  int e;
  std::frexp(x, &e);  // x in [2^(e-1), 2^e)
  return std::max(std::ldexp(Epsilon(part), e - 1), MinSubnormal(part));
}

// Error of one float element in the tolerance's units; inf when NaN or infinity disagree.
double FloatError(DType part, double h, double m, const Tolerance& tol) {
  if (std::isnan(h) || std::isnan(m)) return std::isnan(h) && std::isnan(m) ? 0 : HUGE_VAL;
  if (std::isinf(h) || std::isinf(m)) return h == m ? 0 : HUGE_VAL;
  const double diff = std::fabs(h - m);
  if (diff == 0) return std::signbit(h) == std::signbit(m) || tol.kind != Tolerance::kExact ? 0 : 1;
  if (tol.kind == Tolerance::kScaled) return diff / tol.scale;
  return diff / Ulp(part, std::max(std::fabs(h), tol.floor));
}

}  // namespace

std::string Tolerance::Describe() const {
  std::ostringstream s;
  switch (kind) {
    case kExact: return "exact";
    case kUlp:
      s << bound << " ulp";
      if (floor > 0) s << " (of max(|x|, " << floor << "))";
      return s.str();
    case kScaled: s << bound << " x " << scale << " (eps*n*|operands|)"; return s.str();
  }
  return "?";
}

bool Agree(DType t, const std::vector<uint8_t>& host, const std::vector<uint8_t>& metal, const Tolerance& tol,
           double& error) {
  error = 0;
  if (host.size() != metal.size()) {
    error = HUGE_VAL;
    return false;
  }
  const size_t width = ByteSize(t), n = width ? host.size() / width : 0;
  bool same_bits = true, integer_differs = false;  // integers and bools are always compared exactly
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* h = host.data() + i * width;
    const uint8_t* m = metal.data() + i * width;
    if (std::memcmp(h, m, width) == 0) continue;
    double e = 0;
    if (IsFloat(t) || IsComplex(t)) {
      const DType part = RealOf(t);
      const size_t pw = ByteSize(part);
      for (size_t k = 0; k < width / pw; ++k) {
        const double hv = ReadFloat(part, h + k * pw), mv = ReadFloat(part, m + k * pw);
        const bool nan_pair = std::isnan(hv) && std::isnan(mv);
        if (!(nan_pair && tol.nan_any) && std::memcmp(h + k * pw, m + k * pw, pw) != 0) same_bits = false;
        e = std::max(e, FloatError(part, hv, mv, tol));
      }
    } else {
      same_bits = false;
      integer_differs = true;
      e = t == DType::kBool ? 1 : std::fabs(ReadInt(t, h) - ReadInt(t, m));
      if (tol.kind == Tolerance::kScaled) e /= tol.scale;
    }
    error = std::max(error, e);
  }
  if (tol.kind == Tolerance::kExact) return same_bits;
  return !integer_differs && error <= tol.bound;
}

}  // namespace jmp::check

namespace jmp::check {

std::vector<double> Decode(DType t, const std::vector<uint8_t>& bytes) {
  const size_t width = ByteSize(t), n = width ? bytes.size() / width : 0;
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* p = bytes.data() + i * width;
    out[i] = IsFloat(t) || IsComplex(t) ? ReadFloat(RealOf(t), p) : t == DType::kBool ? *p : ReadInt(t, p);
  }
  return out;
}

}  // namespace jmp::check
