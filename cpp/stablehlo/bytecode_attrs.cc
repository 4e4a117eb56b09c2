// The attribute/type table: locating entries, decoding them once on first use (with cycle and nesting
// limits, as entries may refer to each other in any order), builtin attributes and locations.
#include "stablehlo/bytecode_attrs.h"

#include <cstring>

namespace jmp::shlo {

namespace {

// Builtin attribute codes (MLIR's BuiltinDialectBytecode): only what ops and locations use.
enum BuiltinAttrCode {
  kBArray = 0,
  kBDictionary = 1,
  kBString = 2,
  kBStringWithType = 3,
  kBFlatSymbolRef = 4,
  kBUnit = 7,
  kBCallSiteLoc = 10,
  kBFileLineColLoc = 11,
  kBFusedLoc = 12,
  kBFusedLocWithMetadata = 13,
  kBNameLoc = 14,
  kBUnknownLoc = 15,
  kBFileLineColRange = 22,
};

// Marks a builtin dictionary entry not decoded yet (see DecodeBuiltinAttr).
constexpr const char* kAttrIndexRef = "\x01attr-index";

}  // namespace

// ---- names

StatusOr<std::string_view> BytecodeNames::StringAt(uint64_t index, const ByteReader& r) const {
  if (index >= strings.size()) return r.Error("string index " + std::to_string(index) + " out of range");
  return strings[index];
}

StatusOr<std::string_view> BytecodeNames::ReadStringRef(ByteReader& r) const {
  uint64_t index;
  JMP_RETURN_IF_ERROR(r.VarInt(&index));
  return StringAt(index, r);
}

bool BytecodeNames::IsDialect(size_t index, std::string_view name) const {
  return index < dialects.size() && dialects[index] == name;
}

std::string BytecodeNames::DialectName(size_t index) const {
  return std::string(index < dialects.size() ? dialects[index] : "?");
}

// ---- the table

Status AttrTypeTable::ReadOffsets(Span offsets, Span data) {
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
      if (dialect >= names_.dialects.size()) return r.Error("dialect index out of range");
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
  return Status::Ok();
}

StatusOr<const Attr*> AttrTypeTable::ReadAttrRef(ByteReader& r, int depth) {
  uint64_t index;
  JMP_RETURN_IF_ERROR(r.VarInt(&index));
  return AttrAt(index, depth);
}

StatusOr<const Type*> AttrTypeTable::ReadTypeRef(ByteReader& r, int depth) {
  uint64_t index;
  JMP_RETURN_IF_ERROR(r.VarInt(&index));
  return TypeAt(index, depth);
}

StatusOr<const Attr*> AttrTypeTable::AttrAt(uint64_t index, int depth) {
  if (index >= attr_entries_.size())
    return InvalidArgument("malformed artifact: attribute index " + std::to_string(index) + " out of range");
  if (attrs_[index]) return attrs_[index].get();
  if (attr_busy_[index] || depth > kMaxNesting)
    return InvalidArgument("malformed artifact: attribute " + std::to_string(index) +
                           " refers to itself or nests too deeply");
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
  } else if (names_.IsDialect(e.dialect, "vhlo")) {
    status = DecodeVhloAttr(*this, r, attr.get(), depth + 1);
  } else if (names_.IsDialect(e.dialect, "builtin")) {
    status = DecodeBuiltinAttr(r, attr.get(), depth + 1);
  } else if (names_.IsDialect(e.dialect, "sdy")) {
    status = DecodeSdyAttr(r, attr.get(), depth + 1);
  } else {
    // Another dialect's attribute (sdy shardings, ...): kept opaque; nothing we lower reads it.
    attr->kind = Attr::Kind::kUnit;
    attr->s = "attribute of dialect " + names_.DialectName(e.dialect);
  }
  attr_busy_[index] = 0;
  JMP_RETURN_IF_ERROR(status);
  attrs_[index] = std::move(attr);
  return attrs_[index].get();
}

// StableHLO's bytecode code for its token type (the only type of that dialect).
constexpr uint64_t kStablehloTokenType = 0;

StatusOr<const Type*> AttrTypeTable::TypeAt(uint64_t index, int depth) {
  if (index >= type_entries_.size())
    return InvalidArgument("malformed artifact: type index " + std::to_string(index) + " out of range");
  if (types_[index]) return types_[index].get();
  if (type_busy_[index] || depth > kMaxNesting)
    return InvalidArgument("malformed artifact: type " + std::to_string(index) +
                           " refers to itself or nests too deeply");
  const Entry& e = type_entries_[index];
  ByteReader r(e.data, data_, "type " + std::to_string(index));
  auto type = std::make_unique<Type>();
  type_busy_[index] = 1;
  Status status;
  if (e.custom && names_.IsDialect(e.dialect, "vhlo")) {
    status = DecodeVhloType(*this, r, type.get(), depth + 1);
  } else if (e.custom && names_.IsDialect(e.dialect, "builtin")) {
    status = DecodeBuiltinType(r, type.get(), depth + 1);
  } else if (uint64_t code = 1; e.custom && names_.IsDialect(e.dialect, "stablehlo") && r.VarInt(&code).ok() &&
                                code == kStablehloTokenType) {
    // Shardy's ops keep StableHLO's own types (a manual computation threading a token).
    type->kind = Type::Kind::kToken;
    type->dtype = DType::kBool;
    type->shape = {0};
  } else {
    type->kind = Type::Kind::kOther;
    type->other = e.custom ? "type of dialect " + names_.DialectName(e.dialect)
                           : std::string(reinterpret_cast<const char*>(e.data.data),
                                         strnlen(reinterpret_cast<const char*>(e.data.data), e.data.size));
  }
  type_busy_[index] = 0;
  JMP_RETURN_IF_ERROR(status);
  types_[index] = std::move(type);
  return types_[index].get();
}

Status SetScalarType(DType dtype, Type* out) {
  out->kind = Type::Kind::kTensor;
  out->dtype = dtype;
  out->shape.clear();
  return Status::Ok();
}

Status SetComplexType(const Type& element, Type* out) {
  if (element.kind == Type::Kind::kTensor && element.shape.empty()) {
    if (element.dtype == DType::kF32) return SetScalarType(DType::kC64, out);
    if (element.dtype == DType::kF64) return SetScalarType(DType::kC128, out);
  }
  out->kind = Type::Kind::kOther;
  out->other = "complex<" + element.ToString() + ">";
  return Status::Ok();
}

// MLIR's builtin type codes (BuiltinDialectBytecode.td); the ones a tensor of ours can hold.
Status AttrTypeTable::DecodeBuiltinType(ByteReader& r, Type* out, int depth) {
  enum : uint64_t {
    kInteger = 0,
    kIndex = 1,
    kBFloat16 = 3,
    kFloat16 = 4,
    kFloat32 = 5,
    kFloat64 = 6,
    kComplex = 9,
    kRankedTensor = 13,
    kRankedTensorWithEncoding = 14,
  };
  uint64_t code;
  JMP_RETURN_IF_ERROR(r.VarInt(&code));
  auto other = [out](std::string what) {
    out->kind = Type::Kind::kOther;
    out->other = std::move(what);
    return Status::Ok();
  };
  switch (code) {
    case kInteger: {  // width << 2 | signedness (0 signless, 1 signed, 2 unsigned)
      uint64_t v;
      JMP_RETURN_IF_ERROR(r.VarInt(&v));
      const int width = static_cast<int>(std::min<uint64_t>(v >> 2, 1024));
      const bool is_unsigned = (v & 3) == 2;
      if (width == 1) return SetScalarType(DType::kBool, out);
      const DType d =
          width >= 8
              ? FindDType(is_unsigned ? DTypeClass::kUnsignedInt : DTypeClass::kSignedInt, width, DType::kBool)
              : FindDType(is_unsigned ? DTypeClass::kSubByteUnsigned : DTypeClass::kSubByteSigned, width, DType::kBool);
      if (d != DType::kBool) return SetScalarType(d, out);
      return other("i" + std::to_string(width));
    }
    case kIndex: return SetScalarType(DType::kI64, out);
    case kBFloat16: return SetScalarType(DType::kBF16, out);
    case kFloat16: return SetScalarType(DType::kF16, out);
    case kFloat32: return SetScalarType(DType::kF32, out);
    case kFloat64: return SetScalarType(DType::kF64, out);
    case kComplex: {
      JMP_ASSIGN_OR_RETURN(const Type* element, ReadTypeRef(r, depth));
      return SetComplexType(*element, out);
    }
    case kRankedTensorWithEncoding: {
      JMP_ASSIGN_OR_RETURN(const Attr* encoding, ReadAttrRef(r, depth));
      (void)encoding;
      [[fallthrough]];
    }
    case kRankedTensor: return ReadRankedTensor(*this, r, out, depth);
    default: return other("a builtin type (code " + std::to_string(code) + ")");
  }
}

StatusOr<const Attr*> AttrTypeTable::DictValue(const Attr& entry) {
  if (entry.kind == Attr::Kind::kUnit && entry.s == kAttrIndexRef) return AttrAt(static_cast<uint64_t>(entry.i), 0);
  return &entry;
}

// Shardy's bytecode (its dialect's attribute codes): each attribute a code, then its parameters; nested
// attributes by reference, strings by their index in the string section.
Status AttrTypeTable::DecodeSdyAttr(ByteReader& r, Attr* out, int depth) {
  enum : uint64_t {
    kManualAxes = 0,
    kMeshAxis = 1,
    kMesh = 2,
    kSubAxisInfo = 3,
    kAxisRef = 4,
    kDimSharding = 5,
    kShardingV1 = 6,
    kPerValueV1 = 7,
    kShardingV2 = 15,
    kPerValueV2 = 16,
    kShardingV3 = 17,
  };
  uint64_t code;
  JMP_RETURN_IF_ERROR(r.VarInt(&code));
  out->kind = Attr::Kind::kString;
  auto quoted = [](std::string_view s) { return "\"" + std::string(s) + "\""; };
  // A list: its count, then each element by reference, as text joined by ", ".
  auto list = [&](std::string* text) -> Status {
    uint64_t n;
    JMP_RETURN_IF_ERROR(r.Count(&n));
    for (uint64_t i = 0; i < n; ++i) {
      JMP_ASSIGN_OR_RETURN(const Attr* a, ReadAttrRef(r, depth));
      if (a->kind != Attr::Kind::kString) return r.Error("a Shardy attribute holds one it does not know");
      *text += (i ? ", " : "") + a->s;
    }
    return Status::Ok();
  };
  switch (code) {
    case kManualAxes: {  // Array<StringAttr>
      uint64_t n;
      JMP_RETURN_IF_ERROR(r.Count(&n));
      std::string text = "#sdy<manual_axes{";
      for (uint64_t i = 0; i < n; ++i) {
        JMP_ASSIGN_OR_RETURN(const Attr* a, ReadAttrRef(r, depth));
        text += (i ? ", " : "") + quoted(a->s);
      }
      out->s = text + "}>";
      return Status::Ok();
    }
    case kMeshAxis: {  // name, size
      JMP_ASSIGN_OR_RETURN(std::string_view name, names_.ReadStringRef(r));
      int64_t size;
      JMP_RETURN_IF_ERROR(r.SignedVarInt(&size));
      out->s = quoted(name) + "=" + std::to_string(size);
      return Status::Ok();
    }
    case kMesh: {  // axes, device_ids
      std::string text = "#sdy.mesh<[";
      JMP_RETURN_IF_ERROR(list(&text));
      text += "]";
      uint64_t n;
      JMP_RETURN_IF_ERROR(r.Count(&n));
      if (n) {
        text += ", device_ids=[";
        for (uint64_t i = 0; i < n; ++i) {
          int64_t id;
          JMP_RETURN_IF_ERROR(r.SignedVarInt(&id));
          text += (i ? ", " : "") + std::to_string(id);
        }
        text += "]";
      }
      out->s = text + ">";
      return Status::Ok();
    }
    case kSubAxisInfo: {  // pre_size, size
      int64_t pre, size;
      JMP_RETURN_IF_ERROR(r.SignedVarInt(&pre));
      JMP_RETURN_IF_ERROR(r.SignedVarInt(&size));
      out->s = "(" + std::to_string(pre) + ")" + std::to_string(size);
      return Status::Ok();
    }
    case kAxisRef: {  // name, optional sub-axis
      JMP_ASSIGN_OR_RETURN(std::string_view name, names_.ReadStringRef(r));
      out->s = quoted(name);
      uint64_t index;
      bool present;
      JMP_RETURN_IF_ERROR(r.VarIntWithFlag(&index, &present));
      if (present) {
        JMP_ASSIGN_OR_RETURN(const Attr* sub, AttrAt(index, depth));
        out->s += ":" + sub->s;
      }
      return Status::Ok();
    }
    case kDimSharding: {  // axes, is_closed (one byte, not a varint), optional priority
      std::string text = "{";
      JMP_RETURN_IF_ERROR(list(&text));
      uint8_t closed;
      JMP_RETURN_IF_ERROR(r.Byte(&closed));
      if (!closed) text += text.size() > 1 ? ", ?" : "?";
      text += "}";
      uint64_t priority;
      bool present;
      JMP_RETURN_IF_ERROR(r.VarIntWithFlag(&priority, &present));
      if (present) text += "p" + std::to_string(priority);
      out->s = text;
      return Status::Ok();
    }
    case kShardingV1:
    case kShardingV2:
    case kShardingV3: {  // mesh or @name, dims, replicated axes[, unreduced axes[, reduction]]
      JMP_ASSIGN_OR_RETURN(const Attr* mesh, ReadAttrRef(r, depth));
      std::string text = "#sdy.sharding<";
      if (mesh->kind == Attr::Kind::kSymbol)
        text += "@" + mesh->s;
      else if (mesh->kind == Attr::Kind::kString && mesh->s.rfind("#sdy.mesh", 0) == 0)
        text += mesh->s.substr(5);  // "mesh<...>"
      else
        return r.Error("a Shardy sharding without a mesh");
      text += ", [";
      JMP_RETURN_IF_ERROR(list(&text));
      text += "]";
      std::string replicated;
      JMP_RETURN_IF_ERROR(list(&replicated));
      if (!replicated.empty()) text += ", replicated={" + replicated + "}";
      if (code != kShardingV1) {
        std::string unreduced;
        JMP_RETURN_IF_ERROR(list(&unreduced));
        if (!unreduced.empty()) text += ", unreduced={" + unreduced + "}";
      }
      out->s = text + ">";
      return Status::Ok();
    }
    case kPerValueV1:
    case kPerValueV2: {
      std::string text = "#sdy.sharding_per_value<[";
      JMP_RETURN_IF_ERROR(list(&text));
      out->s = text + "]>";
      return Status::Ok();
    }
    default:
      out->kind = Attr::Kind::kUnit;
      out->s = "attribute of dialect sdy";
      return Status::Ok();
  }
}

Status AttrTypeTable::DecodeBuiltinAttr(ByteReader& r, Attr* out, int depth) {
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
      JMP_ASSIGN_OR_RETURN(std::string_view s, names_.ReadStringRef(r));
      out->kind = Attr::Kind::kString;
      out->s = std::string(s);
      return Status::Ok();
    }
    case kBDictionary: {
      uint64_t n;
      JMP_RETURN_IF_ERROR(r.Count(&n, 2));
      out->kind = Attr::Kind::kDict;
      for (uint64_t i = 0; i < n; ++i) {
        // Values are decoded only when an op asks for them (DictValue): keep the indices here.
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
    case kBUnit: out->kind = Attr::Kind::kUnit; return Status::Ok();
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

std::string AttrTypeTable::Location(uint64_t index, int depth) {
  if (depth > 32 || index >= attr_entries_.size()) return "";
  auto cached = locations_.find(index);
  if (cached != locations_.end()) return cached->second;
  const Entry& e = attr_entries_[index];
  if (!e.custom || !names_.IsDialect(e.dialect, "builtin")) return "";
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
    case kBFileLineColRange: result = file_line_col(); break;
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
    default: break;
  }
  locations_[index] = result;
  return result;
}

}  // namespace jmp::shlo
