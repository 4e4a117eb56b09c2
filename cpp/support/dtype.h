// Element types shared by the reader, the MPS op graph, the executors and PJRT.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string_view>

namespace jmp {

// MPSGraph has neither kF64 nor kC128: programs with them run on the host executor.
// Narrow types (kI4 ... kF6E3M2FN): StableHLO and PJRT carry them, MPSGraph does not. A buffer holds one
// byte per element as ml_dtypes lays them out (int2/uint2/int4/uint4/float4/float6: the bit pattern in the low
// bits, the others zero; float8: the bit pattern); the lowering rewrites every op on them to ops on their
// storage type (stablehlo/passes/narrow_types.cc), so no MPS op graph ever holds one.
enum class DType : uint8_t {
#define JMP_DTYPE(name, mlir, jax, bytes, bits, cls, pjrt, vhlo, metal, msl, host) k##name,
#include "support/dtype.def"
};

inline constexpr DType kAllDTypes[] = {
#define JMP_DTYPE(name, mlir, jax, bytes, bits, cls, pjrt, vhlo, metal, msl, host) DType::k##name,
#include "support/dtype.def"
};

// What a type is, for the predicates below. Sub-byte integers and narrow floats are classes of their own:
// nothing computes on them (see DType), so IsInteger and IsFloat leave them out.
enum class DTypeClass : uint8_t {
  kBool,
  kSignedInt,
  kUnsignedInt,
  kFloat,
  kComplex,
  kSubByteSigned,
  kSubByteUnsigned,
  kNarrowFloat,
};

namespace dtype_table {

struct Row {
  std::string_view mlir, jax;
  size_t bytes;
  int bits;
  DTypeClass cls;
  int vhlo;
  std::string_view msl;
};

inline constexpr Row kRows[] = {
#define JMP_DTYPE(name, mlir, jax, bytes, bits, cls, pjrt, vhlo, metal, msl, host) \
  {mlir, jax, bytes, bits, DTypeClass::cls, vhlo, msl},
#include "support/dtype.def"
};
static_assert(std::size(kRows) == std::size(kAllDTypes));

constexpr const Row& Of(DType t) { return kRows[static_cast<size_t>(t)]; }

}  // namespace dtype_table

// The case labels of every narrow float type, for the switches over DType that treat them all alike
// (most never see one: the lowering rewrites them to their storage first). Ends without a colon; checked
// against the table below.
#define JMP_NARROW_FLOAT_CASES \
  case DType::kF8E4M3FN:       \
  case DType::kF8E5M2:         \
  case DType::kF8E4M3FNUZ:     \
  case DType::kF8E5M2FNUZ:     \
  case DType::kF8E4M3B11FNUZ:  \
  case DType::kF8E4M3:         \
  case DType::kF8E3M4:         \
  case DType::kF8E8M0FNU:      \
  case DType::kF4E2M1FN:       \
  case DType::kF6E2M3FN:       \
  case DType::kF6E3M2FN

constexpr DTypeClass ClassOf(DType t) { return dtype_table::Of(t).cls; }
constexpr size_t ByteSize(DType t) { return dtype_table::Of(t).bytes; }
// Bits of the integer or float type (bool counts as 1).
constexpr int BitWidth(DType t) { return dtype_table::Of(t).bits; }
// MLIR spelling: "f32", "bf16", "i1", "ui32", "complex<f32>".
constexpr std::string_view DTypeName(DType t) { return dtype_table::Of(t).mlir; }
// NumPy's (and ml_dtypes') spelling: "float32", "bfloat16", "bool", "uint32", "complex64".
constexpr std::string_view JaxDTypeName(DType t) { return dtype_table::Of(t).jax; }
// The Metal Shading Language type of a user kernel's buffer elements; empty where MSL has none.
constexpr std::string_view MslTypeName(DType t) { return dtype_table::Of(t).msl; }
// StableHLO's VHLO type code of a scalar of this type; -1 for complex types (VHLO's complex of a float).
constexpr int VhloCode(DType t) { return dtype_table::Of(t).vhlo; }

// The narrow types (see DType) and the type each computes on inside the MPS op graph: int2/int4 as
// int8 (sign-extended), uint2/uint4 as uint8, float8/float4 as uint8 holding the bit pattern.
// IsSubByteInt: the integers narrower than a byte (int2, uint2, int4, uint4), which share every rewrite.
constexpr bool IsSubByteInt(DType t) {
  return ClassOf(t) == DTypeClass::kSubByteSigned || ClassOf(t) == DTypeClass::kSubByteUnsigned;
}
constexpr bool IsSignedSubByte(DType t) { return ClassOf(t) == DTypeClass::kSubByteSigned; }
// float8 in every format, and float4_e2m1fn: the floats narrower than 16 bits.
constexpr bool IsNarrowFloat(DType t) { return ClassOf(t) == DTypeClass::kNarrowFloat; }
constexpr bool IsNarrow(DType t) { return IsSubByteInt(t) || IsNarrowFloat(t); }
constexpr DType StorageOf(DType t) {
  return IsSignedSubByte(t) ? DType::kI8 : IsSubByteInt(t) || IsNarrowFloat(t) ? DType::kU8 : t;
}
// The range of a sub-byte integer type.
constexpr int SubByteMin(DType t) { return IsSignedSubByte(t) ? -(1 << (BitWidth(t) - 1)) : 0; }
constexpr int SubByteMax(DType t) { return IsSignedSubByte(t) ? (1 << (BitWidth(t) - 1)) - 1 : (1 << BitWidth(t)) - 1; }

constexpr bool IsFloat(DType t) { return ClassOf(t) == DTypeClass::kFloat; }
constexpr bool IsComplex(DType t) { return ClassOf(t) == DTypeClass::kComplex; }
constexpr bool IsSignedInt(DType t) { return ClassOf(t) == DTypeClass::kSignedInt; }
constexpr bool IsUnsignedInt(DType t) { return ClassOf(t) == DTypeClass::kUnsignedInt; }
constexpr bool IsInteger(DType t) { return IsSignedInt(t) || IsUnsignedInt(t); }

namespace dtype_table {
constexpr bool InNarrowFloatCases(DType t) {
  switch (t) {
  JMP_NARROW_FLOAT_CASES:
    return true;
    default: return false;
  }
}
constexpr bool NarrowFloatCasesComplete() {
  for (DType d : kAllDTypes)
    if (InNarrowFloatCases(d) != IsNarrowFloat(d)) return false;
  return true;
}
static_assert(NarrowFloatCasesComplete(), "JMP_NARROW_FLOAT_CASES must list exactly the kNarrowFloat rows");
}  // namespace dtype_table

// The first type of class `cls` and `bits` bits, or `otherwise`.
constexpr DType FindDType(DTypeClass cls, int bits, DType otherwise) {
  for (DType d : kAllDTypes)
    if (ClassOf(d) == cls && BitWidth(d) == bits) return d;
  return otherwise;
}

// A complex type's parts (complex64: float32, complex128: float64); any other type is itself.
constexpr DType RealOf(DType t) { return IsComplex(t) ? FindDType(DTypeClass::kFloat, BitWidth(t) / 2, t) : t; }
// The complex type whose parts are `t` (float64: complex128, anything else: complex64).
constexpr DType ComplexOf(DType t) {
  return IsFloat(RealOf(t)) ? FindDType(DTypeClass::kComplex, 2 * BitWidth(RealOf(t)), DType::kC64) : DType::kC64;
}

// The integer type of the same width (used by bitcasts and bitwise decompositions).
constexpr DType UnsignedOfWidth(int bits) { return FindDType(DTypeClass::kUnsignedInt, bits, DType::kU64); }
constexpr DType SignedOfWidth(int bits) { return FindDType(DTypeClass::kSignedInt, bits, DType::kI64); }

}  // namespace jmp
