// MPSDataType and MPSShape as the stand-in's messages spell them, and the host's element types for them.
#include <sstream>

#include "exec/standin/standin_internal.h"
#include "support/dtype.h"

namespace jmp::exec::standin {

Status Violation(const std::string& what) { return InvalidArgument(kPrefix + what); }
Status Unsupported(const std::string& what) { return Unimplemented(std::string(kPrefix) + "unsupported: " + what); }

std::string DataTypeName(DataType t) {
  switch (t) {
    case DataType::kFloat32: return "float32";
    case DataType::kFloat16: return "float16";
    case DataType::kBFloat16: return "bfloat16";
    case DataType::kComplexFloat32: return "complex64";
    case DataType::kComplexFloat16: return "complex32";
    case DataType::kInt8: return "int8";
    case DataType::kInt16: return "int16";
    case DataType::kInt32: return "int32";
    case DataType::kInt64: return "int64";
    case DataType::kUInt8: return "uint8";
    case DataType::kUInt16: return "uint16";
    case DataType::kUInt32: return "uint32";
    case DataType::kUInt64: return "uint64";
    case DataType::kBool: return "bool";
    case DataType::kInvalid: break;
  }
  std::ostringstream s;
  s << "invalid (0x" << std::hex << static_cast<uint32_t>(t) << ")";
  return s.str();
}

std::string ShapeString(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string TypeString(const ShapedType& t) { return DataTypeName(t.dataType) + ShapeString(t.shape); }

int64_t ElementCount(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    n *= d;
  }
  return n;
}

size_t ElementBytes(DataType t) {
  auto d = HostDType(t);
  if (d.ok()) return ByteSize(*d);
  return t == DataType::kComplexFloat16 ? 4 : 0;
}

StatusOr<DType> HostDType(DataType t) {
  if (t == DataType::kInvalid) return Violation("MPSDataTypeInvalid is not a data type");
#define JMP_DTYPE(name, mlir, jax, bytes, bits, cls, pjrt, vhlo, metal, msl, host) \
  if (DataType::k##metal != DataType::kInvalid && t == DataType::k##metal) return DType::k##name;
#include "support/dtype.def"
  if (t == DataType::kComplexFloat16) return Unsupported("complex32 (MPSDataTypeComplexFloat16) has no host kernel");
  return Violation(DataTypeName(t) + " is not an MPSDataType");
}

DataType MetalDataType(DType t) {
  switch (t) {
#define JMP_DTYPE(name, mlir, jax, bytes, bits, cls, pjrt, vhlo, metal, msl, host) \
  case DType::k##name: return DataType::k##metal;
#include "support/dtype.def"
  }
  return DataType::kInvalid;
}

}  // namespace jmp::exec::standin
