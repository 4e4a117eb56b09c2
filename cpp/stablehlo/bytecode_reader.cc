// The MLIR bytecode container and the IR section's structure (MLIR's BytecodeFormat.md): every length,
// count, index and offset is checked against the data, as the input is untrusted.
#include "stablehlo/bytecode_reader.h"

#include <cstring>
#include <optional>

namespace jmp::shlo {

// Value numbering of one isolated-from-above scope (MLIR's ValueScope): regions push a range of
// slots; operands index the whole vector.
struct ValueScope {
  std::vector<int> values;       // slot -> our value id, -1 until touched
  std::vector<size_t> next_ids;  // per open region: the next slot to define
};

namespace {

// Bytecode versions (MLIR's Encoding.h) whose features change the layout we read.
constexpr uint64_t kDialectVersioning = 1;
constexpr uint64_t kLazyLoading = 2;
constexpr uint64_t kUseListOrdering = 3;
constexpr uint64_t kElideUnknownBlockArgLocation = 4;
constexpr uint64_t kNativePropertiesEncoding = 5;
constexpr uint64_t kNewestBytecodeVersion = 6;

enum SectionId : uint8_t {
  kString = 0,
  kDialect = 1,
  kAttrType = 2,
  kAttrTypeOffset = 3,
  kIR = 4,
  kResource = 5,
  kResourceOffset = 6,
  kDialectVersions = 7,
  kProperties = 8,
  kNumSections = 9
};

int NewValue(Func* func, const Type& type) {
  func->value_types.push_back(type);
  return static_cast<int>(func->value_types.size()) - 1;
}

}  // namespace

// ---- header and sections

Status BytecodeReader::ReadHeader() {
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
  JMP_RETURN_IF_ERROR(r.NulTerminated(&producer_));
  section_table_ = Span{data_ + r.offset(), r.remaining()};
  return Status::Ok();
}

Status BytecodeReader::ReadSections() {
  ByteReader r(section_table_, data_, "header");
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
  JMP_RETURN_IF_ERROR(attrs_.ReadOffsets(*sections[kAttrTypeOffset], *sections[kAttrType]));
  ir_ = *sections[kIR];
  return Status::Ok();
}

Status BytecodeReader::ReadStrings(Span s) {
  ByteReader r(s, data_, "string section");
  uint64_t count;
  JMP_RETURN_IF_ERROR(r.Count(&count));
  names_.strings.resize(count);
  size_t end = s.size;
  for (size_t i = count; i-- > 0;) {
    uint64_t length;
    JMP_RETURN_IF_ERROR(r.VarInt(&length));
    if (length == 0 || length > end) return r.Error("string length out of range");
    size_t start = end - length;
    if (s.data[start + length - 1] != 0) return r.Error("string not NUL-terminated");
    names_.strings[i] = std::string_view(reinterpret_cast<const char*>(s.data + start), length - 1);
    end = start;
  }
  if (s.size - r.remaining() != end) return r.Error("string table sizes do not match the data");
  return Status::Ok();
}

Status BytecodeReader::ReadDialects(Span s) {
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
    JMP_ASSIGN_OR_RETURN(std::string_view name, names_.StringAt(name_index, r));
    names_.dialects.push_back(name);
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
    if (dialect >= names_.dialects.size()) return r.Error("dialect index out of range");
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
      JMP_ASSIGN_OR_RETURN(op.name, names_.StringAt(index, r));
      op_names_.push_back(op);
    }
  }
  return Status::Ok();
}

Status BytecodeReader::ReadProperties(Span s) {
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

// ---- IR

Status BytecodeReader::DefineValues(ByteReader& r, ValueScope& scope, size_t n, const std::vector<Type>& types,
                                    std::vector<int>* ids, Func* func) {
  if (scope.next_ids.empty()) return r.Error("values defined outside any region");
  size_t& next = scope.next_ids.back();
  if (n > scope.values.size() || next > scope.values.size() - n)
    return r.Error("value index outside its region's range");
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

StatusOr<int> BytecodeReader::Operand(ByteReader& r, ValueScope& scope, Func* func) {
  uint64_t index;
  JMP_RETURN_IF_ERROR(r.VarInt(&index));
  if (index >= scope.values.size())
    return r.Error("operand refers to value " + std::to_string(index) + " out of range");
  int& slot = scope.values[index];
  if (slot < 0) slot = NewValue(func, Type{});  // forward reference
  return slot;
}

Status BytecodeReader::SkipUseListOrders(ByteReader& r, uint64_t range_size) {
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

Status BytecodeReader::ReadBlockHeader(ByteReader& r, ValueScope& scope, uint64_t* num_ops, Block* block, Func* func) {
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
        JMP_ASSIGN_OR_RETURN(t, attrs_.TypeAt(index, 0));
        if (has_loc) JMP_RETURN_IF_ERROR(r.VarInt(&index));
      } else {
        JMP_ASSIGN_OR_RETURN(t, attrs_.ReadTypeRef(r, 0));
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

Status BytecodeReader::ReadRegion(ByteReader& r, ValueScope& scope, Region* region, Func* func, int depth,
                                  bool func_body) {
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
    if (status.ok()) status = ReadBlockOps(r, scope, num_ops, OpPlace{func, &region->blocks[b], func_body}, depth);
  }
  scope.values.resize(scope.values.size() - num_values);
  scope.next_ids.pop_back();
  return status;
}

Status BytecodeReader::ReadBlockOps(ByteReader& r, ValueScope& scope, uint64_t num_ops, const OpPlace& place,
                                    int depth) {
  for (uint64_t i = 0; i < num_ops; ++i) JMP_RETURN_IF_ERROR(ReadOp(r, scope, place, depth));
  return Status::Ok();
}

// An op: name, encoding mask, location, then what the mask says is present, in this order; the sink
// decides which attributes are decoded and what the op becomes.
Status BytecodeReader::ReadOp(ByteReader& r, ValueScope& scope, const OpPlace& place, int depth) {
  if (depth > kMaxNesting) return r.Error("regions nest too deeply");
  EncodedOp op;
  op.offset = r.offset();
  op.place = place;
  uint64_t name_index;
  JMP_RETURN_IF_ERROR(r.VarInt(&name_index));
  if (name_index >= op_names_.size()) return r.Error("op name index out of range");
  const OpName& opname = op_names_[name_index];
  op.dialect = opname.dialect < names_.dialects.size() ? names_.dialects[opname.dialect] : "?";
  op.name = opname.name;
  op.registered = opname.registered;
  op.full_name = std::string(op.dialect) + "." + std::string(op.name);
  uint8_t mask;
  JMP_RETURN_IF_ERROR(r.Byte(&mask));
  uint64_t loc_index;
  JMP_RETURN_IF_ERROR(r.VarInt(&loc_index));

  if (mask & 0x01) {  // the attribute dictionary
    JMP_ASSIGN_OR_RETURN(const Attr* dict, attrs_.ReadAttrRef(r, 0));
    if (dict->kind != Attr::Kind::kDict) return r.Error("op attributes are not a dictionary");
    for (const auto& [name, value] : dict->dict) {
      if (!sink_->KeepAttribute(name)) continue;
      JMP_ASSIGN_OR_RETURN(const Attr* v, attrs_.DictValue(value));
      op.attrs[name] = *v;
    }
  }
  if (mask & 0x40) {  // properties
    // For a registered op this indexes the properties table; an unregistered op stores an attribute
    // index instead.
    uint64_t props_index;
    JMP_RETURN_IF_ERROR(r.VarInt(&props_index));
    const std::vector<std::string_view>* names = opname.registered ? sink_->PropertyNames(op) : nullptr;
    if (names) {
      if (props_index >= props_offsets_.size()) return r.Error("properties index out of range");
      ByteReader pr(Span{props_.data + props_offsets_[props_index], props_.size - props_offsets_[props_index]}, data_,
                    "properties of " + op.full_name);
      uint64_t length;
      JMP_RETURN_IF_ERROR(pr.VarInt(&length));
      Span blob;
      JMP_RETURN_IF_ERROR(pr.Bytes(static_cast<size_t>(length), &blob));
      ByteReader br(blob, data_, "properties of " + op.full_name);
      for (std::string_view name : *names) {
        if (br.empty()) break;  // attributes added in later versions of this op form
        JMP_ASSIGN_OR_RETURN(const Attr* a, attrs_.ReadAttrRef(br, 0));
        op.attrs[std::string(name)] = *a;
      }
    }
  }
  std::vector<Type> result_types;
  if (mask & 0x02) {
    uint64_t n;
    JMP_RETURN_IF_ERROR(r.Count(&n));
    for (uint64_t i = 0; i < n; ++i) {
      JMP_ASSIGN_OR_RETURN(const Type* t, attrs_.ReadTypeRef(r, 0));
      result_types.push_back(*t);
    }
  }
  op.location = attrs_.Location(loc_index, 0);
  if (mask & 0x04) {
    uint64_t n;
    JMP_RETURN_IF_ERROR(r.Count(&n));
    if (!place.func) return r.Error("operands outside a function");
    for (uint64_t i = 0; i < n; ++i) {
      JMP_ASSIGN_OR_RETURN(int v, Operand(r, scope, place.func));
      op.operands.push_back(v);
    }
  }
  if (mask & 0x08) {  // successors: none of our ops branches
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
    if (!place.func) return r.Error("results outside a function");
    JMP_RETURN_IF_ERROR(DefineValues(r, scope, result_types.size(), result_types, &op.results, place.func));
  }
  RegionReader regions(*this, r, scope, op.full_name, depth, num_regions, isolated);
  return sink_->Finish(op, regions);
}

// Isolated regions sit in their own IR section (lazy loading) with fresh value numbering.
Status RegionReader::Read(std::vector<Region>* regions, Func* func, bool func_body) {
  regions->resize(count_);
  if (isolated_ && reader_.version_ >= kLazyLoading) {
    uint8_t id;
    Span section;
    JMP_RETURN_IF_ERROR(r_.Section(&id, &section));
    if (id != kIR) return r_.Error("expected an IR section for an isolated region");
    ByteReader sub(section, reader_.data_, "regions of " + op_name_);
    ValueScope fresh;
    for (auto& region : *regions)
      JMP_RETURN_IF_ERROR(reader_.ReadRegion(sub, fresh, &region, func, depth_ + 1, func_body));
    return Status::Ok();
  }
  if (isolated_) {
    ValueScope fresh;
    for (auto& region : *regions)
      JMP_RETURN_IF_ERROR(reader_.ReadRegion(r_, fresh, &region, func, depth_ + 1, func_body));
    return Status::Ok();
  }
  for (auto& region : *regions)
    JMP_RETURN_IF_ERROR(reader_.ReadRegion(r_, scope_, &region, func, depth_ + 1, func_body));
  return Status::Ok();
}

Status RegionReader::Error(const std::string& message) const { return r_.Error(message); }

Status BytecodeReader::ReadIR(OpSink& sink) {
  sink_ = &sink;
  ByteReader ir(ir_, data_, "IR section");
  ValueScope top;
  top.next_ids.push_back(0);
  uint64_t num_ops;
  Block top_block;
  JMP_RETURN_IF_ERROR(ReadBlockHeader(ir, top, &num_ops, &top_block, nullptr));
  Status status = ReadBlockOps(ir, top, num_ops, OpPlace{nullptr, &top_block, false}, 0);
  sink_ = nullptr;
  return status;
}

}  // namespace jmp::shlo
