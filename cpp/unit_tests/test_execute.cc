// The execute path as plain C++ (cpp/pjrt/execute.h), without PJRT's structs: the donation plan, and
// Execute on the host executor consuming donated buffers, reusing their memory for the outputs it
// aliases, keeping what the caller marks non-donatable or what dlpack holds, and refusing bad calls.
#include <memory>
#include <mutex>
#include <vector>

#include "exec/executor.h"
#include "pjrt/buffers.h"
#include "pjrt/compile.h"
#include "pjrt/events.h"
#include "pjrt/execute.h"
#include "support/serial_worker.h"
#include "unit_tests/host_graph.h"
#include "unit_tests/unit_test.h"

namespace jmp::unit {
namespace {

using pjrt::BufferState;
using pjrt::CompiledProgram;

// Device memory of a given size that holds nothing: all the plan looks at.
class SizedMemory : public exec::DeviceMemory {
 public:
  explicit SizedMemory(size_t size) : size_(size) {}
  void* data() override { return nullptr; }
  size_t size() const override { return size_; }

 private:
  size_t size_;
};

std::vector<int64_t> Plan(std::vector<int64_t> aliased_output, std::vector<bool> donate,
                          const std::vector<size_t>& input_bytes, const std::vector<size_t>& output_bytes) {
  std::vector<std::shared_ptr<exec::DeviceMemory>> inputs;
  for (size_t bytes : input_bytes) inputs.push_back(std::make_shared<SizedMemory>(bytes));
  return pjrt::PlanOutputMemory(aliased_output, donate, inputs, output_bytes);
}

using Reuse = std::vector<int64_t>;

JMP_TEST(ExecutePlan, AliasedInputsTakeTheirOutput) {
  EXPECT_SAME(Plan({1, 0}, {true, true}, {16, 8}, {8, 16}), (Reuse{1, 0}));
}

JMP_TEST(ExecutePlan, InputsNotDonatedKeepTheirMemory) {
  EXPECT_SAME(Plan({0, 1}, {false, true}, {16, 16}, {16, 16}), (Reuse{-1, 1}));
  EXPECT_SAME(Plan({0}, {false}, {4}, {4}), (Reuse{-1}));
}

JMP_TEST(ExecutePlan, AnAliasOfAnotherSizeGetsFreshMemory) { EXPECT_SAME(Plan({0}, {true}, {8}, {16}), (Reuse{-1})); }

JMP_TEST(ExecutePlan, DonorsTakeTheFirstUnclaimedOutputOfTheirSize) {
  // Input 0 is aliased to output 1; input 1, a donor, skips output 0 (another size) and the claimed
  // output 1, and takes output 2.
  EXPECT_SAME(Plan({1, -1}, {true, true}, {16, 16}, {8, 16, 16}), (Reuse{-1, 0, 1}));
  EXPECT_SAME(Plan({-1, -1}, {true, true}, {4, 4}, {4, 4, 4}), (Reuse{0, 1, -1}));
}

JMP_TEST(ExecutePlan, AliasesClaimBeforeDonors) {
  EXPECT_SAME(Plan({-1, 0}, {true, true}, {4, 4}, {4, 4}), (Reuse{1, 0}));
}

JMP_TEST(ExecutePlan, NoInputsOrNoOutputs) {
  EXPECT_SAME(Plan({}, {}, {}, {4, 8}), (Reuse{-1, -1}));
  EXPECT_SAME(Plan({-1}, {true}, {4}, {}), Reuse{});
}

// A client of its own: host executor, counters, queue.
struct TestClient {
  pjrt::InflightLimit inflight{4};
  std::unique_ptr<exec::Executor> executor = exec::CreateHostExecutor();
  pjrt::MemoryCounters counters;
  std::mutex submit_mu;
  SerialWorker queue;
  pjrt::ExecutionContext context() { return {*executor, counters, submit_mu, queue, inflight}; }
};

// out = x + x over f32[4], with x donated to (and aliased with) the output.
StatusOr<std::shared_ptr<CompiledProgram>> Doubling(exec::Executor& executor) {
  GraphBuilder b;
  int x = b.Input(DType::kF32, {4});
  b.Output(b.Apply(mps::OpKind::kAdd, {x, x}, DType::kF32, {4}));
  auto program = std::make_shared<CompiledProgram>();
  program->graph = b.graph();
  JMP_ASSIGN_OR_RETURN(program->executable, executor.Compile(program->graph));
  program->in_place = program->executable->OutputsMayAliasInputs();
  program->output_bytes = {16};
  program->signature.input_dtypes = {DType::kF32};
  program->signature.output_dtypes = {DType::kF32};
  program->signature.output_memory_kinds = {"device"};
  program->signature.aliased_output = {0};
  program->signature.donated = {true};
  return program;
}

// A graph without results: what jit(lambda x: ()) compiles to.
StatusOr<std::shared_ptr<CompiledProgram>> Nothing(exec::Executor& executor) {
  GraphBuilder b;
  b.Input(DType::kF32, {4});
  auto program = std::make_shared<CompiledProgram>();
  program->graph = b.graph();
  JMP_ASSIGN_OR_RETURN(program->executable, executor.Compile(program->graph));
  program->signature.input_dtypes = {DType::kF32};
  program->signature.aliased_output = {-1};
  program->signature.donated = {false};
  return program;
}

StatusOr<std::shared_ptr<BufferState>> Upload(TestClient& client, const std::vector<float>& values) {
  pjrt::HostArray host;
  host.data = values.data();
  host.dtype = DType::kF32;
  host.dims = {static_cast<int64_t>(values.size())};
  return pjrt::BufferFromHost(*client.executor, client.counters, std::move(host));
}

std::vector<float> Download(BufferState& buffer) {
  std::vector<float> out(buffer.bytes / sizeof(float));
  auto event = pjrt::CopyToHost(buffer, out.data(), buffer.bytes);
  if (!event.ok() || !(*event)->Await().ok()) return {};
  return out;
}

JMP_TEST(Execute, ADonatedInputIsConsumedAndItsMemoryTakenByTheOutput) {
  TestClient client;
  auto program = Doubling(*client.executor);
  ASSERT_OK(program);
  auto x = Upload(client, {1, 2, 3, 4});
  ASSERT_OK(x);
  exec::DeviceMemory* memory = (*x)->memory.get();
  int64_t allocs = client.counters.num_allocs.load();
  std::vector<std::shared_ptr<BufferState>> outputs;
  std::shared_ptr<pjrt::EventState> done;
  ASSERT_OK(pjrt::Execute(client.context(), *program, {x->get()}, nullptr, 0, outputs, done));
  EXPECT_TRUE((*x)->deleted);
  EXPECT_TRUE(!(*x)->memory);
  EXPECT_SAME(outputs.size(), size_t{1});
  EXPECT_TRUE(outputs[0]->memory.get() == memory);
  EXPECT_SAME(client.counters.num_allocs.load(), allocs);  // no new allocation: the input's was reused
  ASSERT_OK(done->Await());
  EXPECT_SAME(Download(*outputs[0]), (std::vector<float>{2, 4, 6, 8}));
}

JMP_TEST(Execute, NonDonatableAndExternallyReferencedInputsAreKept) {
  TestClient client;
  auto program = Doubling(*client.executor);
  ASSERT_OK(program);
  for (bool external : {false, true}) {
    auto x = Upload(client, {1, 2, 3, 4});
    ASSERT_OK(x);
    if (external) (*x)->external_refs = 1;
    const int64_t keep[] = {0};
    std::vector<std::shared_ptr<BufferState>> outputs;
    std::shared_ptr<pjrt::EventState> done;
    ASSERT_OK(pjrt::Execute(client.context(), *program, {x->get()}, external ? nullptr : keep, external ? 0 : 1,
                            outputs, done));
    ASSERT_OK(done->Await());
    EXPECT_TRUE(!(*x)->deleted);
    EXPECT_TRUE(outputs[0]->memory != (*x)->memory);
    EXPECT_SAME(Download(**x), (std::vector<float>{1, 2, 3, 4}));
    EXPECT_SAME(Download(*outputs[0]), (std::vector<float>{2, 4, 6, 8}));
  }
}

JMP_TEST(Execute, BadCallsAreRefusedAndConsumeNothing) {
  TestClient client;
  auto program = Doubling(*client.executor);
  ASSERT_OK(program);
  auto x = Upload(client, {1, 2, 3, 4});
  ASSERT_OK(x);
  std::vector<std::shared_ptr<BufferState>> outputs;
  std::shared_ptr<pjrt::EventState> done;
  EXPECT_ERROR(pjrt::Execute(client.context(), *program, {}, nullptr, 0, outputs, done), "takes 1 arguments, got 0");
  EXPECT_ERROR(pjrt::Execute(client.context(), *program, {nullptr}, nullptr, 0, outputs, done), "argument 0 is null");
  auto wrong = Upload(client, {1, 2});
  ASSERT_OK(wrong);
  EXPECT_ERROR(pjrt::Execute(client.context(), *program, {wrong->get()}, nullptr, 0, outputs, done),
               "wrong type or shape");
  EXPECT_TRUE(!(*x)->deleted && !(*wrong)->deleted);
  {
    std::lock_guard<std::mutex> lock((*x)->mu);
    (*x)->DeleteLocked();
  }
  EXPECT_ERROR(pjrt::Execute(client.context(), *program, {x->get()}, nullptr, 0, outputs, done),
               "has been deleted or donated");
}

JMP_TEST(Execute, AProgramWithoutResultsRuns) {
  TestClient client;
  auto program = Nothing(*client.executor);
  ASSERT_OK(program);
  auto x = Upload(client, {1, 2, 3, 4});
  ASSERT_OK(x);
  std::vector<std::shared_ptr<BufferState>> outputs;
  std::shared_ptr<pjrt::EventState> done;
  ASSERT_OK(pjrt::Execute(client.context(), *program, {x->get()}, nullptr, 0, outputs, done));
  EXPECT_TRUE(outputs.empty());
  ASSERT_OK(done->Await());
  EXPECT_TRUE(!(*x)->deleted);
}

}  // namespace
}  // namespace jmp::unit
