#include <cstdlib>
#include <string>

#include "exec/executor.h"

namespace jmp::exec {

StatusOr<std::unique_ptr<Executor>> CreateDefaultExecutor() {
  const char* env = std::getenv("JAX_METAL_EXECUTOR");
  std::string choice = env ? env : "";
  if (!choice.empty() && choice != "host" && choice != "metal" && choice != "placed")
    return InvalidArgument("JAX_METAL_EXECUTOR must be 'metal', 'placed' or 'host', not '" + choice + "'");
  if (choice == "host") return CreateHostExecutor();
#ifdef JMP_HAVE_METAL
  if (choice != "placed")
    if (auto metal = CreateMetalExecutor()) return CreateSegmentedExecutor(std::move(metal), CreateHostExecutor());
  if (choice == "metal") return FailedPrecondition("JAX_METAL_EXECUTOR=metal, but this Mac has no Metal device");
#else
  if (choice == "metal")
    return FailedPrecondition("JAX_METAL_EXECUTOR=metal, but this build has no Metal executor (not macOS)");
#endif
  // Placed: the Metal segments go through the emulated command queue, as they would through Metal's
  // (JAX_METAL_EMULATED_QUEUE=0 runs them on the calling thread instead).
  const char* emulate = std::getenv("JAX_METAL_EMULATED_QUEUE");
  if (emulate && std::string(emulate) == "0")
    return CreateSegmentedExecutor(CreateHostExecutor(), CreateHostExecutor());
  return CreateSegmentedExecutor(CreateEmulatedQueueExecutor(CreateHostExecutor()), CreateHostExecutor());
}

}  // namespace jmp::exec
