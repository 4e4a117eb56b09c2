// A compiled program as bytes for JAX's persistent compilation cache, and back. The bytes hold the MPS
// op graph and what the C API reports of the program, plus each executor's compiled form (on a Mac,
// MPSGraph's package of every Metal segment), so that loading skips reading and lowering the StableHLO
// module (and MPSGraph's compile). A header names the format and the plugin build (platform version,
// with the build's hash and executor): bytes of another build, another executor or another format
// are refused with an error, and JAX then compiles afresh.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "exec/executor.h"
#include "pjrt/compile.h"
#include "support/status.h"

namespace jmp::pjrt {

StatusOr<std::string> SerializeProgram(const CompiledProgram& program, const std::string& platform_version);
StatusOr<std::shared_ptr<CompiledProgram>> DeserializeProgram(exec::Executor& executor,
                                                              const std::string& platform_version, const uint8_t* bytes,
                                                              size_t size);

}  // namespace jmp::pjrt
