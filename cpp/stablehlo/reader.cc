// Reads a VHLO portable artifact (MLIR bytecode holding the builtin and vhlo dialects) into our
// StableHLO IR. Attributes and types are decoded lazily from the attr/type section, so attributes we
// never look at (sharding, frontend attributes) cost nothing and can't fail the read.
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <optional>

#include "stablehlo/byte_reader.h"
#include "stablehlo/ir.h"
#include "stablehlo/vhlo_ops.h"

namespace jmp::shlo {

namespace {

// Bytecode versions (MLIR's Encoding.h) whose features change the layout we read.
constexpr uint64_t kDialectVersioning = 1;
constexpr uint64_t kLazyLoading = 2;
constexpr uint64_t kUseListOrdering = 3;
constexpr uint64_t kElideUnknownBlockArgLocation = 4;
constexpr uint64_t kNativePropertiesEncoding = 5;
constexpr uint64_t kNewestBytecodeVersion = 6;

constexpr int kMaxNesting = 200;
constexpr size_t kMaxConstantBytes = size_t{1} << 31;

enum SectionId : uint8_t { kString = 0, kDialect = 1, kAttrType = 2, kAttrTypeOffset = 3, kIR = 4,
                           kResource = 5, kResourceOffset = 6, kDialectVersions = 7, kProperties = 8, kNumSections = 9 };

// VHLO attribute and type codes (StableHLO's VhloBytecode.cpp).
enum VhloAttrCode {
  kArrayV1 = 1, kBooleanV1 = 2, kComparisonDirectionV1 = 3, kComparisonTypeV1 = 4, kCustomCallApiVersionV1 = 5,
  kDictionaryV1 = 6, kFftTypeV1 = 7, kFloatV1 = 8, kIntegerV1 = 9, kOutputOperandAliasV1 = 10, kPrecisionV1 = 11,
  kRngAlgorithmV1 = 12, kRngDistributionV1 = 13, kStringV1 = 14, kTensorV1 = 15, kTransposeV1 = 16, kTypeV1 = 17,
  kTypeExtensionsV1 = 18, kResultAccuracyModeV1 = 19, kResultAccuracyV1 = 20,
};
enum VhloTypeCode {
  kBooleanT = 0, kComplexT = 1, kBF16T = 2, kF16T = 3, kF32T = 4, kF64T = 5, kFunctionT = 8, kIndexT = 9,
  kSI8T = 11, kSI16T = 12, kSI32T = 13, kSI64T = 14, kUI8T = 16, kUI16T = 17, kUI32T = 18, kUI64T = 19,
  kRankedTensorT = 20, kRankedTensorWithEncodingT = 21, kTokenT = 22, kTupleT = 23,
};
// Builtin attribute codes (MLIR's BuiltinDialectBytecode): only what ops and locations use.
enum BuiltinAttrCode {
  kBArray = 0, kBDictionary = 1, kBString = 2, kBStringWithType = 3, kBFlatSymbolRef = 4, kBUnit = 7,
  kBCallSiteLoc = 10, kBFileLineColLoc = 11, kBFusedLoc = 12, kBFusedLocWithMetadata = 13, kBNameLoc = 14,
  kBUnknownLoc = 15, kBFileLineColRange = 22,
};

// Marks a builtin dictionary entry not decoded yet (see DecodeBuiltinAttr).
constexpr const char* kAttrIndexRef = "\x01attr-index";

const char* const kComparisonDirections[] = {"EQ", "NE", "GE", "GT", "LE", "LT"};
const char* const kComparisonTypes[] = {"NOTYPE", "FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"};
const char* const kFftTypes[] = {"FFT", "IFFT", "RFFT", "IRFFT"};
const char* const kPrecisions[] = {"DEFAULT", "HIGH", "HIGHEST"};
const char* const kRngAlgorithms[] = {"DEFAULT", "THREE_FRY", "PHILOX"};
const char* const kTransposes[] = {"TRANSPOSE_INVALID", "NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"};

struct Entry {
  size_t dialect = 0;
  bool custom = false;
  Span data;
};

struct OpName {
  size_t dialect = 0;
  std::string_view name;
  bool registered = true;
};

// Value numbering of one isolated-from-above scope (MLIR's ValueScope): regions push a range of
// slots; operands index the whole vector.
struct ValueScope {
  std::vector<int> values;        // slot -> our value id, -1 until touched
  std::vector<size_t> next_ids;   // per open region: the next slot to define
};

class ArtifactReader {
 public:
  ArtifactReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  StatusOr<Module> Read();

 private:
  // ---- sections
  Status ReadStrings(Span s);
  Status ReadDialects(Span s);
  Status ReadAttrTypeOffsets(Span offsets, Span data);
  Status ReadProperties(Span s);

  // ---- strings, attributes and types
  StatusOr<std::string_view> StringAt(uint64_t index, const ByteReader& r) const;
  StatusOr<std::string_view> ReadStringRef(ByteReader& r);
  StatusOr<const Attr*> AttrAt(uint64_t index, int depth);
  StatusOr<const Type*> TypeAt(uint64_t index, int depth);
  StatusOr<const Attr*> ReadAttrRef(ByteReader& r, int depth);
  StatusOr<const Type*> ReadTypeRef(ByteReader& r, int depth);
  Status DecodeVhloAttr(ByteReader& r, Attr* out, int depth);
  Status DecodeBuiltinAttr(ByteReader& r, Attr* out, int depth);
  Status DecodeVhloType(ByteReader& r, Type* out, int depth);
  Status ReadAPInt(ByteReader& r, int bits, uint64_t* out);
  std::string Location(uint64_t index, int depth);

  // ---- IR
  Status ReadIRBlockOps(ByteReader& r, ValueScope& scope, uint64_t num_ops, Block* block, Func* func, int depth,
                        bool in_func_body, std::vector<Func>* funcs);
  Status ReadRegion(ByteReader& r, ValueScope& scope, Region* region, Func* func, int depth, bool func_body,
                    std::vector<Func>* funcs);
  Status ReadBlockHeader(ByteReader& r, ValueScope& scope, uint64_t* num_ops, Block* block, Func* func);
  Status DefineValues(ByteReader& r, ValueScope& scope, size_t n, const std::vector<Type>& types,
                      std::vector<int>* ids, Func* func);
  StatusOr<int> Operand(ByteReader& r, ValueScope& scope, Func* func);
  Status SkipUseListOrders(ByteReader& r, uint64_t range_size);
  Status ReadOp(ByteReader& r, ValueScope& scope, Block* block, Func* func, int depth, bool in_func_body,
                std::vector<Func>* funcs);
  Status FinishFunc(const AttrMap& attrs, Func* func, const std::string& where);

  int NewValue(Func* func, const Type& type) {
    func->value_types.push_back(type);
    return static_cast<int>(func->value_types.size()) - 1;
  }

  const uint8_t* data_;
  size_t size_;
  uint64_t version_ = 0;
  std::vector<std::string_view> strings_;
  std::vector<std::string_view> dialects_;
  std::vector<OpName> op_names_;
  std::vector<Entry> attr_entries_, type_entries_;
  std::vector<std::unique_ptr<Attr>> attrs_;
  std::vector<std::unique_ptr<Type>> types_;
  std::vector<uint8_t> attr_busy_, type_busy_;
  Span attr_data_;
  Span props_;
  std::vector<size_t> props_offsets_;
  std::map<uint64_t, std::string> locations_;
};

bool IsDialect(const std::vector<std::string_view>& dialects, size_t index, std::string_view name) {
  return index < dialects.size() && dialects[index] == name;
}

// ---- sections

Status ArtifactReader::ReadStrings(Span s) {
  ByteReader r(s, data_, "string section");
  uint64_t count;
  JMP_RETURN_IF_ERROR(r.Count(&count));
  strings_.resize(count);
  size_t end = s.size;
  for (size_t i = count; i-- > 0;) {
    uint64_t length;
    JMP_RETURN_IF_ERROR(r.VarInt(&length));
    if (length == 0 || length > end) return r.Error("string length out of range");
    size_t start = end - length;
    if (s.data[start + length - 1] != 0) return r.Error("string not NUL-terminated");
    strings_[i] = std::string_view(reinterpret_cast<const char*>(s.data + start), length - 1);
    end = start;
  }
  if (s.size - r.remaining() != end) return r.Error("string table sizes do not match the data");
  return Status::Ok();
}

StatusOr<std::string_view> ArtifactReader::StringAt(uint64_t index, const ByteReader& r) const {
  if (index >= strings_.size()) return r.Error("string index " + std::to_string(index) + " out of range");
  return strings_[index];
}

StatusOr<std::string_view> ArtifactReader::ReadStringRef(ByteReader& r) {
  uint64_t index;
  JMP_RETURN_IF_ERROR(r.VarInt(&index));
  return StringAt(index, r);
}

Status ArtifactReader::ReadDialects(Span s) {
  ByteReader r(s, data_, "dialect section");
  uint64_t count;
  JMP_RETURN_IF_ERROR(r.Count(&count));
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t name_index;
    bool has_version = false;
    if (version_ < kDialectVersioning) {
      JMP_RETURN_IF_ERROR(r.VarInt(&name_index));
    } else {
      JMP_RETURN_IF_ERROR(r.VarIntWithFlag(&name_index, &has_version));
    }
    JMP_ASSIGN_OR_RETURN(std::string_view name, StringAt(name_index, r));
    dialects_.push_back(name);
    if (has_version) {
      uint8_t id;
      Span version;
      JMP_RETURN_IF_ERROR(r.Section(&id, &version));
      if (id != kDialectVersions) return r.Error("expected a dialect version section");
    }
  }
  if (version_ >= kElideUnknownBlockArgLocation) {
    uint64_t num_ops;
    JMP_RETURN_IF_ERROR(r.VarInt(&num_ops));
  }
  while (!r.empty()) {
    uint64_t dialect, entries;
    JMP_RETURN_IF_ERROR(r.VarInt(&dialect));
    if (dialect >= dialects_.size()) return r.Error("dialect index out of range");
    JMP_RETURN_IF_ERROR(r.Count(&entries));
    for (uint64_t i = 0; i < entries; ++i) {
      OpName op;
      op.dialect = dialect;
      uint64_t index;
      if (version_ < kNativePropertiesEncoding) {
        JMP_RETURN_IF_ERROR(r.VarInt(&index));
      } else {
        JMP_RETURN_IF_ERROR(r.VarIntWithFlag(&index, &op.registered));
      }
      JMP_ASSIGN_OR_RETURN(op.name, StringAt(index, r));
      op_names_.push_back(op);
    }
  }
  return Status::Ok();
}

Status ArtifactReader::ReadAttrTypeOffsets(Span offsets, Span data) {
  ByteReader r(offsets, data_, "attribute/type offset section");
  uint64_t num_attrs, num_types;
  JMP_RETURN_IF_ERROR(r.Count(&num_attrs, 0));
  JMP_RETURN_IF_ERROR(r.Count(&num_types, 0));
  if (num_attrs > data.size + 1 || num_types > data.size + 1 || num_attrs + num_types > offsets.size * 8)
    return r.Error("more attributes and types than the data can hold");
  attr_entries_.resize(num_attrs);
  type_entries_.resize(num_types);
  size_t offset = 0;
  for (auto* entries : {&attr_entries_, &type_entries_}) {
    size_t index = 0;
    while (index < entries->size()) {
      uint64_t dialect, count;
      JMP_RETURN_IF_ERROR(r.VarInt(&dialect));
      if (dialect >= dialects_.size()) return r.Error("dialect index out of range");
      JMP_RETURN_IF_ERROR(r.VarInt(&count));
      if (count > entries->size() - index) return r.Error("attribute/type group larger than its table");
      for (uint64_t i = 0; i < count; ++i) {
        Entry& e = (*entries)[index++];
        uint64_t length;
        JMP_RETURN_IF_ERROR(r.VarIntWithFlag(&length, &e.custom));
        if (length > data.size - offset) return r.Error("attribute/type entry past the end of its section");
        e.dialect = dialect;
        e.data = Span{data.data + offset, static_cast<size_t>(length)};
        offset += length;
      }
    }
  }
  if (!r.empty()) return r.Error("trailing data in the attribute/type offsets");
  attrs_.resize(num_attrs);
  types_.resize(num_types);
  attr_busy_.assign(num_attrs, 0);
  type_busy_.assign(num_types, 0);
  attr_data_ = data;
  return Status::Ok();
}

Status ArtifactReader::ReadProperties(Span s) {
  if (s.size == 0) return Status::Ok();
  ByteReader r(s, data_, "properties section");
  uint64_t count;
  JMP_RETURN_IF_ERROR(r.Count(&count));
  Span rest;
  JMP_RETURN_IF_ERROR(r.Bytes(r.remaining(), &rest));
  props_ = rest;
  ByteReader p(rest, data_, "properties section");
  for (uint64_t i = 0; i < count; ++i) {
    props_offsets_.push_back(rest.size - p.remaining());
    uint64_t length;
    JMP_RETURN_IF_ERROR(p.VarInt(&length));
    JMP_RETURN_IF_ERROR(p.Skip(static_cast<size_t>(length)));
  }
  if (!p.empty()) return p.Error("trailing data in the properties table");
  return Status::Ok();
}

// ---- attributes and types

StatusOr<const Attr*> ArtifactReader::ReadAttrRef(ByteReader& r, int depth) {
  uint64_t index;
  JMP_RETURN_IF_ERROR(r.VarInt(&index));
  return AttrAt(index, depth);
}

StatusOr<const Type*> ArtifactReader::ReadTypeRef(ByteReader& r, int depth) {
  uint64_t index;
  JMP_RETURN_IF_ERROR(r.VarInt(&index));
  return TypeAt(index, depth);
}

StatusOr<const Attr*> ArtifactReader::AttrAt(uint64_t index, int depth) {
  if (index >= attr_entries_.size())
    return InvalidArgument("malformed artifact: attribute index " + std::to_string(index) + " out of range");
  if (attrs_[index]) return attrs_[index].get();
  if (attr_busy_[index] || depth > kMaxNesting)
    return InvalidArgument("malformed artifact: attribute " + std::to_string(index) + " refers to itself or nests too deeply");
  const Entry& e = attr_entries_[index];
  ByteReader r(e.data, data_, "attribute " + std::to_string(index));
  auto attr = std::make_unique<Attr>();
  attr_busy_[index] = 1;
  Status status;
  if (!e.custom) {
    std::string_view text;
    status = r.NulTerminated(&text);
    attr->kind = Attr::Kind::kString;  // an attribute in textual form: kept as its text
    attr->s = std::string(text);
  } else if (IsDialect(dialects_, e.dialect, "vhlo")) {
    status = DecodeVhloAttr(r, attr.get(), depth + 1);
  } else if (IsDialect(dialects_, e.dialect, "builtin")) {
    status = DecodeBuiltinAttr(r, attr.get(), depth + 1);
  } else {
    // Another dialect's attribute (sdy shardings, ...): kept opaque; nothing we lower reads it.
    attr->kind = Attr::Kind::kUnit;
    attr->s = "attribute of dialect " + std::string(e.dialect < dialects_.size() ? dialects_[e.dialect] : "?");
  }
  attr_busy_[index] = 0;
  JMP_RETURN_IF_ERROR(status);
  attrs_[index] = std::move(attr);
  return attrs_[index].get();
}

StatusOr<const Type*> ArtifactReader::TypeAt(uint64_t index, int depth) {
  if (index >= type_entries_.size())
    return InvalidArgument("malformed artifact: type index " + std::to_string(index) + " out of range");
  if (types_[index]) return types_[index].get();
  if (type_busy_[index] || depth > kMaxNesting)
    return InvalidArgument("malformed artifact: type " + std::to_string(index) + " refers to itself or nests too deeply");
  const Entry& e = type_entries_[index];
  ByteReader r(e.data, data_, "type " + std::to_string(index));
  auto type = std::make_unique<Type>();
  type_busy_[index] = 1;
  Status status;
  if (e.custom && IsDialect(dialects_, e.dialect, "vhlo")) {
    status = DecodeVhloType(r, type.get(), depth + 1);
  } else {
    type->kind = Type::Kind::kOther;
    type->other = e.custom ? "type of dialect " + std::string(e.dialect < dialects_.size() ? dialects_[e.dialect] : "?")
                           : std::string(reinterpret_cast<const char*>(e.data.data), strnlen(reinterpret_cast<const char*>(e.data.data), e.data.size));
  }
  type_busy_[index] = 0;
  JMP_RETURN_IF_ERROR(status);
  types_[index] = std::move(type);
  return types_[index].get();
}

Status ArtifactReader::ReadAPInt(ByteReader& r, int bits, uint64_t* out) {
  if (bits <= 8) {
    uint8_t b;
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

Status ArtifactReader::DecodeVhloType(ByteReader& r, Type* out, int depth) {
  uint64_t code;
  JMP_RETURN_IF_ERROR(r.VarInt(&code));
  auto scalar = [out](DType d) {
    out->kind = Type::Kind::kTensor;
    out->dtype = d;
    out->shape.clear();
    return Status::Ok();
  };
  switch (code) {
    case kBooleanT: return scalar(DType::kBool);
    case kBF16T: return scalar(DType::kBF16);
    case kF16T: return scalar(DType::kF16);
    case kF32T: return scalar(DType::kF32);
    case kF64T: return scalar(DType::kF64);
    case kSI8T: return scalar(DType::kI8);
    case kSI16T: return scalar(DType::kI16);
    case kSI32T: return scalar(DType::kI32);
    case kSI64T: return scalar(DType::kI64);
    case kIndexT: return scalar(DType::kI64);
    case kUI8T: return scalar(DType::kU8);
    case kUI16T: return scalar(DType::kU16);
    case kUI32T: return scalar(DType::kU32);
    case kUI64T: return scalar(DType::kU64);
    case kComplexT: {
      JMP_ASSIGN_OR_RETURN(const Type* element, ReadTypeRef(r, depth));
      if (element->kind != Type::Kind::kTensor || !element->shape.empty()) return r.Error("complex of a non-scalar type");
      if (element->dtype == DType::kF32) return scalar(DType::kC64);
      if (element->dtype == DType::kF64) return scalar(DType::kC128);
      out->kind = Type::Kind::kOther;
      out->other = "complex<" + element->ToString() + ">";
      return Status::Ok();
    }
    case kRankedTensorWithEncodingT: {
      JMP_ASSIGN_OR_RETURN(const Attr* encoding, ReadAttrRef(r, depth));
      (void)encoding;
      [[fallthrough]];
    }
    case kRankedTensorT: {
      uint64_t rank;
      JMP_RETURN_IF_ERROR(r.Count(&rank));
      std::vector<int64_t> shape(rank);
      for (auto& d : shape) {
        JMP_RETURN_IF_ERROR(r.SignedVarInt(&d));
        if (d < 0) return Unimplemented("dynamic shapes are not supported (a tensor dimension is dynamic)");
      }
      JMP_ASSIGN_OR_RETURN(const Type* element, ReadTypeRef(r, depth));
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
    case kTokenT:
      out->kind = Type::Kind::kToken;
      return Status::Ok();
    case kTupleT: {
      uint64_t n;
      JMP_RETURN_IF_ERROR(r.Count(&n));
      out->kind = Type::Kind::kTuple;
      for (uint64_t i = 0; i < n; ++i) {
        JMP_ASSIGN_OR_RETURN(const Type* t, ReadTypeRef(r, depth));
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
          JMP_ASSIGN_OR_RETURN(const Type* t, ReadTypeRef(r, depth));
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

size_t ElementBytes(DType d) { return ByteSize(d); }

Status ArtifactReader::DecodeVhloAttr(ByteReader& r, Attr* out, int depth) {
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
        JMP_ASSIGN_OR_RETURN(const Attr* a, ReadAttrRef(r, depth));
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
        JMP_ASSIGN_OR_RETURN(const Attr* name, ReadAttrRef(r, depth));
        JMP_ASSIGN_OR_RETURN(const Attr* value, ReadAttrRef(r, depth));
        out->dict[name->s] = *value;
      }
      return Status::Ok();
    }
    case kFloatV1: {
      JMP_ASSIGN_OR_RETURN(const Type* t, ReadTypeRef(r, depth));
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
          if (exp == 0x1f) f32 = sign | 0x7f800000u | (mant << 13);
          else if (exp == 0) f32 = 0, out->f = (sign ? -1.0 : 1.0) * std::ldexp(static_cast<double>(mant), -24);
          else f32 = sign | ((exp + 112) << 23) | (mant << 13);
          if (exp == 0) return Status::Ok();
        }
        float f;
        std::memcpy(&f, &f32, 4);
        out->f = f;
      }
      return Status::Ok();
    }
    case kIntegerV1: {
      JMP_ASSIGN_OR_RETURN(const Type* t, ReadTypeRef(r, depth));
      if (t->kind != Type::Kind::kTensor || !(IsInteger(t->dtype) || t->dtype == DType::kBool))
        return r.Error("integer attribute of a non-integer type");
      int bits = BitWidth(t->dtype);
      uint64_t v;
      JMP_RETURN_IF_ERROR(ReadAPInt(r, bits, &v));
      if (bits < 64) {
        v &= (uint64_t{1} << bits) - 1;
        if (IsSignedInt(t->dtype) && (v >> (bits - 1)) & 1) v |= ~((uint64_t{1} << bits) - 1);
      }
      out->kind = Attr::Kind::kInt;
      out->type = *t;
      out->i = static_cast<int64_t>(v);
      return Status::Ok();
    }
    case kStringV1: {
      JMP_ASSIGN_OR_RETURN(std::string_view s, ReadStringRef(r));
      out->kind = Attr::Kind::kString;
      out->s = std::string(s);
      return Status::Ok();
    }
    case kTensorV1: {
      JMP_ASSIGN_OR_RETURN(const Type* t, ReadTypeRef(r, depth));
      if (t->kind != Type::Kind::kTensor) return r.Error("dense constant of a non-tensor type");
      uint64_t length;
      JMP_RETURN_IF_ERROR(r.VarInt(&length));
      Span blob;
      JMP_RETURN_IF_ERROR(r.Bytes(static_cast<size_t>(length), &blob));
      size_t count = static_cast<size_t>(t->NumElements());
      size_t width = ElementBytes(t->dtype);
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
      if (raw.size() == width && count != 1) {  // a splat
        out->data.resize(count * width);
        for (size_t i = 0; i < count; ++i) std::memcpy(out->data.data() + i * width, raw.data(), width);
      } else if (raw.size() == count * width) {
        out->data = std::move(raw);
      } else {
        return r.Error("dense constant has " + std::to_string(raw.size()) + " bytes for " + std::to_string(count) +
                       " elements of " + std::string(DTypeName(t->dtype)));
      }
      return Status::Ok();
    }
    case kTypeV1: {
      JMP_ASSIGN_OR_RETURN(const Type* t, ReadTypeRef(r, depth));
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

Status ArtifactReader::DecodeBuiltinAttr(ByteReader& r, Attr* out, int depth) {
  uint64_t code;
  JMP_RETURN_IF_ERROR(r.VarInt(&code));
  switch (code) {
    case kBString:
    case kBStringWithType:
    case kBFlatSymbolRef: {
      if (code == kBFlatSymbolRef) {
        JMP_ASSIGN_OR_RETURN(const Attr* root, ReadAttrRef(r, depth));
        out->kind = Attr::Kind::kSymbol;
        out->s = root->s;
        return Status::Ok();
      }
      JMP_ASSIGN_OR_RETURN(std::string_view s, ReadStringRef(r));
      out->kind = Attr::Kind::kString;
      out->s = std::string(s);
      return Status::Ok();
    }
    case kBDictionary: {
      uint64_t n;
      JMP_RETURN_IF_ERROR(r.Count(&n, 2));
      out->kind = Attr::Kind::kDict;
      for (uint64_t i = 0; i < n; ++i) {
        // Values are decoded only when an op asks for them (ReadOp): keep the indices here.
        JMP_ASSIGN_OR_RETURN(const Attr* name, ReadAttrRef(r, depth));
        uint64_t value_index;
        JMP_RETURN_IF_ERROR(r.VarInt(&value_index));
        Attr ref;
        ref.kind = Attr::Kind::kUnit;  // a reference: `i` is the value's attribute index
        ref.s = kAttrIndexRef;
        ref.i = static_cast<int64_t>(value_index);
        out->dict[name->s] = ref;
      }
      return Status::Ok();
    }
    case kBUnit:
      out->kind = Attr::Kind::kUnit;
      return Status::Ok();
    case kBArray: {
      uint64_t n;
      JMP_RETURN_IF_ERROR(r.Count(&n));
      out->kind = Attr::Kind::kArray;
      for (uint64_t i = 0; i < n; ++i) {
        JMP_ASSIGN_OR_RETURN(const Attr* a, ReadAttrRef(r, depth));
        out->array.push_back(*a);
      }
      return Status::Ok();
    }
    default:
      // Locations and everything else: not needed as values (Location() reads locations).
      out->kind = Attr::Kind::kUnit;
      return Status::Ok();
  }
}

// Best effort: the innermost file:line:col a location attribute leads to, "" when there is none or
// its encoding is one we don't know (locations never fail a read).
std::string ArtifactReader::Location(uint64_t index, int depth) {
  if (depth > 32 || index >= attr_entries_.size()) return "";
  auto cached = locations_.find(index);
  if (cached != locations_.end()) return cached->second;
  const Entry& e = attr_entries_[index];
  if (!e.custom || !IsDialect(dialects_, e.dialect, "builtin")) return "";
  ByteReader r(e.data, data_, "location");
  uint64_t code;
  std::string result;
  if (!r.VarInt(&code).ok()) return "";
  auto file_line_col = [&]() -> std::string {
    uint64_t file_attr, line, col;
    if (!r.VarInt(&file_attr).ok()) return "";
    StatusOr<const Attr*> file = AttrAt(file_attr, depth + 1);
    if (!file.ok()) return "";
    if (code == kBFileLineColRange) {
      uint64_t n;
      if (!r.VarInt(&n).ok() || n == 0 || !r.VarInt(&line).ok()) return (*file)->s;
      col = 0;
      if (n > 1 && !r.VarInt(&col).ok()) col = 0;
    } else if (!r.VarInt(&line).ok() || !r.VarInt(&col).ok()) {
      return "";
    }
    return (*file)->s + ":" + std::to_string(line) + ":" + std::to_string(col);
  };
  uint64_t a = 0, b = 0;
  switch (code) {
    case kBFileLineColLoc:
    case kBFileLineColRange:
      result = file_line_col();
      break;
    case kBNameLoc:  // name, child
      if (r.VarInt(&a).ok() && r.VarInt(&b).ok()) result = Location(b, depth + 1);
      break;
    case kBCallSiteLoc:  // callee, caller: the callee is where the op is
      if (r.VarInt(&a).ok() && r.VarInt(&b).ok()) {
        result = Location(a, depth + 1);
        if (result.empty()) result = Location(b, depth + 1);
      }
      break;
    case kBFusedLoc:
    case kBFusedLocWithMetadata: {
      uint64_t n;
      if (r.VarInt(&n).ok() && n < 1024)
        for (uint64_t i = 0; i < n && result.empty(); ++i)
          if (r.VarInt(&a).ok()) result = Location(a, depth + 1);
      break;
    }
    default:
      break;
  }
  locations_[index] = result;
  return result;
}

// ---- IR

Status ArtifactReader::DefineValues(ByteReader& r, ValueScope& scope, size_t n, const std::vector<Type>& types,
                                    std::vector<int>* ids, Func* func) {
  if (scope.next_ids.empty()) return r.Error("values defined outside any region");
  size_t& next = scope.next_ids.back();
  if (n > scope.values.size() || next > scope.values.size() - n) return r.Error("value index outside its region's range");
  for (size_t i = 0; i < n; ++i, ++next) {
    int& slot = scope.values[next];
    if (slot < 0) {
      slot = NewValue(func, types[i]);
    } else {
      func->value_types[static_cast<size_t>(slot)] = types[i];  // a forward reference, now defined
    }
    ids->push_back(slot);
  }
  return Status::Ok();
}

StatusOr<int> ArtifactReader::Operand(ByteReader& r, ValueScope& scope, Func* func) {
  uint64_t index;
  JMP_RETURN_IF_ERROR(r.VarInt(&index));
  if (index >= scope.values.size()) return r.Error("operand refers to value " + std::to_string(index) + " out of range");
  int& slot = scope.values[index];
  if (slot < 0) slot = NewValue(func, Type{});  // forward reference
  return slot;
}

Status ArtifactReader::SkipUseListOrders(ByteReader& r, uint64_t range_size) {
  uint64_t entries = 1;
  if (range_size > 1) JMP_RETURN_IF_ERROR(r.Count(&entries));
  for (uint64_t i = 0; i < entries; ++i) {
    uint64_t index, n;
    bool pairs;
    if (range_size > 1) JMP_RETURN_IF_ERROR(r.VarInt(&index));
    JMP_RETURN_IF_ERROR(r.VarIntWithFlag(&n, &pairs));
    if (n > r.remaining()) return r.Error("use-list order longer than the data");
    for (uint64_t k = 0; k < n; ++k) JMP_RETURN_IF_ERROR(r.VarInt(&index));
  }
  return Status::Ok();
}

Status ArtifactReader::ReadBlockHeader(ByteReader& r, ValueScope& scope, uint64_t* num_ops, Block* block, Func* func) {
  bool has_args;
  JMP_RETURN_IF_ERROR(r.VarIntWithFlag(num_ops, &has_args));
  if (*num_ops > r.remaining()) return r.Error("block claims more ops than the data holds");
  if (has_args) {
    uint64_t n;
    JMP_RETURN_IF_ERROR(r.Count(&n));
    std::vector<Type> types;
    for (uint64_t i = 0; i < n; ++i) {
      const Type* t = nullptr;
      if (version_ >= kElideUnknownBlockArgLocation) {
        uint64_t index;
        bool has_loc;
        JMP_RETURN_IF_ERROR(r.VarIntWithFlag(&index, &has_loc));
        JMP_ASSIGN_OR_RETURN(t, TypeAt(index, 0));
        if (has_loc) JMP_RETURN_IF_ERROR(r.VarInt(&index));
      } else {
        JMP_ASSIGN_OR_RETURN(t, ReadTypeRef(r, 0));
        uint64_t loc;
        JMP_RETURN_IF_ERROR(r.VarInt(&loc));
      }
      types.push_back(*t);
    }
    if (func) {
      JMP_RETURN_IF_ERROR(DefineValues(r, scope, types.size(), types, &block->args, func));
    } else if (!types.empty()) {
      return r.Error("block arguments outside a function");
    }
    if (version_ >= kUseListOrdering) {
      uint8_t has_orders;
      JMP_RETURN_IF_ERROR(r.Byte(&has_orders));
      if (has_orders) JMP_RETURN_IF_ERROR(SkipUseListOrders(r, n));
    }
  }
  return Status::Ok();
}

Status ArtifactReader::ReadRegion(ByteReader& r, ValueScope& scope, Region* region, Func* func, int depth,
                                  bool func_body, std::vector<Func>* funcs) {
  uint64_t num_blocks;
  JMP_RETURN_IF_ERROR(r.Count(&num_blocks));
  if (num_blocks == 0) return Status::Ok();
  uint64_t num_values;
  JMP_RETURN_IF_ERROR(r.VarInt(&num_values));
  if (num_values > r.remaining() + 1024) return r.Error("region claims more values than the data can define");
  scope.next_ids.push_back(scope.values.size());
  scope.values.resize(scope.values.size() + num_values, -1);
  region->blocks.resize(num_blocks);
  Status status;
  for (uint64_t b = 0; b < num_blocks && status.ok(); ++b) {
    uint64_t num_ops;
    status = ReadBlockHeader(r, scope, &num_ops, &region->blocks[b], func);
    if (status.ok()) status = ReadIRBlockOps(r, scope, num_ops, &region->blocks[b], func, depth, func_body, funcs);
  }
  scope.values.resize(scope.values.size() - num_values);
  scope.next_ids.pop_back();
  return status;
}

Status ArtifactReader::ReadIRBlockOps(ByteReader& r, ValueScope& scope, uint64_t num_ops, Block* block, Func* func,
                                      int depth, bool in_func_body, std::vector<Func>* funcs) {
  for (uint64_t i = 0; i < num_ops; ++i)
    JMP_RETURN_IF_ERROR(ReadOp(r, scope, block, func, depth, in_func_body, funcs));
  return Status::Ok();
}

Status ArtifactReader::FinishFunc(const AttrMap& attrs, Func* func, const std::string& where) {
  auto name = attrs.find("sym_name");
  if (name == attrs.end()) return InvalidArgument("malformed artifact: function without sym_name (" + where + ")");
  func->name = name->second.s;
  auto visibility = attrs.find("sym_visibility");
  func->is_public = visibility == attrs.end() || visibility->second.s.empty() || visibility->second.s == "public";
  if (func->body.blocks.empty()) return InvalidArgument("malformed artifact: function @" + func->name + " has no body");
  const Block& entry = func->body.blocks[0];
  for (int arg : entry.args) func->arg_types.push_back(func->value_types[static_cast<size_t>(arg)]);
  auto type = attrs.find("function_type");
  if (type != attrs.end() && type->second.type.kind == Type::Kind::kOther && type->second.type.other == "function" &&
      !type->second.type.shape.empty()) {
    size_t inputs = static_cast<size_t>(type->second.type.shape[0]);
    for (size_t i = inputs; i < type->second.type.elements.size(); ++i)
      func->result_types.push_back(type->second.type.elements[i]);
  }
  // arg_attrs / res_attrs: an array with one dictionary per argument (result), or absent.
  auto per_value_attrs = [&](const char* key, size_t count, std::vector<AttrMap>* out) -> Status {
    out->assign(count, AttrMap{});
    auto it = attrs.find(key);
    if (it == attrs.end() || (it->second.kind == Attr::Kind::kUnit && it->second.s.empty())) return Status::Ok();
    const Attr& list = it->second;
    // An empty array reads as an empty integer list.
    if (list.kind == Attr::Kind::kInts && list.ints.empty()) return Status::Ok();
    if (list.kind != Attr::Kind::kArray || list.array.size() != count)
      return InvalidArgument("malformed artifact: " + std::string(key) + " of @" + func->name + " is not one dictionary per " +
                             (out == &func->arg_attrs ? "argument" : "result") + " (" + where + ")");
    for (size_t i = 0; i < count; ++i) {
      const Attr& dict = list.array[i];
      if (dict.kind != Attr::Kind::kDict)
        return InvalidArgument("malformed artifact: " + std::string(key) + "[" + std::to_string(i) + "] of @" +
                               func->name + " is not a dictionary (" + where + ")");
      for (const auto& [name, value] : dict.dict)
        if (name.rfind("sdy.", 0) != 0 && name.rfind("mhlo.", 0) != 0) (*out)[i][name] = value;
    }
    return Status::Ok();
  };
  JMP_RETURN_IF_ERROR(per_value_attrs("arg_attrs", func->arg_types.size(), &func->arg_attrs));
  JMP_RETURN_IF_ERROR(per_value_attrs("res_attrs", func->result_types.size(), &func->result_attrs));
  return Status::Ok();
}

Status ArtifactReader::ReadOp(ByteReader& r, ValueScope& scope, Block* block, Func* func, int depth,
                              bool in_func_body, std::vector<Func>* funcs) {
  if (depth > kMaxNesting) return r.Error("regions nest too deeply");
  size_t op_offset = r.offset();
  uint64_t name_index;
  JMP_RETURN_IF_ERROR(r.VarInt(&name_index));
  if (name_index >= op_names_.size()) return r.Error("op name index out of range");
  const OpName& opname = op_names_[name_index];
  std::string dialect(opname.dialect < dialects_.size() ? dialects_[opname.dialect] : "?");
  std::string full = dialect + "." + std::string(opname.name);
  uint8_t mask;
  JMP_RETURN_IF_ERROR(r.Byte(&mask));
  uint64_t loc_index;
  JMP_RETURN_IF_ERROR(r.VarInt(&loc_index));

  const VhloOpInfo* info = dialect == "vhlo" ? FindVhloOp(opname.name) : nullptr;
  AttrMap attrs;
  std::string where = full + " at byte " + std::to_string(op_offset);
  auto keep = [](const std::string& name) {
    return name.rfind("mhlo.", 0) != 0 && name.rfind("sdy.", 0) != 0 && name.rfind("jax.", 0) != 0;
  };
  if (mask & 0x01) {  // the attribute dictionary
    JMP_ASSIGN_OR_RETURN(const Attr* dict, ReadAttrRef(r, 0));
    if (dict->kind != Attr::Kind::kDict) return r.Error("op attributes are not a dictionary");
    for (const auto& [name, value] : dict->dict) {
      if (!keep(name)) continue;
      if (value.kind == Attr::Kind::kUnit && value.s == kAttrIndexRef) {
        JMP_ASSIGN_OR_RETURN(const Attr* v, AttrAt(static_cast<uint64_t>(value.i), 0));
        attrs[name] = *v;
      } else {
        attrs[name] = value;
      }
    }
  }
  if (mask & 0x40) {  // properties: inherent attribute indices in sorted-name order
    // For a registered op this indexes the properties table; an unregistered op stores an attribute
    // index instead. Ops other than VHLO's (builtin.module) carry nothing we use.
    uint64_t props_index;
    JMP_RETURN_IF_ERROR(r.VarInt(&props_index));
    if (info && opname.registered) {
    if (props_index >= props_offsets_.size()) return r.Error("properties index out of range");
    ByteReader pr(Span{props_.data + props_offsets_[props_index], props_.size - props_offsets_[props_index]}, data_,
                  "properties of " + full);
    uint64_t length;
    JMP_RETURN_IF_ERROR(pr.VarInt(&length));
    Span blob;
    JMP_RETURN_IF_ERROR(pr.Bytes(static_cast<size_t>(length), &blob));
    ByteReader br(blob, data_, "properties of " + full);
    for (std::string_view name : info->attr_names) {
      if (br.empty()) break;  // attributes added in later versions of this op form
      JMP_ASSIGN_OR_RETURN(const Attr* a, ReadAttrRef(br, 0));
      attrs[std::string(name)] = *a;
    }
    }
  }
  std::vector<Type> result_types;
  if (mask & 0x02) {
    uint64_t n;
    JMP_RETURN_IF_ERROR(r.Count(&n));
    for (uint64_t i = 0; i < n; ++i) {
      JMP_ASSIGN_OR_RETURN(const Type* t, ReadTypeRef(r, 0));
      result_types.push_back(*t);
    }
  }
  Op op;
  op.location = Location(loc_index, 0);
  if (mask & 0x04) {
    uint64_t n;
    JMP_RETURN_IF_ERROR(r.Count(&n));
    if (!func) return r.Error("operands outside a function");
    for (uint64_t i = 0; i < n; ++i) {
      JMP_ASSIGN_OR_RETURN(int v, Operand(r, scope, func));
      op.operands.push_back(v);
    }
  }
  if (mask & 0x08) {
    uint64_t n, index;
    JMP_RETURN_IF_ERROR(r.Count(&n));
    for (uint64_t i = 0; i < n; ++i) JMP_RETURN_IF_ERROR(r.VarInt(&index));
  }
  if ((mask & 0x20) && version_ >= kUseListOrdering) JMP_RETURN_IF_ERROR(SkipUseListOrders(r, result_types.size()));
  uint64_t num_regions = 0;
  bool isolated = false;
  if (mask & 0x10) {
    JMP_RETURN_IF_ERROR(r.VarIntWithFlag(&num_regions, &isolated));
    if (num_regions > r.remaining() + 1) return r.Error("op claims more regions than the data holds");
  }
  if (!result_types.empty()) {
    if (!func) return r.Error("results outside a function");
    JMP_RETURN_IF_ERROR(DefineValues(r, scope, result_types.size(), result_types, &op.results, func));
  }

  // Regions: isolated ones sit in their own IR section with fresh value numbering.
  auto read_regions = [&](std::vector<Region>* regions, Func* region_func, bool func_body) -> Status {
    regions->resize(num_regions);
    if (isolated && version_ >= kLazyLoading) {
      uint8_t id;
      Span section;
      JMP_RETURN_IF_ERROR(r.Section(&id, &section));
      if (id != kIR) return r.Error("expected an IR section for an isolated region");
      ByteReader sub(section, data_, "regions of " + full);
      ValueScope fresh;
      for (auto& region : *regions)
        JMP_RETURN_IF_ERROR(ReadRegion(sub, fresh, &region, region_func, depth + 1, func_body, funcs));
      return Status::Ok();
    }
    if (isolated) {
      ValueScope fresh;
      for (auto& region : *regions)
        JMP_RETURN_IF_ERROR(ReadRegion(r, fresh, &region, region_func, depth + 1, func_body, funcs));
      return Status::Ok();
    }
    for (auto& region : *regions)
      JMP_RETURN_IF_ERROR(ReadRegion(r, scope, &region, region_func, depth + 1, func_body, funcs));
    return Status::Ok();
  };

  if (full == "builtin.module") {
    std::vector<Region> regions;
    return read_regions(&regions, nullptr, false);
  }
  if (full == "vhlo.func_v1") {
    if (func) return r.Error("nested function");
    Func f;
    std::vector<Region> regions;
    JMP_RETURN_IF_ERROR(read_regions(&regions, &f, true));
    if (regions.size() != 1) return r.Error("function without exactly one region");
    f.body = std::move(regions[0]);
    JMP_RETURN_IF_ERROR(FinishFunc(attrs, &f, where));
    funcs->push_back(std::move(f));
    return Status::Ok();
  }
  if (!func) {
    // Module-level ops other than functions (sdy.mesh, ...) carry nothing we run.
    std::vector<Region> ignored;
    return read_regions(&ignored, nullptr, false);
  }
  if (dialect == "vhlo") {
    if (!info) return Unimplemented("unsupported op '" + full + "' (a VHLO op newer than this reader)");
    std::string base(info->base_name);
    if (base == "return") op.name = in_func_body ? "func.return" : "stablehlo.return";
    else if (base == "call") op.name = "func.call";
    else op.name = "stablehlo." + base;
  } else {
    op.name = full;
  }
  for (auto& [name, value] : attrs) {
    // Integer lists arrive as kInts whatever VHLO used (older forms use tensor_v1 of i64 or i1).
    if (name != "value" && value.kind == Attr::Kind::kTensor &&
        (IsInteger(value.type.dtype) || value.type.dtype == DType::kBool)) {
      Attr ints;
      ints.kind = Attr::Kind::kInts;
      size_t width = ByteSize(value.type.dtype);
      for (size_t i = 0; i + width <= value.data.size(); i += width) {
        int64_t v = 0;
        if (width == 8) std::memcpy(&v, &value.data[i], 8);
        else if (width == 4) { int32_t x; std::memcpy(&x, &value.data[i], 4); v = x; }
        else if (width == 2) { int16_t x; std::memcpy(&x, &value.data[i], 2); v = x; }
        else v = value.data[i];
        ints.ints.push_back(v);
      }
      value = ints;
    }
    if (name == "callee" || name == "decomposition") value.kind = Attr::Kind::kSymbol;
  }
  // dot_general's dimension numbers are flat attributes in VHLO; the lowering reads them as StableHLO's
  // dot_dimension_numbers.
  if (op.name == "stablehlo.dot_general") {
    Attr dn;
    dn.kind = Attr::Kind::kDict;
    for (const char* f : {"lhs_batching_dimensions", "rhs_batching_dimensions", "lhs_contracting_dimensions",
                          "rhs_contracting_dimensions"}) {
      auto it = attrs.find(f);
      Attr v;
      v.kind = Attr::Kind::kInts;
      if (it != attrs.end()) v = it->second;
      v.kind = Attr::Kind::kInts;
      dn.dict[f] = v;
    }
    attrs["dot_dimension_numbers"] = dn;
  }
  // Sharding round trips leave casts between a tensor and the same tensor in builtin types: the
  // result is the operand.
  if ((full == "builtin.unrealized_conversion_cast" || full == "sdy.sharding_constraint" || full == "sdy.reshard") &&
      op.operands.size() == 1 && op.results.size() == 1) {
    Type& result = func->value_types[static_cast<size_t>(op.results[0])];
    if (result.kind != Type::Kind::kTensor) result = func->value_types[static_cast<size_t>(op.operands[0])];
  }
  op.attrs = std::move(attrs);
  JMP_RETURN_IF_ERROR(read_regions(&op.regions, func, false));
  block->ops.push_back(std::move(op));
  return Status::Ok();
}

StatusOr<Module> ArtifactReader::Read() {
  ByteReader r(Span{data_, size_}, data_, "header");
  Span magic;
  if (size_ < 4) return InvalidArgument("not a StableHLO portable artifact: " + std::to_string(size_) + " bytes");
  JMP_RETURN_IF_ERROR(r.Bytes(4, &magic));
  if (std::memcmp(magic.data, "ML\xefR", 4) != 0)
    return InvalidArgument("not a StableHLO portable artifact: missing the MLIR bytecode magic 'ML\\xefR'");
  JMP_RETURN_IF_ERROR(r.VarInt(&version_));
  if (version_ > kNewestBytecodeVersion)
    return InvalidArgument("MLIR bytecode version " + std::to_string(version_) + " is newer than this reader (" +
                           std::to_string(kNewestBytecodeVersion) + ")");
  std::string_view producer;
  JMP_RETURN_IF_ERROR(r.NulTerminated(&producer));
  Module module;
  module.producer = std::string(producer);
  int v[3] = {0, 0, 0};
  if (producer.rfind("StableHLO_v", 0) == 0 &&
      std::sscanf(module.producer.c_str() + 11, "%d.%d.%d", &v[0], &v[1], &v[2]) == 3) {
    for (int i = 0; i < 3; ++i) module.version[i] = v[i];
    auto older = [](const int* a, const int64_t* b) {
      for (int i = 0; i < 3; ++i)
        if (a[i] != b[i]) return a[i] < b[i];
      return false;
    };
    auto newer = [](const int* a, const int64_t* b) {
      for (int i = 0; i < 3; ++i)
        if (a[i] != b[i]) return a[i] > b[i];
      return false;
    };
    if (older(v, kOldestVersion) || newer(v, kNewestVersion))
      return InvalidArgument("StableHLO version " + module.producer.substr(11) + " is outside what this plugin reads (" +
                             std::to_string(kOldestVersion[0]) + "." + std::to_string(kOldestVersion[1]) + "." +
                             std::to_string(kOldestVersion[2]) + " to " + std::to_string(kNewestVersion[0]) + "." +
                             std::to_string(kNewestVersion[1]) + "." + std::to_string(kNewestVersion[2]) + ")");
  } else {
    return InvalidArgument("not a StableHLO portable artifact: producer is '" + module.producer + "'");
  }

  std::optional<Span> sections[kNumSections];
  while (!r.empty()) {
    uint8_t id;
    Span payload;
    JMP_RETURN_IF_ERROR(r.Section(&id, &payload));
    if (id >= kNumSections) return r.Error("unknown section id " + std::to_string(id));
    if (sections[id]) return r.Error("duplicate section " + std::to_string(id));
    sections[id] = payload;
  }
  for (uint8_t id : {kString, kDialect, kAttrType, kAttrTypeOffset, kIR})
    if (!sections[id]) return InvalidArgument("malformed artifact: missing section " + std::to_string(id));
  JMP_RETURN_IF_ERROR(ReadStrings(*sections[kString]));
  if (sections[kProperties]) JMP_RETURN_IF_ERROR(ReadProperties(*sections[kProperties]));
  JMP_RETURN_IF_ERROR(ReadDialects(*sections[kDialect]));
  JMP_RETURN_IF_ERROR(ReadAttrTypeOffsets(*sections[kAttrTypeOffset], *sections[kAttrType]));

  ByteReader ir(*sections[kIR], data_, "IR section");
  ValueScope top;
  top.next_ids.push_back(0);
  uint64_t num_ops;
  Block top_block;
  JMP_RETURN_IF_ERROR(ReadBlockHeader(ir, top, &num_ops, &top_block, nullptr));
  JMP_RETURN_IF_ERROR(ReadIRBlockOps(ir, top, num_ops, &top_block, nullptr, 0, false, &module.funcs));
  if (module.funcs.empty()) return InvalidArgument("malformed artifact: no functions");
  return module;
}

}  // namespace

StatusOr<Module> ReadArtifact(const uint8_t* data, size_t size) {
  if (!data && size) return InvalidArgument("null artifact");
  ArtifactReader reader(data, size);
  return reader.Read();
}

}  // namespace jmp::shlo
