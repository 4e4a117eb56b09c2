// The one place where PJRT's C values and ours meet: element types, error codes, layouts and named
// values. Everything else in cpp/pjrt speaks DType and Status.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "support/dtype.h"
#include "support/status.h"
#include "xla/pjrt/c/pjrt_c_api.h"

namespace jmp::pjrt {

PJRT_Error_Code ToErrorCode(StatusCode code);

PJRT_Buffer_Type ToBufferType(DType dtype);
// Takes the raw enum value: a caller may pass any integer, and loading it as the enum would be UB.
StatusOr<DType> DTypeFromBufferType(int raw);

// The only layout this plugin stores: dense, row-major (minor_to_major = rank-1, ..., 0).
std::vector<int64_t> RowMajorMinorToMajor(size_t rank);
// Whether a caller's layout describes that layout for an array of this rank.
bool IsDenseRowMajor(const PJRT_Buffer_MemoryLayout& layout, size_t rank);

PJRT_NamedValue Int64Value(const char* name, int64_t value);
PJRT_NamedValue Int64ListValue(const char* name, const int64_t* values, size_t count);

}  // namespace jmp::pjrt
