// The self-check's elementwise cases: unary, binary and ternary rows on edge values, rank-0, empty
// and large (past 2^16 elements) shapes.
#include <cstdint>
#include <cstring>
#include <set>

#include "check/check_builder.h"
#include "check/check_cases.h"

namespace jmp::check {

namespace {

using K = mps::OpKind;

bool IsUnaryRow(K kind) {
  static const std::set<K> rows = {
#define JMP_MPS_UNARY(name, macos, selector, domain) K::k##name,
#include "mps/op_kinds.def"
  };
  return rows.count(kind) > 0;
}

bool IsBinaryRow(K kind) {
  static const std::set<K> rows = {
#define JMP_MPS_BINARY(name, macos, primary, secondary, domain) K::k##name,
#include "mps/op_kinds.def"
  };
  return rows.count(kind) > 0;
}

bool Transcendental(K k) {
  return k == K::kExponent || k == K::kExponentBase2 || k == K::kLogarithm || k == K::kLogarithm2 || k == K::kSin ||
         k == K::kCos || k == K::kTan || k == K::kTanh || k == K::kAsin || k == K::kAcos || k == K::kAtan ||
         k == K::kSinh || k == K::kCosh || k == K::kAsinh || k == K::kAcosh || k == K::kAtanh || k == K::kErf ||
         k == K::kSigmoid || k == K::kAtan2 || k == K::kPower;
}

DType ResultType(K k, DType d) {
  if (k == K::kIsFinite || k == K::kIsNaN || k == K::kIsInfinite || k == K::kEqual || k == K::kNotEqual ||
      k == K::kLessThan || k == K::kLessThanOrEqualTo || k == K::kGreaterThan || k == K::kGreaterThanOrEqualTo)
    return DType::kBool;
  if (k == K::kRealPart || k == K::kImaginaryPart) return RealOf(d);
  if (k == K::kComplexFromParts) return ComplexOf(d);
  return d;
}

Range InputRange(K k, DType d) {
  if (IsComplex(d)) return Range::kUnit;  // complex arithmetic's non-finite cases are the algorithms' own
  if (k == K::kSin || k == K::kCos || k == K::kTan) return Range::kModerate;  // no argument reduction of 1e38
  return Range::kEdge;
}

// Copies element i of `from` to element j of `to`.
void CopyElement(DType d, const std::vector<uint8_t>& from, size_t i, std::vector<uint8_t>& to, size_t j) {
  const size_t w = ByteSize(d);
  std::memcpy(to.data() + j * w, from.data() + i * w, w);
}

int64_t GetInt(DType d, const std::vector<uint8_t>& b, size_t i) {
  uint64_t u = 0;
  std::memcpy(&u, b.data() + i * ByteSize(d), ByteSize(d));
  const int bits = BitWidth(d);
  if (IsSignedInt(d) && bits < 64 && ((u >> (bits - 1)) & 1)) u |= ~0ull << bits;
  return static_cast<int64_t>(u);
}
void SetInt(DType d, std::vector<uint8_t>& b, size_t i, int64_t v) {
  std::memcpy(b.data() + i * ByteSize(d), &v, ByteSize(d));
}

// The right operand made valid where the row says the lowering guards: no integer x/0 or MIN/-1,
// shift amounts within [0, bits).
void Guard(K k, DType d, const std::vector<uint8_t>& x, std::vector<uint8_t>& y) {
  if (!IsInteger(d)) return;
  const size_t n = y.size() / ByteSize(d);
  const int bits = BitWidth(d);
  for (size_t i = 0; i < n; ++i) {
    const int64_t a = GetInt(d, x, i), b = GetInt(d, y, i);
    if (k == K::kDivide || k == K::kModulo) {
      const bool min_over_minus_one = IsSignedInt(d) && b == -1 && a == (bits == 64 ? INT64_MIN : -(1ll << (bits - 1)));
      if (b == 0 || min_over_minus_one) SetInt(d, y, i, 1);
    } else if (k == K::kBitwiseLeftShift || k == K::kBitwiseRightShift) {
      SetInt(d, y, i, static_cast<int64_t>(static_cast<uint64_t>(b) % static_cast<uint64_t>(bits)));
    }
  }
}

}  // namespace

Tolerance ElementwiseTolerance(K k, DType d) {
  if (!IsFloat(d) && !IsComplex(d)) return Exact();
  const bool f32 = RealOf(d) == DType::kF32;
  if (IsComplex(d) && (k == K::kMultiply || k == K::kDivide || Transcendental(k) || k == K::kSquareRoot))
    return Ulps(8, 1);
  if (k == K::kPower) return Ulps(8, 1);
  if (Transcendental(k)) return Ulps(f32 ? 4 : 2, 1);
  if (k == K::kDivide || k == K::kSquareRoot || k == K::kReciprocal) return Ulps(f32 ? 2 : 1);
  if (k == K::kReverseSquareRoot) return Ulps(2);
  // Rounding the product first or not (the row allows both) moves the sum by at most half an ulp of
  // the product and one ulp of the sum: 2 ulps of max(|sum|, 64), 64 bounding |a * b| over [-8, 8].
  if (k == K::kMultiplyAdd) return Ulps(2, 64);
  return Exact();  // exactly rounded, or no rounding at all (data movement, comparisons, Floor, Sign...)
}

bool BuildElementwise(K k, DType d, bool quick, Case& c) {
  const int arity = IsUnaryRow(k)                                                 ? 1
                    : IsBinaryRow(k)                                              ? 2
                    : (k == K::kSelect || k == K::kClamp || k == K::kMultiplyAdd) ? 3
                                                                                  : 0;
  if (!arity) return false;
  const Range range = k == K::kMultiplyAdd ? Range::kModerate : InputRange(k, d);
  const DType out = ResultType(k, d);
  const Tolerance tol = ElementwiseTolerance(k, d);
  uint32_t seed = static_cast<uint32_t>(k) * 131 + static_cast<uint32_t>(d);
  // Operands of one shape: for binary rows every pair of edge values, then random ones.
  auto operands = [&](int64_t n, bool edges) {
    std::vector<std::vector<uint8_t>> ops;
    if (arity == 2 && edges) {
      std::vector<uint8_t> e = Fill(d, 24, range, seed);
      const size_t m = e.size() / ByteSize(d), pairs = m * m;
      std::vector<uint8_t> tail_x = Fill(d, 24 + 40, range, seed + 1), tail_y = Fill(d, 24 + 40, range, seed + 2);
      std::vector<uint8_t> x((pairs + 40) * ByteSize(d)), y(x.size());
      for (size_t i = 0; i < pairs; ++i) {
        CopyElement(d, e, i / m, x, i);
        CopyElement(d, e, i % m, y, i);
      }
      for (size_t i = 0; i < 40; ++i) {
        CopyElement(d, tail_x, 24 + i, x, pairs + i);
        CopyElement(d, tail_y, 24 + i, y, pairs + i);
      }
      Guard(k, d, x, y);
      return std::vector<std::vector<uint8_t>>{x, y};
    }
    for (int i = 0; i < arity; ++i) {
      std::vector<uint8_t> v = Fill(d, n + (edges ? 0 : 24), edges ? range : Range::kModerate, seed + 7 * i);
      if (!edges) v.erase(v.begin(), v.begin() + 24 * static_cast<int64_t>(ByteSize(d)));  // random part only
      ops.push_back(std::move(v));
    }
    if (arity == 2) Guard(k, d, ops[0], ops[1]);
    return ops;
  };
  auto program = [&](const std::string& what, std::vector<int64_t> shape, bool edges) {
    const int64_t n = CountOf(shape);
    ProgramBuilder b(what);
    std::vector<std::vector<uint8_t>> data = operands(n, edges);
    if (arity == 2 && edges) shape = {static_cast<int64_t>(data[0].size() / ByteSize(d))};
    std::vector<int> ins;
    for (int i = 0; i < arity; ++i) {
      DType t = d;
      std::vector<uint8_t> bytes = data[static_cast<size_t>(i)];
      if (k == K::kSelect && i == 0) {
        t = DType::kBool;
        bytes = Fill(DType::kBool, CountOf(shape), Range::kEdge, seed + 99);
      }
      if (k == K::kClamp && i > 0) {  // bounds with min <= max: small integers, low then high
        std::vector<double> lo(static_cast<size_t>(CountOf(shape))), hi(lo.size());
        for (size_t j = 0; j < lo.size(); ++j) {
          lo[j] = static_cast<double>(j % 4) - (IsUnsignedInt(d) ? 0 : 2) + (IsFloat(d) ? 0.5 : 0);
          hi[j] = lo[j] + static_cast<double>(j % 3);
        }
        bytes = Encode(d, i == 1 ? lo : hi);
      }
      ins.push_back(b.In(t, shape, bytes));
    }
    b.Returning(k, ins, {out, shape});
    c.programs.push_back(b.Done({tol}));
  };
  program("edge values", {24 + 40}, true);
  program("rank 0", {}, false);
  program("empty [0]", {0}, false);
  program("empty [2,0]", {2, 0}, false);
  program("[3,5]", {3, 5}, false);
  if (!quick) program("[70000], past 2^16", {70000}, false);
  return true;
}

}  // namespace jmp::check
