// The attribute/type section of MLIR bytecode: entries located through the offset section and decoded
// into our Attr/Type on first use, so attributes nothing reads (shardings, frontend attributes) cost
// nothing and can't fail a read. The builtin dialect's encodings are decoded here, VHLO's in
// vhlo_attrs.cc; other dialects' entries stay opaque.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "stablehlo/byte_reader.h"
#include "stablehlo/ir.h"

namespace jmp::shlo {

// The string and dialect tables, which every later section refers to by index.
struct BytecodeNames {
  std::vector<std::string_view> strings;
  std::vector<std::string_view> dialects;

  StatusOr<std::string_view> StringAt(uint64_t index, const ByteReader& r) const;
  StatusOr<std::string_view> ReadStringRef(ByteReader& r) const;
  bool IsDialect(size_t index, std::string_view name) const;
  std::string DialectName(size_t index) const;  // "?" outside the table
};

class AttrTypeTable {
 public:
  // `origin` is the artifact's first byte (offsets in errors count from it).
  AttrTypeTable(const uint8_t* origin, const BytecodeNames& names) : data_(origin), names_(names) {}
  AttrTypeTable(const AttrTypeTable&) = delete;
  AttrTypeTable& operator=(const AttrTypeTable&) = delete;

  // Locates every entry: `offsets` is the attribute/type offset section, `data` the attribute/type section.
  Status ReadOffsets(Span offsets, Span data);

  // `depth` counts the attributes and types being decoded around this one (a limit on nesting).
  StatusOr<const Attr*> AttrAt(uint64_t index, int depth);
  StatusOr<const Type*> TypeAt(uint64_t index, int depth);
  StatusOr<const Attr*> ReadAttrRef(ByteReader& r, int depth);
  StatusOr<const Type*> ReadTypeRef(ByteReader& r, int depth);

  // A builtin dictionary keeps its values undecoded (see DecodeBuiltinAttr); this decodes the value of
  // one of its entries, or returns any other attribute as it is.
  StatusOr<const Attr*> DictValue(const Attr& entry);

  // Best effort: the innermost file:line:col a location attribute leads to, "" when there is none or
  // its encoding is one we don't know (locations never fail a read).
  std::string Location(uint64_t index, int depth = 0);

  const BytecodeNames& names() const { return names_; }

 private:
  struct Entry {
    size_t dialect = 0;
    bool custom = false;  // in its dialect's encoding; else the attribute's (type's) text
    Span data;
  };

  Status DecodeBuiltinAttr(ByteReader& r, Attr* out, int depth);
  // The builtin dialect's types: what VHLO does not convert (a Shardy region's argument types when its
  // body holds no VHLO op) arrives as builtin tensors.
  Status DecodeBuiltinType(ByteReader& r, Type* out, int depth);
  // Shardy's attributes (meshes, shardings, manual axes) as their text ("#sdy.sharding<@mesh, [{\"x\"}]>"),
  // which the lowering parses; other Shardy attributes stay opaque.
  Status DecodeSdyAttr(ByteReader& r, Attr* out, int depth);

  const uint8_t* data_;
  const BytecodeNames& names_;
  std::vector<Entry> attr_entries_, type_entries_;
  std::vector<std::unique_ptr<Attr>> attrs_;
  std::vector<std::unique_ptr<Type>> types_;
  std::vector<uint8_t> attr_busy_, type_busy_;
  std::map<uint64_t, std::string> locations_;
};

// The VHLO dialect's attribute and type encodings (vhlo_attrs.cc): `r` is positioned at the entry's
// code; nested attributes and types are read through `table`.
Status DecodeVhloAttr(AttrTypeTable& table, ByteReader& r, Attr* out, int depth);
Status DecodeVhloType(AttrTypeTable& table, ByteReader& r, Type* out, int depth);
// A ranked tensor's shape and element type reference, as VHLO and the builtin dialect both encode it.
Status ReadRankedTensor(AttrTypeTable& table, ByteReader& r, Type* out, int depth);
// Element types as VHLO and the builtin dialect both decode them: `out` becomes a scalar of `dtype`, or
// complex<`element`>: complex64 (complex128) for a scalar f32 (f64), else kOther naming it.
Status SetScalarType(DType dtype, Type* out);
Status SetComplexType(const Type& element, Type* out);

}  // namespace jmp::shlo
