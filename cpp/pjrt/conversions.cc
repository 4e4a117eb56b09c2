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
    case StatusCode::kUnavailable: return PJRT_Error_Code_UNAVAILABLE;
  }
  return PJRT_Error_Code_UNKNOWN;
}

// Element types numbered after the pinned pjrt_c_api.h was cut (S1 = 30 and U1 = 31 come between): the
// values later headers give them. Declared here, an inner scope, so a header that has them as
// enumerators does not clash. The pinned enum's range ends at 31, so its bytes are written rather than
// cast (clang refuses a constant cast past an enum's range): PJRT_Buffer_Type is an int in the C ABI.
PJRT_Buffer_Type NewerBufferType(int value) {
  static_assert(sizeof(PJRT_Buffer_Type) == sizeof(int), "PJRT_Buffer_Type is an int in the C ABI");
  PJRT_Buffer_Type type;
  std::memcpy(&type, &value, sizeof(type));
  return type;
}
const PJRT_Buffer_Type PJRT_Buffer_Type_F6E2M3FN = NewerBufferType(32);
const PJRT_Buffer_Type PJRT_Buffer_Type_F6E3M2FN = NewerBufferType(33);

// The dtype table's PJRT column (support/dtype.def).
PJRT_Buffer_Type ToBufferType(DType dtype) {
  switch (dtype) {
#define JMP_DTYPE(name, mlir, jax, bytes, bits, cls, pjrt, vhlo, metal, msl, host) \
  case DType::k##name: return PJRT_Buffer_Type_##pjrt;
#include "support/dtype.def"
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
