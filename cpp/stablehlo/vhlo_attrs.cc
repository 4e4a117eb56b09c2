// The VHLO dialect's attribute and type encodings (codes and layouts: StableHLO's VhloBytecode.cpp),
// decoded into our Attr/Type: element types become DTypes, integer arrays kInts, enums keep their
// StableHLO spelling, dense constants are expanded to one little-endian element each.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "stablehlo/bytecode_attrs.h"

namespace jmp::shlo {

namespace {

constexpr size_t kMaxConstantBytes = size_t{1} << 31;
constexpr size_t kMaxExpandedSplatBytes = size_t{64} << 10;  // larger splats keep one element (Attr::splat)

// VHLO attribute and type codes (StableHLO's VhloBytecode.cpp).
enum VhloAttrCode {
  kArrayV1 = 1,
  kBooleanV1 = 2,
  kComparisonDirectionV1 = 3,
  kComparisonTypeV1 = 4,
  kCustomCallApiVersionV1 = 5,
  kDictionaryV1 = 6,
  kFftTypeV1 = 7,
  kFloatV1 = 8,
  kIntegerV1 = 9,
  kOutputOperandAliasV1 = 10,
  kPrecisionV1 = 11,
  kRngAlgorithmV1 = 12,
  kRngDistributionV1 = 13,
  kStringV1 = 14,
  kTensorV1 = 15,
  kTransposeV1 = 16,
  kTypeV1 = 17,
  kTypeExtensionsV1 = 18,
  kResultAccuracyModeV1 = 19,
  kResultAccuracyV1 = 20,
};
// The scalar element types' codes are support/dtype.def's vhlo column.
enum VhloTypeCode {
  kComplexT = 1,
  kFunctionT = 8,
  kIndexT = 9,
  kRankedTensorT = 20,
  kRankedTensorWithEncodingT = 21,
  kTokenT = 22,
  kTupleT = 23,
};

const char* const kComparisonDirections[] = {"EQ", "NE", "GE", "GT", "LE", "LT"};
const char* const kComparisonTypes[] = {"NOTYPE", "FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"};
const char* const kFftTypes[] = {"FFT", "IFFT", "RFFT", "IRFFT"};
const char* const kPrecisions[] = {"DEFAULT", "HIGH", "HIGHEST"};
const char* const kRngAlgorithms[] = {"DEFAULT", "THREE_FRY", "PHILOX"};
const char* const kTransposes[] = {"TRANSPOSE_INVALID", "NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"};

Status ReadAPInt(ByteReader& r, int bits, uint64_t* out) {
  if (bits <= 8) {
    uint8_t b = 0;
    JMP_RETURN_IF_ERROR(r.Byte(&b));
    *out = b;
    return Status::Ok();
  }
  if (bits <= 64) {
    int64_t v;
    JMP_RETURN_IF_ERROR(r.SignedVarInt(&v));
    *out = static_cast<uint64_t>(v);
    return Status::Ok();
  }
  return r.Error("integers wider than 64 bits are not supported");
}

}  // namespace

Status ReadRankedTensor(AttrTypeTable& table, ByteReader& r, Type* out, int depth) {
  uint64_t rank;
  JMP_RETURN_IF_ERROR(r.Count(&rank));
  std::vector<int64_t> shape(rank);
  for (auto& d : shape) {
    JMP_RETURN_IF_ERROR(r.SignedVarInt(&d));
    if (d < 0) return Unimplemented("dynamic shapes are not supported (a tensor dimension is dynamic)");
  }
  JMP_ASSIGN_OR_RETURN(const Type* element, table.ReadTypeRef(r, depth));
  if (element->kind != Type::Kind::kTensor || !element->shape.empty()) {
    out->kind = Type::Kind::kOther;
    out->other = "tensor of " + element->ToString();
    return Status::Ok();
  }
  out->kind = Type::Kind::kTensor;
  out->dtype = element->dtype;
  out->shape = std::move(shape);
  if (out->NumElements() < 0) return r.Error("tensor size overflows");
  return Status::Ok();
}

Status DecodeVhloType(AttrTypeTable& table, ByteReader& r, Type* out, int depth) {
  uint64_t code;
  JMP_RETURN_IF_ERROR(r.VarInt(&code));
  // Scalar element types: the table's VHLO codes (support/dtype.def).
  for (DType d : kAllDTypes)
    if (VhloCode(d) >= 0 && static_cast<uint64_t>(VhloCode(d)) == code) return SetScalarType(d, out);
  switch (code) {
    case kIndexT: return SetScalarType(DType::kI64, out);
    case kComplexT: {
      JMP_ASSIGN_OR_RETURN(const Type* element, table.ReadTypeRef(r, depth));
      if (element->kind != Type::Kind::kTensor || !element->shape.empty())
        return r.Error("complex of a non-scalar type");
      return SetComplexType(*element, out);
    }
    case kRankedTensorWithEncodingT: {
      JMP_ASSIGN_OR_RETURN(const Attr* encoding, table.ReadAttrRef(r, depth));
      (void)encoding;
      [[fallthrough]];
    }
    case kRankedTensorT: return ReadRankedTensor(table, r, out, depth);
    case kTokenT:
      // No data: carried as an empty bool tensor, which is what JAX's runtime passes for a token.
      out->kind = Type::Kind::kToken;
      out->dtype = DType::kBool;
      out->shape = {0};
      return Status::Ok();
    case kTupleT: {
      uint64_t n;
      JMP_RETURN_IF_ERROR(r.Count(&n));
      out->kind = Type::Kind::kTuple;
      for (uint64_t i = 0; i < n; ++i) {
        JMP_ASSIGN_OR_RETURN(const Type* t, table.ReadTypeRef(r, depth));
        out->elements.push_back(*t);
      }
      return Status::Ok();
    }
    case kFunctionT: {
      // Kept as inputs then results; `shape` holds the input count.
      out->kind = Type::Kind::kOther;
      out->other = "function";
      for (int part = 0; part < 2; ++part) {
        uint64_t n;
        JMP_RETURN_IF_ERROR(r.Count(&n));
        if (part == 0) out->shape = {static_cast<int64_t>(n)};
        for (uint64_t i = 0; i < n; ++i) {
          JMP_ASSIGN_OR_RETURN(const Type* t, table.ReadTypeRef(r, depth));
          out->elements.push_back(*t);
        }
      }
      return Status::Ok();
    }
    default:
      out->kind = Type::Kind::kOther;
      out->other = "vhlo type #" + std::to_string(code);
      return Status::Ok();
  }
}

Status DecodeVhloAttr(AttrTypeTable& table, ByteReader& r, Attr* out, int depth) {
  uint64_t code;
  JMP_RETURN_IF_ERROR(r.VarInt(&code));
  auto enum_attr = [&](const char* const* names, size_t count) -> Status {
    uint64_t v;
    JMP_RETURN_IF_ERROR(r.VarInt(&v));
    out->kind = Attr::Kind::kEnum;
    out->i = static_cast<int64_t>(v);
    out->s = v < count ? names[v] : std::to_string(v);
    return Status::Ok();
  };
  switch (code) {
    case kArrayV1: {
      uint64_t n;
      JMP_RETURN_IF_ERROR(r.Count(&n));
      out->kind = Attr::Kind::kArray;
      bool all_ints = true;
      for (uint64_t i = 0; i < n; ++i) {
        JMP_ASSIGN_OR_RETURN(const Attr* a, table.ReadAttrRef(r, depth));
        out->array.push_back(*a);
        all_ints &= a->kind == Attr::Kind::kInt;
      }
      if (all_ints) {
        out->kind = Attr::Kind::kInts;
        for (const Attr& a : out->array) out->ints.push_back(a.i);
      }
      return Status::Ok();
    }
    case kBooleanV1: {
      uint64_t v;
      JMP_RETURN_IF_ERROR(r.VarInt(&v));
      out->kind = Attr::Kind::kBool;
      out->b = v != 0;
      return Status::Ok();
    }
    case kComparisonDirectionV1: return enum_attr(kComparisonDirections, 6);
    case kComparisonTypeV1: return enum_attr(kComparisonTypes, 5);
    case kCustomCallApiVersionV1: return enum_attr(nullptr, 0);
    case kFftTypeV1: return enum_attr(kFftTypes, 4);
    case kPrecisionV1: return enum_attr(kPrecisions, 3);
    case kRngAlgorithmV1: return enum_attr(kRngAlgorithms, 3);
    case kRngDistributionV1: return enum_attr(nullptr, 0);
    case kTransposeV1: return enum_attr(kTransposes, 4);
    case kResultAccuracyModeV1: return enum_attr(nullptr, 0);
    case kDictionaryV1: {
      uint64_t n;
      JMP_RETURN_IF_ERROR(r.Count(&n, 2));
      out->kind = Attr::Kind::kDict;
      for (uint64_t i = 0; i < n; ++i) {
        JMP_ASSIGN_OR_RETURN(const Attr* name, table.ReadAttrRef(r, depth));
        JMP_ASSIGN_OR_RETURN(const Attr* value, table.ReadAttrRef(r, depth));
        out->dict[name->s] = *value;
      }
      return Status::Ok();
    }
    case kFloatV1: {
      JMP_ASSIGN_OR_RETURN(const Type* t, table.ReadTypeRef(r, depth));
      if (t->kind != Type::Kind::kTensor || !IsFloat(t->dtype)) return r.Error("float attribute of a non-float type");
      uint64_t bits;
      JMP_RETURN_IF_ERROR(ReadAPInt(r, BitWidth(t->dtype), &bits));
      out->kind = Attr::Kind::kFloat;
      out->type = *t;
      if (t->dtype == DType::kF64) {
        std::memcpy(&out->f, &bits, 8);
      } else if (t->dtype == DType::kF32) {
        float f;
        uint32_t b32 = static_cast<uint32_t>(bits);
        std::memcpy(&f, &b32, 4);
        out->f = f;
      } else {
        uint32_t b = static_cast<uint32_t>(bits & 0xffff);
        uint32_t f32 = t->dtype == DType::kBF16 ? b << 16 : 0;
        if (t->dtype == DType::kF16) {  // widen IEEE half
          uint32_t sign = (b & 0x8000u) << 16, exp = (b >> 10) & 0x1f, mant = b & 0x3ff;
          if (exp == 0x1f)
            f32 = sign | 0x7f800000u | (mant << 13);
          else if (exp == 0)
            f32 = 0, out->f = (sign ? -1.0 : 1.0) * std::ldexp(static_cast<double>(mant), -24);
          else
            f32 = sign | ((exp + 112) << 23) | (mant << 13);
          if (exp == 0) return Status::Ok();
        }
        float f;
        std::memcpy(&f, &f32, 4);
        out->f = f;
      }
      return Status::Ok();
    }
    case kIntegerV1: {
      JMP_ASSIGN_OR_RETURN(const Type* t, table.ReadTypeRef(r, depth));
      if (t->kind != Type::Kind::kTensor ||
          !(IsInteger(t->dtype) || IsSubByteInt(t->dtype) || t->dtype == DType::kBool))
        return r.Error("integer attribute of a non-integer type");
      int bits = BitWidth(t->dtype);
      uint64_t v;
      JMP_RETURN_IF_ERROR(ReadAPInt(r, bits, &v));
      if (bits < 64) {
        v &= (uint64_t{1} << bits) - 1;
        if ((IsSignedInt(t->dtype) || IsSignedSubByte(t->dtype)) && (v >> (bits - 1)) & 1)
          v |= ~((uint64_t{1} << bits) - 1);
      }
      out->kind = Attr::Kind::kInt;
      out->type = *t;
      out->i = static_cast<int64_t>(v);
      return Status::Ok();
    }
    case kStringV1: {
      JMP_ASSIGN_OR_RETURN(std::string_view s, table.names().ReadStringRef(r));
      out->kind = Attr::Kind::kString;
      out->s = std::string(s);
      return Status::Ok();
    }
    case kTensorV1: {
      JMP_ASSIGN_OR_RETURN(const Type* t, table.ReadTypeRef(r, depth));
      if (t->kind != Type::Kind::kTensor) return r.Error("dense constant of a non-tensor type");
      uint64_t length;
      JMP_RETURN_IF_ERROR(r.VarInt(&length));
      Span blob;
      JMP_RETURN_IF_ERROR(r.Bytes(static_cast<size_t>(length), &blob));
      size_t count = static_cast<size_t>(t->NumElements());
      size_t width = ByteSize(t->dtype);
      if (count > kMaxConstantBytes / std::max<size_t>(width, 1)) return r.Error("constant too large");
      out->kind = Attr::Kind::kTensor;
      out->type = *t;
      std::vector<uint8_t> raw(blob.data, blob.data + blob.size);
      if (t->dtype == DType::kBool) {
        if (raw.size() == 1 && raw[0] == 0xff) {
          raw[0] = 1;
        } else if (raw.size() == (count + 7) / 8 && raw.size() != count) {
          std::vector<uint8_t> unpacked(count);
          for (size_t i = 0; i < count; ++i) unpacked[i] = (raw[i / 8] >> (i % 8)) & 1;
          raw = std::move(unpacked);
        }
      }
      if (raw.size() == width && count != 1 && count * width > kMaxExpandedSplatBytes) {
        out->data = std::move(raw);
        out->splat = true;
      } else if (raw.size() == width && count != 1) {  // a small splat
        out->data.resize(count * width);
        for (size_t i = 0; i < count; ++i) std::memcpy(out->data.data() + i * width, raw.data(), width);
      } else if (raw.size() == count * width) {
        out->data = std::move(raw);
      } else {
        return r.Error("dense constant has " + std::to_string(raw.size()) + " bytes for " + std::to_string(count) +
                       " elements of " + std::string(DTypeName(t->dtype)));
      }
      // MLIR stores a sub-byte element in a byte's low bits; ours is the value itself (ir.h).
      if (IsSubByteInt(t->dtype)) {
        const int unused = 8 - BitWidth(t->dtype);
        for (uint8_t& b : out->data)
          b = IsSignedSubByte(t->dtype)
                  ? static_cast<uint8_t>(static_cast<int8_t>(static_cast<uint8_t>(b << unused)) >> unused)
                  : static_cast<uint8_t>(b & (0xff >> unused));
      }
      return Status::Ok();
    }
    case kTypeV1: {
      JMP_ASSIGN_OR_RETURN(const Type* t, table.ReadTypeRef(r, depth));
      out->kind = Attr::Kind::kType;
      out->type = *t;
      return Status::Ok();
    }
    case kTypeExtensionsV1:
    case kOutputOperandAliasV1:
    case kResultAccuracyV1:
      out->kind = Attr::Kind::kUnit;  // not used by the lowering; the entry is length-delimited
      return Status::Ok();
    default:
      out->kind = Attr::Kind::kUnit;
      out->s = "vhlo attribute #" + std::to_string(code);
      return Status::Ok();
  }
}

}  // namespace jmp::shlo
