// Element types shared by the reader, the MPS op graph, the executors and PJRT.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace jmp {

// MPSGraph has neither kF64 nor kC128: programs with them run on the host executor.
enum class DType : uint8_t {
  kBool,
  kI8,
  kI16,
  kI32,
  kI64,
  kU8,
  kU16,
  kU32,
  kU64,
  kF16,
  kBF16,
  kF32,
  kF64,
  kC64,
  kC128,
  // Narrow types: StableHLO and PJRT carry them, MPSGraph does not. A buffer holds one byte per element
  // as ml_dtypes lays them out (int2/uint2/int4/uint4/float4: the bit pattern in the low bits, the
  // others zero; float8: the bit pattern); the lowering rewrites every op on them to ops on their storage type
  // (stablehlo/passes/narrow_types.cc), so no MPS op graph ever holds one.
  kI4,
  kU4,
  kI2,
  kU2,
  kF8E4M3FN,
  kF8E5M2,
  kF8E4M3FNUZ,
  kF8E5M2FNUZ,
  kF8E4M3B11FNUZ,
  kF8E4M3,
  kF8E3M4,
  kF8E8M0FNU,
  kF4E2M1FN,
};

// The case labels of every narrow float type, for the switches over DType that treat them all alike
// (most never see one: the lowering rewrites them to their storage first). Ends without a colon.
#define JMP_NARROW_FLOAT_CASES \
  case DType::kF8E4M3FN:       \
  case DType::kF8E5M2:         \
  case DType::kF8E4M3FNUZ:     \
  case DType::kF8E5M2FNUZ:     \
  case DType::kF8E4M3B11FNUZ:  \
  case DType::kF8E4M3:         \
  case DType::kF8E3M4:         \
  case DType::kF8E8M0FNU:      \
  case DType::kF4E2M1FN

inline constexpr DType kAllDTypes[] = {
    DType::kBool,   DType::kI8,       DType::kI16,       DType::kI32,        DType::kI64,        DType::kU8,
    DType::kU16,    DType::kU32,      DType::kU64,       DType::kF16,        DType::kBF16,       DType::kF32,
    DType::kF64,    DType::kC64,      DType::kC128,      DType::kI4,         DType::kU4,         DType::kI2,
    DType::kU2,     DType::kF8E4M3FN, DType::kF8E5M2,    DType::kF8E4M3FNUZ, DType::kF8E5M2FNUZ, DType::kF8E4M3B11FNUZ,
    DType::kF8E4M3, DType::kF8E3M4,   DType::kF8E8M0FNU, DType::kF4E2M1FN};

constexpr size_t ByteSize(DType t) {
  switch (t) {
    case DType::kBool:
    case DType::kI8:
    case DType::kU8:
    case DType::kI4:
    case DType::kU4:
    case DType::kI2:
    case DType::kU2:
    JMP_NARROW_FLOAT_CASES:
      return 1;
    case DType::kI16:
    case DType::kU16:
    case DType::kF16:
    case DType::kBF16: return 2;
    case DType::kI32:
    case DType::kU32:
    case DType::kF32: return 4;
    case DType::kI64:
    case DType::kU64:
    case DType::kF64:
    case DType::kC64: return 8;
    case DType::kC128: return 16;
  }
  return 0;
}

// Bits of the integer or float type (bool counts as 1).
constexpr int BitWidth(DType t) {
  return t == DType::kBool                                             ? 1
         : t == DType::kI2 || t == DType::kU2                          ? 2
         : t == DType::kI4 || t == DType::kU4 || t == DType::kF4E2M1FN ? 4
                                                                       : static_cast<int>(ByteSize(t) * 8);
}

// The narrow types (see DType) and the type each computes on inside the MPS op graph: int2/int4 as
// int8 (sign-extended), uint2/uint4 as uint8, float8/float4 as uint8 holding the bit pattern.
// IsSubByteInt: the integers narrower than a byte (int2, uint2, int4, uint4), which share every rewrite.
constexpr bool IsSubByteInt(DType t) {
  return t == DType::kI4 || t == DType::kU4 || t == DType::kI2 || t == DType::kU2;
}
constexpr bool IsSignedSubByte(DType t) { return t == DType::kI4 || t == DType::kI2; }
// float8 in every format, and float4_e2m1fn: the floats narrower than 16 bits.
constexpr bool IsNarrowFloat(DType t) { return t >= DType::kF8E4M3FN && t <= DType::kF4E2M1FN; }
constexpr bool IsNarrow(DType t) { return IsSubByteInt(t) || IsNarrowFloat(t); }
constexpr DType StorageOf(DType t) {
  return IsSignedSubByte(t) ? DType::kI8 : IsSubByteInt(t) || IsNarrowFloat(t) ? DType::kU8 : t;
}
// The range of a sub-byte integer type.
constexpr int SubByteMin(DType t) { return IsSignedSubByte(t) ? -(1 << (BitWidth(t) - 1)) : 0; }
constexpr int SubByteMax(DType t) { return IsSignedSubByte(t) ? (1 << (BitWidth(t) - 1)) - 1 : (1 << BitWidth(t)) - 1; }

constexpr bool IsFloat(DType t) {
  return t == DType::kF16 || t == DType::kBF16 || t == DType::kF32 || t == DType::kF64;
}
constexpr bool IsComplex(DType t) { return t == DType::kC64 || t == DType::kC128; }
constexpr bool IsSignedInt(DType t) {
  return t == DType::kI8 || t == DType::kI16 || t == DType::kI32 || t == DType::kI64;
}
constexpr bool IsUnsignedInt(DType t) {
  return t == DType::kU8 || t == DType::kU16 || t == DType::kU32 || t == DType::kU64;
}
constexpr bool IsInteger(DType t) { return IsSignedInt(t) || IsUnsignedInt(t); }

// MLIR spelling: "f32", "bf16", "i1", "ui32", "complex<f32>".
constexpr std::string_view DTypeName(DType t) {
  switch (t) {
    case DType::kBool: return "i1";
    case DType::kI8: return "i8";
    case DType::kI16: return "i16";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
    case DType::kU8: return "ui8";
    case DType::kU16: return "ui16";
    case DType::kU32: return "ui32";
    case DType::kU64: return "ui64";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kF32: return "f32";
    case DType::kF64: return "f64";
    case DType::kC64: return "complex<f32>";
    case DType::kC128: return "complex<f64>";
    case DType::kI4: return "i4";
    case DType::kU4: return "ui4";
    case DType::kI2: return "i2";
    case DType::kU2: return "ui2";
    case DType::kF8E4M3FN: return "f8E4M3FN";
    case DType::kF8E5M2: return "f8E5M2";
    case DType::kF8E4M3FNUZ: return "f8E4M3FNUZ";
    case DType::kF8E5M2FNUZ: return "f8E5M2FNUZ";
    case DType::kF8E4M3B11FNUZ: return "f8E4M3B11FNUZ";
    case DType::kF8E4M3: return "f8E4M3";
    case DType::kF8E3M4: return "f8E3M4";
    case DType::kF8E8M0FNU: return "f8E8M0FNU";
    case DType::kF4E2M1FN: return "f4E2M1FN";
  }
  return "?";
}

// A complex type's parts (complex64: float32, complex128: float64); any other type is itself.
constexpr DType RealOf(DType t) { return t == DType::kC64 ? DType::kF32 : t == DType::kC128 ? DType::kF64 : t; }
// The complex type whose parts are `t` (float64: complex128, anything else: complex64).
constexpr DType ComplexOf(DType t) { return t == DType::kF64 || t == DType::kC128 ? DType::kC128 : DType::kC64; }

// The integer type of the same width (used by bitcasts and bitwise decompositions).
constexpr DType UnsignedOfWidth(int bits) {
  return bits == 8 ? DType::kU8 : bits == 16 ? DType::kU16 : bits == 32 ? DType::kU32 : DType::kU64;
}
constexpr DType SignedOfWidth(int bits) {
  return bits == 8 ? DType::kI8 : bits == 16 ? DType::kI16 : bits == 32 ? DType::kI32 : DType::kI64;
}

}  // namespace jmp
