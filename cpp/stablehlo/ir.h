// What the reader produces from a VHLO portable artifact: StableHLO ops in their newest form, with
// value ids, types and attributes. The lowering (cpp/mps) reads this and nothing else.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "support/dtype.h"
#include "support/status.h"

namespace jmp::shlo {

struct Type {
  enum class Kind : uint8_t { kTensor, kTuple, kToken, kOther };
  Kind kind = Kind::kTensor;
  DType dtype = DType::kF32;   // kTensor; kToken: bool, with shape [0] (a token carries no data)
  std::vector<int64_t> shape;  // kTensor: static dims (a dynamic dim is rejected by the reader)
  std::vector<Type> elements;  // kTuple
  std::string other;           // kOther: its VHLO name, for error messages

  int64_t NumElements() const;
  std::string ToString() const;  // "tensor<2x3xf32>", "tuple<...>", "!stablehlo.token"
};

struct Attr;
using AttrMap = std::map<std::string, Attr>;

// A VHLO attribute. Integer lists (broadcast_dimensions, permutation, dimension numbers' fields,
// start_indices, ...) arrive as kInts whatever VHLO used to encode them (tensor_v1 of i64, array of
// integers, dense array); dense element constants (`value` of stablehlo.constant) stay kTensor.
struct Attr {
  enum class Kind : uint8_t {
    kUnit,
    kBool,
    kInt,
    kFloat,
    kString,
    kSymbol,
    kEnum,
    kType,
    kInts,
    kTensor,
    kArray,
    kDict,
  };
  Kind kind = Kind::kUnit;
  bool b = false;  // kBool
  int64_t i = 0;   // kInt; kEnum: the enum's numeric value
  double f = 0;    // kFloat
  std::string s;   // kString; kSymbol: the name without '@'; kEnum: StableHLO spelling ("LT", "TOTALORDER", "RFFT")
  std::vector<int64_t> ints;  // kInts
  Type type;  // kType; kTensor: the tensor's type; kInt/kFloat: the element type; kInts from a tensor: its type
  std::vector<uint8_t> data;  // kTensor: little-endian elements, i1 one byte per element (0/1), i4/ui4 one byte per
                              // element holding the value (sign-/zero-extended), f8 one byte (its bits), every element
                              // present (small splats expanded), or one element when `splat`
  // kTensor: `data` is the one element of a large splat (the lowering broadcasts a scalar; expanded, a
  // polynomial's coefficients over millions of float64 elements would cost gigabytes to read).
  bool splat = false;
  std::vector<uint8_t> ExpandedData() const {  // kTensor: every element present
    if (!splat) return data;
    std::vector<uint8_t> all;
    const int64_t count = type.NumElements();
    all.reserve(static_cast<size_t>(count) * data.size());
    for (int64_t i = 0; i < count; ++i) all.insert(all.end(), data.begin(), data.end());
    return all;
  }
  std::vector<Attr> array;  // kArray
  AttrMap dict;             // kDict; also the fields of structured attributes such as
                            // dot_dimension_numbers { lhs_batching_dimensions: kInts, ... }

  std::string ToString() const;
};

struct Region;

struct Op {
  std::string name;           // "stablehlo.add", "stablehlo.return", "func.return", "func.call"
  std::vector<int> operands;  // value ids
  std::vector<int> results;   // value ids
  AttrMap attrs;              // inherent and kept discardable attributes, by name
  std::vector<Region> regions;
  std::string location;  // "file.py:12:3" when the artifact says so, else ""

  const Attr* Find(const std::string& attr_name) const;
};

struct Block {
  std::vector<int> args;  // value ids
  std::vector<Op> ops;
};

struct Region {
  std::vector<Block> blocks;
};

struct Func {
  std::string name;
  bool is_public = false;
  std::vector<Type> arg_types;
  std::vector<Type> result_types;
  // Per argument / per result: its attributes (arg_attrs / res_attrs), without other dialects' (sdy.*,
  // mhlo.*) except `mhlo.memory_kind` (kString: the memory JAX places the value in, "pinned_host").
  // @main's arguments carry buffer donation: `tf.aliasing_output` (kInt, the result that may reuse the
  // argument's memory) and `jax.buffer_donor` (kBool). Empty maps when the function has none.
  std::vector<AttrMap> arg_attrs;
  std::vector<AttrMap> result_attrs;
  // Per argument / per result: its `mhlo.sharding` (an HloSharding string, "{devices=[2]<=[2]}"), or ""
  // when it has none. Programs for several devices read them.
  std::vector<std::string> arg_shardings;
  std::vector<std::string> result_shardings;
  // Per value inside a nested region (a loop's body): the sharding an annotation removed before lowering
  // stated for it (passes/region_shardings.h), as its text reads (#sdy.sharding<...> or an HloSharding).
  std::map<int, std::string> region_shardings;
  Region body;
  // Value ids are unique across the function and every region nested in it; this gives each one's type.
  std::vector<Type> value_types;
};

struct Module {
  std::string producer;        // "StableHLO_v1.9.0"
  int version[3] = {0, 0, 0};  // from the producer string
  std::vector<Func> funcs;
  // The Shardy meshes the module's manual computations name, as text ("{mesh = #sdy.mesh<[\"x\"=4]>}",
  // the module's frontend attribute xla.sdy.meshes); "" when it has none.
  std::string sdy_meshes;

  const Func* FindFunc(const std::string& name) const;  // "main" is the entry point
};

// Buffer donation as @main declares it: per argument, the result it aliases (tf.aliasing_output, or for a
// jax.buffer_donor the first result of its size no other argument takes) or -1, and whether it is consumed.
struct Donation {
  std::vector<int64_t> aliased_output;
  std::vector<bool> donated;
};
// Validates what an untrusted artifact says: an alias names an existing result of the argument's type,
// and no result is aliased twice.
StatusOr<Donation> DonationOf(const Func& main);

// The newest StableHLO version the reader handles; advertised to JAX as stablehlo_current_version.
inline constexpr int64_t kNewestVersion[3] = {1, 13, 0};
inline constexpr int64_t kOldestVersion[3] = {0, 9, 0};

// Reads a VHLO portable artifact. Input is untrusted: every failure is a status naming what and where.
StatusOr<Module> ReadArtifact(const uint8_t* data, size_t size);

// Our IR as text, one op a line, MLIR-like; stable enough for tests to search in.
std::string PrintModule(const Module& module);

}  // namespace jmp::shlo
