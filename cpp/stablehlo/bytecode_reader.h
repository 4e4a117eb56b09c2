// MLIR bytecode, the container a VHLO portable artifact travels in: the header, the section table, the
// string, dialect, op-name and properties tables, and the IR section's nesting of regions, blocks and
// value numbers. Nothing here knows what an op means: an OpSink (vhlo_normalize.h) decides that, and
// this reader hands it each op as the bytecode holds it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "stablehlo/byte_reader.h"
#include "stablehlo/bytecode_attrs.h"
#include "stablehlo/ir.h"

namespace jmp::shlo {

// Where an op sits.
struct OpPlace {
  Func* func = nullptr;    // whose values it defines and uses; none at module level
  Block* block = nullptr;  // the block being read
  bool func_body = false;  // `block` is the body of `func` itself, not of a region nested in it
};

// One op as the bytecode holds it, up to its regions; its results are already defined in place.func.
struct EncodedOp {
  std::string_view dialect;  // "vhlo", "builtin", "sdy"
  std::string_view name;     // "add_v1"
  std::string full_name;     // "vhlo.add_v1"
  bool registered = true;    // false for an op its dialect did not know when writing
  size_t offset = 0;         // of its first byte in the artifact
  OpPlace place;
  AttrMap attrs;              // the dictionary entries the sink kept, then the properties it named
  std::string location;       // "file.py:12:3", or ""
  std::vector<int> operands;  // value ids in place.func
  std::vector<int> results;
};

class BytecodeReader;
struct ValueScope;

// The regions of the op just read, which its sink reads (once) when it knows whose values they hold.
class RegionReader {
 public:
  // Reads every region into `regions`, numbering their values in `func` (none: regions of module-level
  // ops, which may define no values).
  Status Read(std::vector<Region>* regions, Func* func, bool func_body);
  // An error at the current position of the IR.
  Status Error(const std::string& message) const;

 private:
  friend class BytecodeReader;
  RegionReader(BytecodeReader& reader, ByteReader& r, ValueScope& scope, std::string op_name, int depth, uint64_t count,
               bool isolated)
      : reader_(reader),
        r_(r),
        scope_(scope),
        op_name_(std::move(op_name)),
        depth_(depth),
        count_(count),
        isolated_(isolated) {}

  BytecodeReader& reader_;
  ByteReader& r_;
  ValueScope& scope_;
  std::string op_name_;
  int depth_;
  uint64_t count_;
  bool isolated_;
};

// Gives ops their meaning (vhlo_normalize.h).
class OpSink {
 public:
  virtual ~OpSink() = default;
  // Whether an entry of an op's attribute dictionary is wanted; the others are never decoded.
  virtual bool KeepAttribute(const std::string& name) const = 0;
  // The attribute names a registered op's properties hold, in the order they are stored; nullptr when
  // nothing in them is wanted.
  virtual const std::vector<std::string_view>* PropertyNames(const EncodedOp& op) const = 0;
  // The rest of the op: what it becomes, and its regions read through `regions`.
  virtual Status Finish(EncodedOp& op, RegionReader& regions) = 0;
};

class BytecodeReader {
 public:
  // `data` must outlive the reader and everything read from it.
  BytecodeReader(const uint8_t* data, size_t size) : data_(data), size_(size), attrs_(data, names_) {}
  BytecodeReader(const BytecodeReader&) = delete;
  BytecodeReader& operator=(const BytecodeReader&) = delete;

  // The magic number, the bytecode version and the producer string.
  Status ReadHeader();
  std::string_view producer() const { return producer_; }
  // The section table, then every section but the IR.
  Status ReadSections();
  // Walks the IR section, handing each op to `sink`.
  Status ReadIR(OpSink& sink);

 private:
  friend class RegionReader;
  struct OpName {
    size_t dialect = 0;
    std::string_view name;
    bool registered = true;
  };

  Status ReadStrings(Span s);
  Status ReadDialects(Span s);
  Status ReadProperties(Span s);

  Status ReadBlockOps(ByteReader& r, ValueScope& scope, uint64_t num_ops, const OpPlace& place, int depth);
  Status ReadRegion(ByteReader& r, ValueScope& scope, Region* region, Func* func, int depth, bool func_body);
  Status ReadBlockHeader(ByteReader& r, ValueScope& scope, uint64_t* num_ops, Block* block, Func* func);
  Status DefineValues(ByteReader& r, ValueScope& scope, size_t n, const std::vector<Type>& types, std::vector<int>* ids,
                      Func* func);
  StatusOr<int> Operand(ByteReader& r, ValueScope& scope, Func* func);
  Status SkipUseListOrders(ByteReader& r, uint64_t range_size);
  Status ReadOp(ByteReader& r, ValueScope& scope, const OpPlace& place, int depth);

  const uint8_t* data_;
  size_t size_;
  uint64_t version_ = 0;
  std::string_view producer_;
  Span section_table_;  // what follows the header
  Span ir_;
  BytecodeNames names_;
  AttrTypeTable attrs_;
  std::vector<OpName> op_names_;
  Span props_;
  std::vector<size_t> props_offsets_;
  OpSink* sink_ = nullptr;  // during ReadIR
};

}  // namespace jmp::shlo
