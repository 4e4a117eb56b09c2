#include "unit_tests/host_graph.h"

namespace jmp::unit {

StatusOr<std::vector<std::vector<uint8_t>>> RunOnHost(const mps::Graph& graph,
                                                      const std::vector<std::vector<uint8_t>>& inputs) {
  std::unique_ptr<exec::Executor> executor = exec::CreateHostExecutor();
  JMP_ASSIGN_OR_RETURN(std::unique_ptr<exec::Executable> executable, executor->Compile(graph));
  return RunExecutable(*executor, *executable, graph, inputs);
}

StatusOr<std::vector<std::vector<uint8_t>>> RunExecutable(exec::Executor& e, exec::Executable& executable,
                                                          const mps::Graph& graph,
                                                          const std::vector<std::vector<uint8_t>>& inputs) {
  exec::Executor* executor = &e;
  std::vector<std::shared_ptr<exec::DeviceMemory>> in, out;
  std::vector<exec::DeviceMemory*> in_ptrs, out_ptrs;
  if (inputs.size() != graph.inputs.size()) return InvalidArgument("wrong number of inputs");
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].size() != graph.type(graph.inputs[i]).ByteSize()) return InvalidArgument("wrong input size");
    JMP_ASSIGN_OR_RETURN(std::shared_ptr<exec::DeviceMemory> mem, executor->Allocate(inputs[i].size()));
    if (!inputs[i].empty()) std::memcpy(mem->data(), inputs[i].data(), inputs[i].size());
    in_ptrs.push_back(mem.get());
    in.push_back(std::move(mem));
  }
  for (int v : graph.outputs) {
    JMP_ASSIGN_OR_RETURN(std::shared_ptr<exec::DeviceMemory> mem, executor->Allocate(graph.type(v).ByteSize()));
    out_ptrs.push_back(mem.get());
    out.push_back(std::move(mem));
  }
  JMP_RETURN_IF_ERROR(executable.Run(in_ptrs, out_ptrs));
  std::vector<std::vector<uint8_t>> results;
  for (auto& mem : out) {
    const uint8_t* p = static_cast<const uint8_t*>(mem->data());
    results.emplace_back(p, p + mem->size());
  }
  return results;
}

}  // namespace jmp::unit
