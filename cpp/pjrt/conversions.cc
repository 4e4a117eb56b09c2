#include "pjrt/conversions.h"

#include <cstring>
#include <string>

namespace jmp::pjrt {

PJRT_Error_Code ToErrorCode(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return PJRT_Error_Code_OK;
    case StatusCode::kInvalidArgument: return PJRT_Error_Code_INVALID_ARGUMENT;
    case StatusCode::kUnimplemented: return PJRT_Error_Code_UNIMPLEMENTED;
    case StatusCode::kFailedPrecondition: return PJRT_Error_Code_FAILED_PRECONDITION;
    case StatusCode::kOutOfRange: return PJRT_Error_Code_OUT_OF_RANGE;
    case StatusCode::kNotFound: return PJRT_Error_Code_NOT_FOUND;
    case StatusCode::kResourceExhausted: return PJRT_Error_Code_RESOURCE_EXHAUSTED;
    case StatusCode::kInternal: return PJRT_Error_Code_INTERNAL;
  }
  return PJRT_Error_Code_UNKNOWN;
}

// The dtype table: a switch, so that a new DType without a PJRT spelling fails to compile.
PJRT_Buffer_Type ToBufferType(DType dtype) {
  switch (dtype) {
    case DType::kBool: return PJRT_Buffer_Type_PRED;
    case DType::kI8: return PJRT_Buffer_Type_S8;
    case DType::kI16: return PJRT_Buffer_Type_S16;
    case DType::kI32: return PJRT_Buffer_Type_S32;
    case DType::kI64: return PJRT_Buffer_Type_S64;
    case DType::kU8: return PJRT_Buffer_Type_U8;
    case DType::kU16: return PJRT_Buffer_Type_U16;
    case DType::kU32: return PJRT_Buffer_Type_U32;
    case DType::kU64: return PJRT_Buffer_Type_U64;
    case DType::kF16: return PJRT_Buffer_Type_F16;
    case DType::kBF16: return PJRT_Buffer_Type_BF16;
    case DType::kF32: return PJRT_Buffer_Type_F32;
    case DType::kF64: return PJRT_Buffer_Type_F64;
    case DType::kC64: return PJRT_Buffer_Type_C64;
    case DType::kC128: return PJRT_Buffer_Type_C128;
    case DType::kI4: return PJRT_Buffer_Type_S4;
    case DType::kU4: return PJRT_Buffer_Type_U4;
    case DType::kI2: return PJRT_Buffer_Type_S2;
    case DType::kU2: return PJRT_Buffer_Type_U2;
    case DType::kF8E4M3FN: return PJRT_Buffer_Type_F8E4M3FN;
    case DType::kF8E5M2: return PJRT_Buffer_Type_F8E5M2;
    case DType::kF8E4M3FNUZ: return PJRT_Buffer_Type_F8E4M3FNUZ;
    case DType::kF8E5M2FNUZ: return PJRT_Buffer_Type_F8E5M2FNUZ;
    case DType::kF8E4M3B11FNUZ: return PJRT_Buffer_Type_F8E4M3B11FNUZ;
    case DType::kF8E4M3: return PJRT_Buffer_Type_F8E4M3;
    case DType::kF8E3M4: return PJRT_Buffer_Type_F8E3M4;
    case DType::kF8E8M0FNU: return PJRT_Buffer_Type_F8E8M0FNU;
    case DType::kF4E2M1FN: return PJRT_Buffer_Type_F4E2M1FN;
  }
  return PJRT_Buffer_Type_INVALID;
}

// The same table read backwards.
StatusOr<DType> DTypeFromBufferType(int raw) {
  for (DType dtype : kAllDTypes)
    if (static_cast<int>(ToBufferType(dtype)) == raw) return dtype;
  return Unimplemented("buffer element type " + std::to_string(raw) + " is not supported by the metal plugin");
}

std::vector<int64_t> RowMajorMinorToMajor(size_t rank) {
  std::vector<int64_t> minor_to_major(rank);
  for (size_t i = 0; i < rank; ++i) minor_to_major[i] = static_cast<int64_t>(rank - 1 - i);
  return minor_to_major;
}

bool IsDenseRowMajor(const PJRT_Buffer_MemoryLayout& layout, size_t rank) {
  if (layout.type != PJRT_Buffer_MemoryLayout_Type_Tiled || layout.tiled.num_tiles != 0 ||
      layout.tiled.minor_to_major_size != rank)
    return false;
  for (size_t i = 0; i < rank; ++i)
    if (layout.tiled.minor_to_major[i] != static_cast<int64_t>(rank - 1 - i)) return false;
  return true;
}

namespace {

PJRT_NamedValue NamedValue(const char* name, PJRT_NamedValue_Type type, size_t value_size) {
  PJRT_NamedValue v;
  std::memset(&v, 0, sizeof(v));
  v.struct_size = PJRT_NamedValue_STRUCT_SIZE;
  v.name = name;
  v.name_size = std::strlen(name);
  v.type = type;
  v.value_size = value_size;
  return v;
}

}  // namespace

PJRT_NamedValue Int64Value(const char* name, int64_t value) {
  PJRT_NamedValue v = NamedValue(name, PJRT_NamedValue_kInt64, 1);
  v.int64_value = value;
  return v;
}

PJRT_NamedValue Int64ListValue(const char* name, const int64_t* values, size_t count) {
  PJRT_NamedValue v = NamedValue(name, PJRT_NamedValue_kInt64List, count);
  v.int64_array_value = values;
  return v;
}

}  // namespace jmp::pjrt
