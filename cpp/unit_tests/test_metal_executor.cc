// The Metal executor's own logic (exec/metal) over the strict stand-in of MPSGraph and Metal: the order
// it binds inputs and results in, its packages, donated outputs, GPU errors and the errors of a branch
// that cannot be built. Expected values are computed here by hand from the inputs.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "exec/metal/metal_executor.h"
#include "exec/standin/standin.h"
#include "mps/op_attrs.h"
#include "unit_tests/host_graph.h"
#include "unit_tests/unit_test.h"

namespace jmp::unit {
namespace {

using mps::OpKind;

std::unique_ptr<exec::Executor> StandinMetal() {
  return exec::CreateMetalExecutorOn(std::shared_ptr<exec::metal::Device>(exec::standin::CreateStandinDevice()));
}

StatusOr<std::vector<std::vector<uint8_t>>> CompileAndRun(exec::Executor& executor, const mps::Graph& graph,
                                                          const std::vector<std::vector<uint8_t>>& inputs) {
  JMP_ASSIGN_OR_RETURN(std::unique_ptr<exec::Executable> executable, executor.Compile(graph));
  return RunExecutable(executor, *executable, graph, inputs);
}

// pred bool[4], x f32[4], y i32[3] -> (select(pred, x, -x), y * 2, x): three inputs of different types,
// which the stand-in's executable takes in an order of its own.
mps::Graph ThreeInputs() {
  GraphBuilder b;
  int pred = b.Input(DType::kBool, {4});
  int x = b.Input(DType::kF32, {4});
  int y = b.Input(DType::kI32, {3});
  int neg = b.Apply(OpKind::kNegative, {x}, DType::kF32, {4});
  b.Output(b.Apply(OpKind::kSelect, {pred, x, neg}, DType::kF32, {4}));
  b.Output(b.Apply(OpKind::kAdd, {y, y}, DType::kI32, {3}));
  b.Output(x);
  return b.graph();
}
const std::vector<std::vector<uint8_t>> kThreeInputs = {Bytes<uint8_t>({1, 0, 0, 1}), Bytes<float>({1, 2, 3, 4}),
                                                        Bytes<int32_t>({5, -6, 7})};

void ExpectThreeOutputs(Context& jmp_test_, const std::vector<std::vector<uint8_t>>& r) {
  EXPECT_SAME(r.size(), size_t{3});
  if (r.size() != 3) return;
  EXPECT_SAME(Values<float>(r[0]), (std::vector<float>{1, -2, -3, 4}));
  EXPECT_SAME(Values<int32_t>(r[1]), (std::vector<int32_t>{10, -12, 14}));
  EXPECT_SAME(Values<float>(r[2]), (std::vector<float>{1, 2, 3, 4}));
}

// Loads `bytes` for ThreeInputs() and runs it: the three outputs, whatever the bytes were made for.
void ExpectLoadedThreeOutputs(Context& jmp_test_, exec::Executor& metal, const std::string& bytes) {
  auto loaded = metal.Load(ThreeInputs(), bytes);
  ASSERT_OK(loaded);
  auto r = RunExecutable(metal, *loaded.value(), ThreeInputs(), kThreeInputs);
  ASSERT_OK(r);
  ExpectThreeOutputs(jmp_test_, r.value());
}

JMP_TEST(MetalExecutor, InputsAndResultsFollowTheExecutablesOrder) {
  auto metal = StandinMetal();
  auto r = CompileAndRun(*metal, ThreeInputs(), kThreeInputs);
  ASSERT_OK(r);
  ExpectThreeOutputs(jmp_test_, r.value());
}

JMP_TEST(MetalExecutor, APackageRunsAsTheExecutableItWasMadeFrom) {
  auto metal = StandinMetal();
  auto compiled = metal->Compile(ThreeInputs());
  ASSERT_OK(compiled);
  auto bytes = compiled.value()->Serialize();
  ASSERT_OK(bytes);
  EXPECT_TRUE(!bytes.value().empty());
  ExpectLoadedThreeOutputs(jmp_test_, *metal, bytes.value());
}

// A package made for one graph, loaded for another with as many inputs (another placement, another
// JAX_METAL_AVOID), or damaged on disk: the executor compiles the graph it was given.
JMP_TEST(MetalExecutor, APackageOfAnotherGraphOrDamagedIsCompiledAgain) {
  auto metal = StandinMetal();
  GraphBuilder other;
  int pred = other.Input(DType::kBool, {4});
  int x = other.Input(DType::kF32, {4});
  int y = other.Input(DType::kI32, {3});
  other.Output(other.Apply(OpKind::kSelect, {pred, x, x}, DType::kF32, {4}));
  other.Output(other.Apply(OpKind::kMultiply, {y, y}, DType::kI32, {3}));
  other.Output(x);
  auto compiled = metal->Compile(other.graph());
  ASSERT_OK(compiled);
  auto bytes = compiled.value()->Serialize();
  ASSERT_OK(bytes);
  ExpectLoadedThreeOutputs(jmp_test_, *metal, bytes.value());

  auto own = metal->Compile(ThreeInputs());
  ASSERT_OK(own);
  auto own_bytes = own.value()->Serialize();
  ASSERT_OK(own_bytes);
  for (size_t at : {size_t{40}, own_bytes.value().size() / 2, own_bytes.value().size() - 12}) {
    std::string damaged = own_bytes.value();
    damaged[at] = static_cast<char>(damaged[at] ^ 0x5a);
    ExpectLoadedThreeOutputs(jmp_test_, *metal, damaged);
  }
}

// An output written over its donated input, of a size Metal cannot copy as it is (not whole words).
JMP_TEST(MetalExecutor, ADonatedOutputOfAnyByteSizeIsCopiedOver) {
  auto metal = StandinMetal();
  for (int64_t n : {1, 3, 5, 6, 7}) {
    GraphBuilder b;
    int x = b.Input(DType::kU8, {n});
    b.Output(b.Apply(OpKind::kAdd, {x, x}, DType::kU8, {n}));
    auto executable = metal->Compile(b.graph());
    ASSERT_OK(executable);
    EXPECT_TRUE(executable.value()->OutputsMayAliasInputs());
    auto memory = metal->Allocate(static_cast<size_t>(n));
    ASSERT_OK(memory);
    auto* bytes = static_cast<uint8_t*>(memory.value()->data());
    for (int64_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(10 + i);
    ASSERT_OK(executable.value()->Run({memory.value().get()}, {memory.value().get()}));
    for (int64_t i = 0; i < n; ++i) EXPECT_SAME(bytes[i], static_cast<uint8_t>(2 * (10 + i)));
  }
}

// A branch the executor cannot build is reported as what it is, after MPSGraph got as many results from
// both branches as the op has (MPSGraph stops the process otherwise).
JMP_TEST(MetalExecutor, ABranchThatCannotBeBuiltIsReportedAsItself) {
  GraphBuilder then_b, else_b;
  int t_x = then_b.Input(DType::kU64, {2});
  then_b.Output(then_b.Apply(OpKind::kRngBitGenerator, {t_x}, DType::kU64, {2}));
  int e_x = else_b.Input(DType::kU64, {2});
  else_b.Output(e_x);
  GraphBuilder b;
  int pred = b.Input(DType::kBool, {});
  int x = b.Input(DType::kU64, {2});
  int out = b.Apply(OpKind::kIf, {pred, x}, DType::kU64, {2},
                    [&](mps::Op& op) { op.subgraphs = {then_b.graph(), else_b.graph()}; });
  b.Output(out);
  auto metal = StandinMetal();
  EXPECT_ERROR(metal->Compile(b.graph()).status(), "host-only");
}

// A GPU error in a command buffer the encode committed early (commitAndContinue) fails the run.
JMP_TEST(MetalExecutor, AnErrorOfAnEarlierCommandBufferFailsTheRun) {
  setenv("JAX_METAL_STANDIN_GPU_ERROR", "split", 1);
  auto metal = StandinMetal();
  GraphBuilder cond_b, body_b;
  int c_i = cond_b.Input(DType::kI32, {});
  int limit = cond_b.Apply(OpKind::kConstant, {}, DType::kI32, {},
                           [](mps::Op& op) { op.attrs = mps::ConstantAttrs{Bytes<int32_t>({3})}; });
  cond_b.Output(cond_b.Apply(OpKind::kLessThan, {c_i, limit}, DType::kBool, {}));
  int b_i = body_b.Input(DType::kI32, {});
  int one = body_b.Apply(OpKind::kConstant, {}, DType::kI32, {},
                         [](mps::Op& op) { op.attrs = mps::ConstantAttrs{Bytes<int32_t>({1})}; });
  body_b.Output(body_b.Apply(OpKind::kAdd, {b_i, one}, DType::kI32, {}));
  GraphBuilder b;
  int i = b.Input(DType::kI32, {});
  b.Output(b.Apply(OpKind::kWhile, {i}, DType::kI32, {},
                   [&](mps::Op& op) { op.subgraphs = {cond_b.graph(), body_b.graph()}; }));
  auto r = CompileAndRun(*metal, b.graph(), {Bytes<int32_t>({0})});
  unsetenv("JAX_METAL_STANDIN_GPU_ERROR");
  EXPECT_ERROR(r.status(), "command buffer failed");
}

}  // namespace
}  // namespace jmp::unit
