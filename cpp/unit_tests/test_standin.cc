// The MPSGraph stand-in (exec/standin), driven through exec/metal/metal_api.h as the Metal executor
// drives it: each rule of Apple's headers it enforces fires on a violating call and not on a valid one,
// and a few graphs give hand-computed results. Command buffers, loops and packages:
// test_standin_runtime.cc.
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "exec/metal/metal_api.h"
#include "exec/standin/standin.h"
#include "unit_tests/standin_harness.h"
#include "unit_tests/unit_test.h"

namespace jmp::unit::standin_calls {
namespace {

JMP_TEST(Standin, AddBroadcastsNumPyStyle) {
  Standin s;
  Tensor* a = s.Placeholder({2, 1}, kF32);
  Tensor* b = s.Placeholder({3}, kF32);
  Tensor* sum = s.graph->additionWithPrimaryTensor(a, b);
  EXPECT_SAME(s.graph->shapeOf(sum), (Shape{2, 3}));
  EXPECT_TRUE(s.graph->dataTypeOf(s.graph->lessThanWithPrimaryTensor(a, b)) == DataType::kBool);
  auto exe = s.Compile({sum});
  ASSERT_OK(exe);
  // Inputs go in the executable's feedTensors order.
  const Tensors order = (*exe)->feedTensors();
  std::vector<Data> in;
  for (Tensor* t : order) in.push_back(t == a ? Of<float>({2, 1}, kF32, {10, 20}) : Of<float>({3}, kF32, {1, 2, 3}));
  std::vector<Data> out{Result({2, 3}, kF32, 4)};
  ASSERT_OK(Execute(*s.device, *s.queue, **exe, in, out));
  EXPECT_SAME(Values<float>(out[0]), (std::vector<float>{11, 12, 13, 21, 22, 23}));
}

// A result over an input's buffer is refused: nothing in MPSGraph's headers says it is computed as if
// every input were read first, and the executor stages a donated output instead.
JMP_TEST(Standin, AResultOverAnInputIsRefused) {
  Standin s;
  Tensor* a = s.Placeholder({4}, kF32);
  auto exe = s.Compile({s.graph->additionWithPrimaryTensor(a, a)});
  ASSERT_OK(exe);
  auto buffer = s.device->newBufferWithLength(16);
  auto other = s.device->newBufferWithLength(16);
  auto in = s.device->newTensorData(*buffer, {4}, kF32);
  auto same = s.device->newTensorData(*buffer, {4}, kF32);
  auto apart = s.device->newTensorData(*other, {4}, kF32);
  auto run = [&](exec::metal::TensorData* result) {
    auto cb = s.queue->commandBuffer();
    std::promise<Status> done;
    (*exe)->encodeToCommandBuffer(*cb, {in.get()}, {result}, [&](Status st) { done.set_value(std::move(st)); });
    cb->commit();
    return done.get_future().get();
  };
  EXPECT_ERROR(run(same.get()), "resultsArray[0] overlaps inputsArray[0]");
  ASSERT_OK(run(apart.get()));
}

JMP_TEST(Standin, FeedTensorsArePermutedAndBindInputsByPosition) {
  Standin s;
  Tensor* p = s.Placeholder({2}, DataType::kBool);
  Tensor* x = s.Placeholder({2}, kF32);
  Tensor* y = s.Placeholder({2}, kF32);
  auto exe = s.Compile({s.graph->selectWithPredicateTensor(p, x, y)});
  ASSERT_OK(exe);
  const Tensors order = (*exe)->feedTensors();
  EXPECT_SAME(order.size(), size_t{3});
  EXPECT_TRUE(order != (Tensors{p, x, y}));
  auto data = [&](Tensor* t) {
    if (t == p) return Of<uint8_t>({2}, DataType::kBool, {1, 0});
    return t == x ? Of<float>({2}, kF32, {1, 2}) : Of<float>({2}, kF32, {3, 4});
  };
  // In insertion order: the bool predicate lands on a float32 feed.
  std::vector<Data> out{Result({2}, kF32, 4)};
  EXPECT_ERROR(Execute(*s.device, *s.queue, **exe, {data(p), data(x), data(y)}, out), "inputsArray[0] is bool[2]");
  std::vector<Data> in;
  for (Tensor* t : order) in.push_back(data(t));
  ASSERT_OK(Execute(*s.device, *s.queue, **exe, in, out));
  EXPECT_SAME(Values<float>(out[0]), (std::vector<float>{1, 4}));
  // Results are checked too: count and type.
  std::vector<Data> none;
  EXPECT_ERROR(Execute(*s.device, *s.queue, **exe, in, none), "resultsArray holds 0");
  std::vector<Data> wrong{Result({2}, kI32, 4)};
  EXPECT_ERROR(Execute(*s.device, *s.queue, **exe, in, wrong), "targetTensors[0] is float32[2]");
}

JMP_TEST(Standin, MatMulComputesAndRefusesIntegersAndMacOS14Limits) {
  {
    Standin s;
    Tensor* a = s.Placeholder({2, 2}, kF32);
    Tensor* b = s.Placeholder({2, 2}, kF32);
    auto exe = s.Compile({s.graph->matrixMultiplicationWithPrimaryTensor(a, b)});
    ASSERT_OK(exe);
    std::vector<Data> in;
    for (Tensor* t : (*exe)->feedTensors())
      in.push_back(t == a ? Of<float>({2, 2}, kF32, {1, 2, 3, 4}) : Of<float>({2, 2}, kF32, {5, 6, 7, 8}));
    std::vector<Data> out{Result({2, 2}, kF32, 4)};
    ASSERT_OK(Execute(*s.device, *s.queue, **exe, in, out));
    EXPECT_SAME(Values<float>(out[0]), (std::vector<float>{19, 22, 43, 50}));
  }
  {
    Standin s;
    Tensor* a = s.Placeholder({2, 2}, kI32);
    EXPECT_ERROR(
        StatusOf(s.Compile({s.graph->matrixMultiplicationWithPrimaryTensor(a, a)})),
        "MPSGraph stand-in: matrixMultiplicationWithPrimaryTensor:secondaryTensor: on (int32[2,2], int32[2,2])");
  }
  {
    Standin s;
    Tensor* a = s.Placeholder({1, 32769}, kF32);
    Tensor* b = s.Placeholder({32769, 1}, kF32);
    EXPECT_ERROR(StatusOf(s.Compile({s.graph->matrixMultiplicationWithPrimaryTensor(a, b)})), "above 32768");
  }
  {
    Standin s;
    Tensor* a = s.Placeholder({1, 2049}, DataType::kComplexFloat32);
    Tensor* b = s.Placeholder({2049, 1}, DataType::kComplexFloat32);
    EXPECT_ERROR(StatusOf(s.Compile({s.graph->matrixMultiplicationWithPrimaryTensor(a, b)})), "complex K above 2048");
  }
  {
    Standin s;
    Tensor* a = s.Placeholder({1, 2048}, DataType::kComplexFloat32);
    Tensor* b = s.Placeholder({2048, 1}, DataType::kComplexFloat32);
    ASSERT_OK(s.Compile({s.graph->matrixMultiplicationWithPrimaryTensor(a, b)}));
  }
}

JMP_TEST(Standin, Convolution2DReadsEachDescriptorField) {
  Standin s;
  Tensor* x = s.Placeholder({1, 3, 4, 1}, kF32);
  Tensor* w = s.Placeholder({2, 2, 1, 1}, kF32);
  Convolution2DOpDescriptor d;
  d.strideInX = 2;
  d.strideInY = 1;
  d.paddingLeft = 1;
  Tensor* y = s.graph->convolution2DWithSourceTensor(x, w, d);
  EXPECT_SAME(s.graph->shapeOf(y), (Shape{1, 2, 2, 1}));
  auto exe = s.Compile({y});
  ASSERT_OK(exe);
  std::vector<Data> in;
  for (Tensor* t : (*exe)->feedTensors())
    in.push_back(t == x ? Of<float>({1, 3, 4, 1}, kF32, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11})
                        : Of<float>({2, 2, 1, 1}, kF32, {1, 1, 1, 1}));
  std::vector<Data> out{Result({1, 2, 2, 1}, kF32, 4)};
  ASSERT_OK(Execute(*s.device, *s.queue, **exe, in, out));
  // Windows of 2x2 over rows (stride 1) and over columns padded by one on the left (stride 2):
  // rows 0-1 cols -1..0 = 0+4, cols 1..2 = 1+2+5+6; rows 1-2 cols -1..0 = 4+8, cols 1..2 = 5+6+9+10.
  EXPECT_SAME(Values<float>(out[0]), (std::vector<float>{4, 14, 12, 30}));
}

JMP_TEST(Standin, GatherNDComputesAndKeepsTheRankRules) {
  {
    Standin s;
    Tensor* u = s.Placeholder({3, 2}, kF32);
    Tensor* i = s.Placeholder({2, 1}, kI32);
    Tensor* g = s.graph->gatherNDWithUpdatesTensor(u, i, 0);
    EXPECT_SAME(s.graph->shapeOf(g), (Shape{2, 2}));
    auto exe = s.Compile({g});
    ASSERT_OK(exe);
    std::vector<Data> in;
    for (Tensor* t : (*exe)->feedTensors())
      in.push_back(t == u ? Of<float>({3, 2}, kF32, {1, 2, 3, 4, 5, 6}) : Of<int32_t>({2, 1}, kI32, {2, 0}));
    std::vector<Data> out{Result({2, 2}, kF32, 4)};
    ASSERT_OK(Execute(*s.device, *s.queue, **exe, in, out));
    EXPECT_SAME(Values<float>(out[0]), (std::vector<float>{5, 6, 1, 2}));
  }
  {
    // One element of a vector: the result has rank 0, P = 0.
    Standin s;
    Tensor* u = s.Placeholder({4}, kF32);
    Tensor* i = s.Placeholder({1}, kI32);
    EXPECT_ERROR(StatusOf(s.Compile({s.graph->gatherNDWithUpdatesTensor(u, i, 0)})), "P > 0");
  }
  {
    Standin s;
    Tensor* u = s.Placeholder({4}, kF32);
    Tensor* i = s.Placeholder({3, 2}, kI32);
    EXPECT_ERROR(StatusOf(s.Compile({s.graph->gatherNDWithUpdatesTensor(u, i, 0)})), "K <= U");
  }
  {
    Standin s;
    Tensor* u = s.Placeholder({4, 2}, kF32);
    Tensor* i = s.Placeholder({3, 1}, DataType::kInt64);
    EXPECT_ERROR(StatusOf(s.Compile({s.graph->gatherNDWithUpdatesTensor(u, i, 0)})), "indices of data type int64");
  }
}

JMP_TEST(Standin, ScatterNDUpdatesRankFollowsTheHeader) {
  {
    // x.at[i].set(v) on a vector with v run as [1]: U = 1, but (P-K) + Q-1 = 0.
    Standin s;
    Tensor* d = s.Placeholder({4}, kF32);
    Tensor* u = s.Placeholder({1}, kF32);
    Tensor* i = s.Placeholder({1}, kI32);
    EXPECT_ERROR(StatusOf(s.Compile({s.graph->scatterNDWithDataTensor(d, u, i, 0, exec::metal::ScatterMode::kSet)})),
                 "U = (P-K) + Q-1");
  }
  Standin s;
  Tensor* d = s.Placeholder({4}, kF32);
  Tensor* u = s.Placeholder({1}, kF32);
  Tensor* i = s.Placeholder({1, 1}, kI32);
  auto exe = s.Compile({s.graph->scatterNDWithDataTensor(d, u, i, 0, exec::metal::ScatterMode::kAdd)});
  ASSERT_OK(exe);
  std::vector<Data> in;
  for (Tensor* t : (*exe)->feedTensors())
    in.push_back(t == d   ? Of<float>({4}, kF32, {1, 1, 1, 1})
                 : t == u ? Of<float>({1}, kF32, {5})
                          : Of<int32_t>({1, 1}, kI32, {2}));
  std::vector<Data> out{Result({4}, kF32, 4)};
  ASSERT_OK(Execute(*s.device, *s.queue, **exe, in, out));
  EXPECT_SAME(Values<float>(out[0]), (std::vector<float>{1, 1, 6, 1}));
}

JMP_TEST(Standin, AlongAxisIndicesMatchExceptAtTheAxis) {
  Standin s;
  Tensor* u = s.Placeholder({3, 2}, kF32);
  Tensor* i = s.Placeholder({2, 3}, kI32);
  EXPECT_ERROR(StatusOf(s.Compile({s.graph->gatherAlongAxis(0, u, i)})), "except at axis");
  Standin ok;
  Tensor* u2 = ok.Placeholder({3, 2}, kF32);
  Tensor* i2 = ok.Placeholder({1, 2}, kI32);
  ASSERT_OK(ok.Compile({ok.graph->gatherAlongAxis(0, u2, i2)}));
}

JMP_TEST(Standin, ZeroElementTensorsAreRefusedEverywhere) {
  {
    Standin s;
    Tensor* p = s.Placeholder({0, 3}, kF32);
    EXPECT_ERROR(StatusOf(s.Compile({s.graph->absoluteWithTensor(p)})), "zero-element");
  }
  {
    Standin s;
    Tensor* c = s.graph->constantWithData(nullptr, 0, {0}, kF32);
    EXPECT_ERROR(StatusOf(s.Compile({s.graph->absoluteWithTensor(c)})), "zero-element");
  }
  {
    Standin s;
    Tensor* p = s.Placeholder({2}, kF32);
    EXPECT_ERROR(StatusOf(s.Compile({s.graph->sliceTensor(p, {1}, {1}, {1})})), "zero-element");
  }
  Standin s;
  Tensor* p = s.Placeholder({2}, kF32);
  auto exe = s.Compile({s.graph->absoluteWithTensor(p)});
  ASSERT_OK(exe);
  std::vector<Data> out{Result({2}, kF32, 4)};
  EXPECT_ERROR(Execute(*s.device, *s.queue, **exe, {Data{{{0}, kF32}, ""}}, out), "zero-element tensor data");
}

JMP_TEST(Standin, OpDomainsAreMPSGraphsNotOurs) {
  struct Case {
    DataType dt;
    Tensor* (*call)(Graph&, Tensor*);
    const char* part;
  };
  const Case refused[] = {
      {DataType::kUInt8, [](Graph& g, Tensor* t) { return g.sortWithTensor(t, 0, false); }, "sortWithTensor"},
      {DataType::kUInt64, [](Graph& g, Tensor* t) { return g.argSortWithTensor(t, 0, true); }, "argSortWithTensor"},
      {DataType::kUInt8, [](Graph& g, Tensor* t) { return g.reductionMaximumPropagateNaNWithTensor(t, {0}); },
       "reductionMaximumPropagateNaNWithTensor"},
      {DataType::kBool, [](Graph& g, Tensor* t) { return g.reductionMinimumPropagateNaNWithTensor(t, {0}); },
       "reductionMinimumPropagateNaNWithTensor"},
      {DataType::kInt16, [](Graph& g, Tensor* t) { return g.topKWithSourceTensor(t, 1)[0]; }, "topKWithSourceTensor"},
      {kF32, [](Graph& g, Tensor* t) { return g.bitwiseANDWithPrimaryTensor(t, t); }, "bitwiseANDWithPrimaryTensor"},
      {kI32, [](Graph& g, Tensor* t) { return g.logicalORWithPrimaryTensor(t, t); }, "logicalORWithPrimaryTensor"},
  };
  for (const Case& c : refused) {
    Standin s;
    Tensor* p = s.Placeholder({4}, c.dt);
    Status st = StatusOf(s.Compile({c.call(*s.graph, p)}));
    EXPECT_TRUE(!st.ok() && st.message().find(c.part) != std::string::npos &&
                st.message().find("is not one of") != std::string::npos);
  }
  const Case accepted[] = {
      {kF32, [](Graph& g, Tensor* t) { return g.sortWithTensor(t, 0, false); }, ""},
      {DataType::kInt64, [](Graph& g, Tensor* t) { return g.argSortWithTensor(t, 0, true); }, ""},
      {kI32, [](Graph& g, Tensor* t) { return g.reductionMaximumPropagateNaNWithTensor(t, {0}); }, ""},
      {DataType::kUInt8, [](Graph& g, Tensor* t) { return g.bitwiseANDWithPrimaryTensor(t, t); }, ""},
  };
  for (const Case& c : accepted) {
    Standin s;
    Tensor* p = s.Placeholder({4}, c.dt);
    ASSERT_OK(s.Compile({c.call(*s.graph, p)}));
  }
}

JMP_TEST(Standin, ReductionsKeepTheirAxesAsOne) {
  Standin s;
  Tensor* p = s.Placeholder({2, 3}, kF32);
  Tensor* r = s.graph->reductionSumWithTensor(p, {-1});
  EXPECT_SAME(s.graph->shapeOf(r), (Shape{2, 1}));
  Tensor* a = s.graph->reductionArgMaximumWithTensor(p, 0);
  EXPECT_SAME(s.graph->shapeOf(a), (Shape{1, 3}));
  EXPECT_TRUE(s.graph->dataTypeOf(a) == kI32);
  auto exe = s.Compile({r});
  ASSERT_OK(exe);
  std::vector<Data> out{Result({2, 1}, kF32, 4)};
  ASSERT_OK(Execute(*s.device, *s.queue, **exe, {Of<float>({2, 3}, kF32, {1, 2, 3, 4, 5, 6})}, out));
  EXPECT_SAME(Values<float>(out[0]), (std::vector<float>{6, 15}));
}

JMP_TEST(Standin, IfBlocksMustReturnAlikeAndTakeABoolPredicate) {
  {
    Standin s;
    Tensor* p = s.Placeholder({1}, DataType::kBool);
    Tensor* x = s.Placeholder({2}, kF32);
    Tensors r = s.graph->ifWithPredicateTensor(p, [&] { return Tensors{x}; }, [&] { return Tensors{}; });
    EXPECT_ERROR(StatusOf(s.Compile({x})), "then block returns 1 tensors and the else block 0");
  }
  {
    Standin s;
    Tensor* p = s.Placeholder({1}, kF32);
    Tensor* x = s.Placeholder({2}, kF32);
    Tensors r = s.graph->ifWithPredicateTensor(p, [&] { return Tensors{x}; }, [&] { return Tensors{x}; });
    EXPECT_ERROR(StatusOf(s.Compile(r)), "predicate must be a bool");
  }
  Standin s;
  Tensor* p = s.Placeholder({1}, DataType::kBool);
  Tensor* x = s.Placeholder({2}, kF32);
  Tensors r = s.graph->ifWithPredicateTensor(
      p, [&] { return Tensors{s.graph->negativeWithTensor(x)}; }, [&] { return Tensors{x}; });
  auto exe = s.Compile(r);
  ASSERT_OK(exe);
  for (uint8_t pred : {uint8_t{1}, uint8_t{0}}) {
    std::vector<Data> in;
    for (Tensor* t : (*exe)->feedTensors())
      in.push_back(t == p ? Of<uint8_t>({1}, DataType::kBool, {pred}) : Of<float>({2}, kF32, {1.5f, -2}));
    std::vector<Data> out{Result({2}, kF32, 4)};
    ASSERT_OK(Execute(*s.device, *s.queue, **exe, in, out));
    EXPECT_SAME(Values<float>(out[0]), pred ? (std::vector<float>{-1.5f, 2}) : (std::vector<float>{1.5f, -2}));
  }
}

JMP_TEST(Standin, FeedsMustBeThePlaceholdersTypes) {
  Standin s;
  Tensor* a = s.graph->placeholderWithShape({2}, kF32);
  EXPECT_ERROR(StatusOf(s.graph->compileWithDevice(*s.device, {{a, {{3}, kF32}}}, {s.graph->absoluteWithTensor(a)})),
               "differs from its placeholder's");
  Standin unfed;
  Tensor* b = unfed.graph->placeholderWithShape({2}, kF32);
  EXPECT_ERROR(StatusOf(unfed.Compile({unfed.graph->absoluteWithTensor(b)})), "is not among the feeds");
}

JMP_TEST(Standin, NoShadingLanguageCompiler) {
  Standin s;
  EXPECT_ERROR(StatusOf(s.device->newComputePipelineState("kernel void f() {}", "f")),
               "MPSGraph stand-in: no Metal Shading Language compiler");
}

}  // namespace
}  // namespace jmp::unit::standin_calls
