#include <cstdlib>
#include <string>

#include "exec/capabilities.h"
#include "exec/crash_note.h"
#include "exec/executor.h"
#include "exec/metal/metal_executor.h"
#include "exec/standin/standin.h"

namespace jmp::exec {

namespace {

StatusOr<std::string> ExecutorChoice() {
  const char* env = std::getenv("JAX_METAL_EXECUTOR");
  std::string choice = env ? env : "";
  if (!choice.empty() && choice != "host" && choice != "metal" && choice != "standin" && choice != "placed")
    return InvalidArgument("JAX_METAL_EXECUTOR must be 'metal', 'standin', 'placed' or 'host', not '" + choice + "'");
  return choice;
}

// Placed mode's stand-in for Metal: a host executor behind the emulated command queue, as Metal segments
// run behind Metal's (JAX_METAL_EMULATED_QUEUE=0 runs them without it).
std::unique_ptr<Executor> PlacedDevice() {
  const char* emulate = std::getenv("JAX_METAL_EMULATED_QUEUE");
  if (emulate && std::string(emulate) == "0") return CreateHostExecutor();
  return CreateEmulatedQueueExecutor(CreateHostExecutor());
}

// The Metal executor's own logic over the strict stand-in of MPSGraph and Metal. The stand-in has no
// Metal Shading Language compiler, so a user kernel's segment runs its reference implementation.
std::unique_ptr<Executor> StandinDevice() {
  return CreateMetalExecutorOn(standin::CreateStandinDevice(), CreateHostExecutor());
}

}  // namespace

StatusOr<std::unique_ptr<Executor>> CreateMetalSideExecutor(std::string* side) {
  JMP_ASSIGN_OR_RETURN(std::string choice, ExecutorChoice());
  auto named = [&](const char* name) {
    if (side) *side = name;
  };
#ifdef JMP_HAVE_METAL
  if (choice.empty() || choice == "metal")
    if (auto device = SystemDefaultMetalDevice()) {
      named("metal");
      return WithInjectedFaults(CreateMetalExecutorOn(std::move(device)));
    }
  if (choice == "metal") return FailedPrecondition("JAX_METAL_EXECUTOR=metal, but this Mac has no Metal device");
#else
  if (choice == "metal")
    return FailedPrecondition("JAX_METAL_EXECUTOR=metal, but this build has no Metal executor (not macOS)");
#endif
  if (choice == "host") {
    named("host");
    return CreateHostExecutor();  // no Metal side, so nothing to corrupt
  }
  if (choice == "placed") {
    named("placed");
    return WithInjectedFaults(PlacedDevice());
  }
  named("standin");
  return WithInjectedFaults(StandinDevice());
}

StatusOr<std::string> MetalSideName() {
  JMP_ASSIGN_OR_RETURN(std::string choice, ExecutorChoice());
#ifdef JMP_HAVE_METAL
  if (choice.empty() && SystemDefaultMetalDevice()) return std::string("metal");
#endif
  return choice.empty() ? std::string("standin") : choice;
}

StatusOr<std::unique_ptr<Executor>> CreateDefaultExecutor() {
  JMP_ASSIGN_OR_RETURN(std::string choice, ExecutorChoice());
  if (choice == "host") return CreateHostExecutor();
  JMP_ASSIGN_OR_RETURN(std::unique_ptr<Executor> device, CreateMetalSideExecutor());
  // A user's program that dies inside the Metal side leaves a note (the self-check, which runs each case
  // in a process of its own, records its crashes itself).
  return CreateSegmentedExecutor(WithCrashNotes(std::move(device)), CreateHostExecutor());
}

}  // namespace jmp::exec
