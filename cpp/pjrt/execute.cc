#include "pjrt/execute.h"

#include "exec/host_callback.h"

#include <string>
#include <unordered_map>
#include <utility>

namespace jmp::pjrt {

std::atomic<int64_t> g_runs_in_flight{0};

namespace {

// Everything the queued run holds on to; one allocation shared by the task.
struct Run {
  std::shared_ptr<CompiledProgram> program;
  std::vector<std::shared_ptr<exec::DeviceMemory>> inputs;
  std::vector<std::shared_ptr<exec::DeviceMemory>> outputs;
  std::vector<std::shared_ptr<EventState>> waits;      // the arguments' ready events
  std::vector<std::shared_ptr<ReadGate>> overwritten;  // donated inputs the run writes over
  std::vector<std::shared_ptr<BufferState>> results;
  std::shared_ptr<EventState> done;

  void operator()() const {
    Status status;
    for (auto& w : waits) {
      Status s = w->Await();
      if (!s.ok() && status.ok()) status = s;
    }
    for (auto& gate : overwritten) gate->WaitIdle();
    if (status.ok()) {
      std::vector<exec::DeviceMemory*> in, out;
      in.reserve(inputs.size());
      out.reserve(outputs.size());
      for (auto& mem : inputs) in.push_back(mem.get());
      for (auto& mem : outputs) out.push_back(mem.get());
      status = program->executable->Run(in, out);
    }
    for (auto& r : results) r->ready->Set(status);
    done->Set(status);
    g_runs_in_flight--;
  }
};

}  // namespace

std::vector<int64_t> PlanOutputMemory(const std::vector<int64_t>& aliased_output, const std::vector<bool>& donate,
                                      const std::vector<std::shared_ptr<exec::DeviceMemory>>& inputs,
                                      const std::vector<size_t>& output_bytes) {
  const size_t n = inputs.size(), m = output_bytes.size();
  std::vector<int64_t> reuse(m, -1);
  auto fits = [&](size_t i, size_t j) { return inputs[i]->size() == output_bytes[j]; };
  for (size_t i = 0; i < n; ++i) {
    int64_t j = aliased_output[i];
    if (donate[i] && j >= 0 && static_cast<size_t>(j) < m && fits(i, static_cast<size_t>(j)))
      reuse[static_cast<size_t>(j)] = static_cast<int64_t>(i);
  }
  for (size_t i = 0; i < n; ++i) {
    if (!donate[i] || aliased_output[i] >= 0) continue;
    for (size_t j = 0; j < m; ++j)
      if (reuse[j] < 0 && fits(i, j)) {
        reuse[j] = static_cast<int64_t>(i);
        break;
      }
  }
  return reuse;
}

Status CheckArgumentCount(const CompiledProgram& program, size_t num_arguments) {
  size_t expected = program.graph.inputs.size();
  if (num_arguments == expected) return Status::Ok();
  return InvalidArgument("the executable takes " + std::to_string(expected) + " arguments, got " +
                         std::to_string(num_arguments));
}

Status Execute(const ExecutionContext& client, const std::shared_ptr<CompiledProgram>& program,
               const std::vector<BufferState*>& arguments, const int64_t* non_donatable, size_t num_non_donatable,
               std::vector<std::shared_ptr<BufferState>>& outputs, std::shared_ptr<EventState>& done) {
  const mps::Graph& g = program->graph;
  const size_t n = arguments.size();
  JMP_RETURN_IF_ERROR(CheckArgumentCount(*program, n));

  // Inside a Python callback (this thread runs a queued execution that waits for the callback), work
  // runs here at once: queued behind the waiting execution, or behind later ones that need its
  // results, it would never run. It donates nothing, as queued work may still read its arguments.
  const bool run_here = exec::InPythonCallback();
  std::vector<bool> donate = run_here ? std::vector<bool>(n, false) : program->signature.donated;
  for (size_t k = 0; k < num_non_donatable; ++k) {
    int64_t i = non_donatable[k];
    if (i >= 0 && static_cast<size_t>(i) < n) donate[static_cast<size_t>(i)] = false;
  }

  auto run = std::make_shared<Run>();
  run->program = program;
  run->inputs.resize(n);
  run->waits.reserve(n);

  // Checking the arguments and queueing the run happen under one lock: a buffer found live here cannot
  // be donated by a run queued before this one.
  std::unique_lock<std::mutex> submit(client.submit_mu);
  std::unordered_map<const BufferState*, size_t> first_use;
  for (size_t i = 0; i < n; ++i) {
    BufferState* b = arguments[i];
    if (!b) return InvalidArgument("argument " + std::to_string(i) + " is null");
    const mps::TensorType& t = g.type(g.inputs[i]);
    if (b->dtype != program->signature.input_dtypes[i] || b->dims != t.shape)
      return InvalidArgument("argument " + std::to_string(i) + " has the wrong type or shape");
    auto [it, fresh] = first_use.emplace(b, i);
    if (!fresh && (donate[i] || donate[it->second]))
      return InvalidArgument("argument " + std::to_string(i) + " is the buffer passed as argument " +
                             std::to_string(it->second) +
                             ", which this call donates: a donated buffer cannot also be used by the same call (as "
                             "in f(donate(a), a))");
    std::lock_guard<std::mutex> lock(b->mu);
    if (b->deleted || !b->memory)
      return FailedPrecondition("argument " + std::to_string(i) + ": the buffer has been deleted or donated");
    if (b->external_refs > 0) donate[i] = false;
    run->inputs[i] = b->memory;
    run->waits.push_back(b->ready);
  }

  // Outputs: a donated input's memory where the executor allows it, fresh memory otherwise.
  const size_t m = g.outputs.size();
  std::vector<int64_t> reuse = program->in_place ? PlanOutputMemory(program->signature.aliased_output, donate,
                                                                    run->inputs, program->output_bytes)
                                                 : std::vector<int64_t>(m, -1);
  run->outputs.resize(m);
  for (size_t j = 0; j < m; ++j) {
    if (reuse[j] >= 0) {
      run->outputs[j] = run->inputs[static_cast<size_t>(reuse[j])];
      continue;
    }
    JMP_ASSIGN_OR_RETURN(run->outputs[j], client.executor.Allocate(program->output_bytes[j]));
  }

  // Nothing can fail from here on: consume the donated buffers, make the outputs, queue the run.
  for (size_t i = 0; i < n; ++i) {
    if (!donate[i]) continue;
    std::lock_guard<std::mutex> lock(arguments[i]->mu);
    arguments[i]->DeleteLocked();
    for (size_t j = 0; j < m; ++j)
      if (reuse[j] == static_cast<int64_t>(i)) {
        run->overwritten.push_back(arguments[i]->reads);
        break;
      }
  }
  outputs.clear();
  outputs.reserve(m);
  for (size_t j = 0; j < m; ++j) {
    const mps::TensorType& t = g.type(g.outputs[j]);
    outputs.push_back(MakeBuffer(client.counters, program->signature.output_dtypes[j], t.shape, run->outputs[j],
                                 /*allocated=*/reuse[j] < 0));
  }
  run->results = outputs;
  run->done = std::make_shared<EventState>();
  done = run->done;
  g_runs_in_flight++;
  if (run_here) {
    submit.unlock();  // the run may call back into Python, which may execute again
    (*run)();
    return Status::Ok();
  }
  // A small program whose arguments are all ready runs here when the queue is idle (no thread handoff,
  // as XLA:CPU runs such programs); the rest, and everything while the queue works, is queued.
  bool ready = program->runs_inline;
  for (size_t i = 0; ready && i < run->waits.size(); ++i) ready = run->waits[i]->ready();
  for (size_t i = 0; ready && i < run->overwritten.size(); ++i) ready = run->overwritten[i]->Idle();
  // Still under the submit lock: no run submitted after this one may slip in before it.
  if (ready && client.queue.RunIfIdle([&run] { (*run)(); })) return Status::Ok();
  client.queue.Push([run = std::move(run)] { (*run)(); });
  return Status::Ok();
}

}  // namespace jmp::pjrt
