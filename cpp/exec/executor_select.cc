#include <cstdlib>
#include <string>

#include "exec/capabilities.h"
#include "exec/executor.h"

namespace jmp::exec {

namespace {

StatusOr<std::string> ExecutorChoice() {
  const char* env = std::getenv("JAX_METAL_EXECUTOR");
  std::string choice = env ? env : "";
  if (!choice.empty() && choice != "host" && choice != "metal" && choice != "placed")
    return InvalidArgument("JAX_METAL_EXECUTOR must be 'metal', 'placed' or 'host', not '" + choice + "'");
  return choice;
}

}  // namespace

StatusOr<std::unique_ptr<Executor>> CreateMetalSideExecutor(bool* metal) {
  JMP_ASSIGN_OR_RETURN(std::string choice, ExecutorChoice());
  if (metal) *metal = false;
#ifdef JMP_HAVE_METAL
  if (choice != "placed" && choice != "host")
    if (auto device = CreateMetalExecutor()) {
      if (metal) *metal = true;
      return WithInjectedFaults(std::move(device));
    }
  if (choice == "metal") return FailedPrecondition("JAX_METAL_EXECUTOR=metal, but this Mac has no Metal device");
#else
  if (choice == "metal")
    return FailedPrecondition("JAX_METAL_EXECUTOR=metal, but this build has no Metal executor (not macOS)");
#endif
  if (choice == "host") return CreateHostExecutor();  // no Metal side, so nothing to corrupt
  return WithInjectedFaults(CreateHostExecutor());
}

StatusOr<std::unique_ptr<Executor>> CreateDefaultExecutor() {
  JMP_ASSIGN_OR_RETURN(std::string choice, ExecutorChoice());
  if (choice == "host") return CreateHostExecutor();
  JMP_ASSIGN_OR_RETURN(std::unique_ptr<Executor> device, CreateMetalSideExecutor());
  return CreateSegmentedExecutor(std::move(device), CreateHostExecutor());
}

}  // namespace jmp::exec
