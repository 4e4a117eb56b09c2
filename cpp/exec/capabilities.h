// What this machine's Metal side is known to get wrong, and the switch that makes it wrong on purpose.
// The self-check (cpp/check) compares every (op kind, dtype) the Metal executor runs with the host
// executor and records the pairs that disagree, crash or hang; jax_metal_plugin passes that record (and
// the note a process that died inside the Metal side left) to placement in JAX_METAL_AVOID, and
// placement sends those ops to the host executor. JAX_METAL_INJECT_FAULTS makes the Metal side (the
// Metal executor on a Mac, its stand-in in placed mode) corrupt the results of given pairs, abort the
// process or block, so that the whole loop is proven where no Mac is at hand.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "exec/executor.h"
#include "mps/graph.h"
#include "support/status.h"

namespace jmp::exec {

using OpDTypePair = std::pair<mps::OpKind, DType>;

// The dtype an op is judged by: its first data operand's (Select: the first branch's; Cast and
// ReinterpretCast: the source's), or its first result's when it has no operand.
DType OpDType(const mps::Graph& graph, const mps::Op& op);

// JAX's spelling of a dtype back to the dtype (support/dtype.h JaxDTypeName; false when unknown).
bool ParseJaxDType(std::string_view name, DType& dtype);

// "Add:float16,Sort:bfloat16" (spaces ignored, empty items skipped); an unknown op kind or dtype, or
// anything after the dtype, is an error naming it.
StatusOr<std::set<OpDTypePair>> ParsePairs(std::string_view text);
std::string FormatPairs(const std::set<OpDTypePair>& pairs);

// The shapes an op's failure may be confined to, for the record and placement: some operand or result
// has no element (MPSGraph has no empty tensors); a dimension is past 2^16; every operand is a scalar.
// kOther is every other op. One class per op, in that order of precedence.
enum class ShapeClass : uint8_t { kOther, kEmpty, kLarge, kRank0 };
inline constexpr int64_t kLargeDimension = int64_t{1} << 16;
ShapeClass ShapeClassOf(const mps::Graph& graph, const mps::Op& op);
std::string_view ShapeClassName(ShapeClass shape);  // "", "empty", "large", "rank0"

// What JAX_METAL_INJECT_FAULTS makes the Metal side do with an op: corrupt its results, abort the
// process when a segment holding it is encoded (as an MPSGraph assertion does), or block there forever
// (as a GPU fault can).
enum class FaultMode : uint8_t { kCorrupt, kAbort, kHang };

// One item of JAX_METAL_AVOID or JAX_METAL_INJECT_FAULTS: "Op:dtype", then optionally a shape class
// ("Add:float16:empty": only ops of that class; without one, every shape) and, for faults, a mode
// ("Multiply:float32:abort"; without one, corrupt).
struct PairRule {
  mps::OpKind kind;
  DType dtype;
  ShapeClass shape = ShapeClass::kOther;  // kOther: every shape
  FaultMode mode = FaultMode::kCorrupt;
  bool Matches(const mps::Graph& graph, const mps::Op& op) const;
};
StatusOr<std::vector<PairRule>> ParseRules(std::string_view text);

// Rules placement keeps off Metal: JAX_METAL_AVOID, unless JAX_METAL_CAPABILITIES=ignore. Read on every
// call (placement runs once per compile); a malformed value is ignored, with one message on stderr.
bool MetalAvoids(const mps::Graph& graph, const mps::Op& op);

// JAX_METAL_INJECT_FAULTS's rules (empty when unset or malformed; malformed: one message on stderr).
std::vector<PairRule> InjectedFaults();

// The graph with every result of each op a corrupting rule of `faults` matches corrupted: a number gets
// one added (complex: 1 + 0i), a bool is negated; subgraphs too. Consumers and the graph's outputs
// read the corrupted values. Rules of other modes are left to WithInjectedFaults.
mps::Graph WithFaults(const mps::Graph& graph, const std::vector<PairRule>& faults);

// The Metal side as it runs: `device` compiling each graph WithFaults(graph, InjectedFaults()), whose
// executables abort or block when they start while the graph holds an op an abort or hang rule
// matches (an op of the graph itself; one in a control-flow body strikes nothing); or `device` itself
// when no fault is injected.
std::unique_ptr<Executor> WithInjectedFaults(std::unique_ptr<Executor> device);

// The executor Metal segments run on, as JAX_METAL_EXECUTOR chooses (exec/executor.h): the Metal
// executor over MPSGraph (a Mac's default), the Metal executor over the stand-in (elsewhere's default),
// or in placed mode a host executor standing in for it, each with the injected faults; in host mode (no
// Metal side) a plain host executor. `side` gets which: "metal", "standin", "placed" or "host".
StatusOr<std::unique_ptr<Executor>> CreateMetalSideExecutor(std::string* side = nullptr);
// Which of those JAX_METAL_EXECUTOR and this machine choose, without making it.
StatusOr<std::string> MetalSideName();

}  // namespace jmp::exec
