// The lowering: StableHLO (as read by cpp/stablehlo) into the MPS op graph. Everything StableHLO can
// say that MPSGraph cannot is decomposed here, in portable code.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mps/graph.h"
#include "stablehlo/ir.h"
#include "support/status.h"

namespace jmp::mps {

// What a caller of the lowered program sees of @main, as the module declares it: the graph computes
// on narrow types (int4, float8) in their storage type, but buffers hold them as declared.
struct Signature {
  std::vector<DType> input_dtypes;   // per graph input
  std::vector<DType> output_dtypes;  // per graph output
  // Per graph output, the memory kind @main places it in (mhlo.memory_kind: jit's out_shardings with
  // a memory kind); "device" when unmarked.
  std::vector<std::string> output_memory_kinds;
  // Buffer donation, per input: the output that may reuse the input's memory (tf.aliasing_output) or
  // -1, and whether the input is donated at all (aliased or jax.buffer_donor).
  std::vector<int64_t> aliased_output;
  std::vector<bool> donated;
};

struct LoweredProgram {
  Graph graph;  // verified
  Signature signature;
};

// Lowers the module's public "main" function (func.call is inlined).
StatusOr<LoweredProgram> LowerModule(const shlo::Module& module);

}  // namespace jmp::mps
