// What this machine's Metal side is known to get wrong, and the switch that makes it wrong on purpose.
// The self-check (cpp/check) compares every (op kind, dtype) the Metal executor runs with the host
// executor and records the pairs that disagree; jax_metal_plugin passes that record to placement in
// JAX_METAL_AVOID, and placement sends those ops to the host executor. JAX_METAL_INJECT_FAULTS makes
// the Metal side (the Metal executor on a Mac, its stand-in in placed mode) corrupt the results of
// given pairs, so that the whole loop is proven where no Mac is at hand.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>

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

// "Add:float16,Sort:bfloat16" (spaces ignored, empty items skipped); an unknown op kind or dtype is an
// error naming it.
StatusOr<std::set<OpDTypePair>> ParsePairs(std::string_view text);
std::string FormatPairs(const std::set<OpDTypePair>& pairs);

// Pairs placement keeps off Metal: JAX_METAL_AVOID, unless JAX_METAL_CAPABILITIES=ignore. Read on every
// call (placement runs once per compile); a malformed value is ignored, with one message on stderr.
bool MetalAvoids(mps::OpKind kind, DType dtype);

// JAX_METAL_INJECT_FAULTS's pairs (empty when unset or malformed; malformed: one message on stderr).
std::set<OpDTypePair> InjectedFaults();

// The graph with every result of each op whose (kind, OpDType) is in `faults` corrupted: a number gets
// one added (complex: 1 + 0i), a bool is negated; subgraphs too. Consumers and the graph's outputs
// read the corrupted values.
mps::Graph WithFaults(const mps::Graph& graph, const std::set<OpDTypePair>& faults);

// The Metal side as it runs: `device` compiling each graph WithFaults(graph, InjectedFaults()), or
// `device` itself when no fault is injected.
std::unique_ptr<Executor> WithInjectedFaults(std::unique_ptr<Executor> device);

// The executor Metal segments run on, as JAX_METAL_EXECUTOR chooses (exec/executor.h): the Metal
// executor over MPSGraph (a Mac's default), the Metal executor over the stand-in (elsewhere's default),
// or in placed mode a host executor standing in for it, each with the injected faults; in host mode (no
// Metal side) a plain host executor. `side` gets which: "metal", "standin", "placed" or "host".
StatusOr<std::unique_ptr<Executor>> CreateMetalSideExecutor(std::string* side = nullptr);
// Which of those JAX_METAL_EXECUTOR and this machine choose, without making it.
StatusOr<std::string> MetalSideName();

}  // namespace jmp::exec
