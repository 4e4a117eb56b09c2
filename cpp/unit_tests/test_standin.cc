// The MPSGraph and Metal stand-in (exec/standin), driven through exec/metal/metal_api.h as the Metal
// executor drives it: each rule of Apple's headers it enforces fires on a violating call and not on a
// valid one, command buffers complete later on the queue's thread with split buffers and injected
// errors reported, packages round-trip, and a few graphs give hand-computed results.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "exec/metal/metal_api.h"
#include "exec/package_archive.h"
#include "exec/standin/standin.h"
#include "unit_tests/unit_test.h"

// A namespace of its own: its names for the Metal interface's types (Shape, Tensor, DataType) would
// clash with the IR's in the files compiled beside it.
namespace jmp::unit::standin_calls {
namespace {

using exec::metal::CommandQueue;
using exec::metal::Convolution2DOpDescriptor;
using exec::metal::DataType;
using exec::metal::Device;
using exec::metal::Graph;
using exec::metal::GraphExecutable;
using exec::metal::Shape;
using exec::metal::ShapedType;
using exec::metal::Tensor;
using exec::metal::Tensors;

struct Standin {
  std::unique_ptr<Device> device = exec::standin::CreateStandinDevice();
  std::unique_ptr<CommandQueue> queue = device->newCommandQueue();
  std::unique_ptr<Graph> graph = device->newGraph();
  std::vector<std::pair<Tensor*, ShapedType>> feeds;

  Tensor* Placeholder(Shape shape, DataType dt) {
    Tensor* t = graph->placeholderWithShape(shape, dt);
    feeds.push_back({t, {shape, dt}});
    return t;
  }
  StatusOr<std::unique_ptr<GraphExecutable>> Compile(const Tensors& targets) {
    return graph->compileWithDevice(*device, feeds, targets);
  }
};

// One argument or result: its type and bytes.
struct Data {
  ShapedType type;
  std::string bytes;
};

template <typename T>
Data Of(Shape shape, DataType dt, const std::vector<T>& values) {
  return {{std::move(shape), dt}, std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T))};
}

template <typename T>
std::vector<T> Values(const Data& d) {
  std::vector<T> v(d.bytes.size() / sizeof(T));
  std::memcpy(v.data(), d.bytes.data(), v.size() * sizeof(T));
  return v;
}

// Encodes one execution into a fresh command buffer, commits and waits for the completion handler;
// the results (typed as `results` says) are read only after it ran.
Status Execute(Device& device, CommandQueue& queue, GraphExecutable& exe, const std::vector<Data>& inputs,
               std::vector<Data>& results) {
  std::vector<std::unique_ptr<exec::metal::Buffer>> buffers;
  std::vector<std::unique_ptr<exec::metal::TensorData>> data;
  std::vector<exec::metal::TensorData*> in, out;
  for (const Data& d : inputs) {
    buffers.push_back(device.newBufferWithLength(std::max<size_t>(d.bytes.size(), 4)));
    std::memcpy(buffers.back()->contents(), d.bytes.data(), d.bytes.size());
    data.push_back(device.newTensorData(*buffers.back(), d.type.shape, d.type.dataType));
    in.push_back(data.back().get());
  }
  const size_t first_result = buffers.size();
  for (Data& d : results) {
    buffers.push_back(device.newBufferWithLength(std::max<size_t>(d.bytes.size(), 4)));
    data.push_back(device.newTensorData(*buffers.back(), d.type.shape, d.type.dataType));
    out.push_back(data.back().get());
  }
  auto cb = queue.commandBuffer();
  std::promise<Status> done;
  exe.encodeToCommandBuffer(*cb, in, out, [&](Status s) { done.set_value(std::move(s)); });
  std::promise<Status> buffer_done;
  cb->addCompletedHandler([&](Status s) { buffer_done.set_value(std::move(s)); });
  cb->commit();
  Status s = done.get_future().get();
  buffer_done.get_future().wait();
  for (size_t j = 0; j < results.size(); ++j)
    std::memcpy(results[j].bytes.data(), buffers[first_result + j]->contents(), results[j].bytes.size());
  return s;
}

Data Result(Shape shape, DataType dt, size_t element_bytes) {
  Data d{{shape, dt}, {}};
  int64_t n = 1;
  for (int64_t x : shape) n *= x;
  d.bytes.assign(static_cast<size_t>(n) * element_bytes, '\0');
  return d;
}

constexpr DataType kF32 = DataType::kFloat32;
constexpr DataType kI32 = DataType::kInt32;

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

// while (x < limit) x = x + 1, as the Metal executor builds it: the before block forwards its inputs.
Tensors CountingLoop(Graph& g, Tensor* x, Tensor* limit, DataType predicate_type) {
  return g.whileWithInitialInputs(
      {x, limit},
      [&g, predicate_type](const Tensors& in, Tensors& results) {
        results = in;
        Tensor* less = g.lessThanWithPrimaryTensor(in[0], in[1]);
        return predicate_type == DataType::kBool ? less : g.castTensor(less, predicate_type);
      },
      [&g](const Tensors& in) {
        return Tensors{g.additionWithPrimaryTensor(in[0], g.constantWithScalar(1, {1}, kI32)), in[1]};
      });
}

JMP_TEST(Standin, WhileRunsOverSplitCommandBuffers) {
  Standin s;
  Tensor* x = s.Placeholder({1}, kI32);
  Tensor* limit = s.Placeholder({1}, kI32);
  Tensors r = CountingLoop(*s.graph, x, limit, DataType::kBool);
  auto exe = s.Compile({r[0]});
  ASSERT_OK(exe);
  std::vector<Data> in;
  for (Tensor* t : (*exe)->feedTensors()) in.push_back(Of<int32_t>({1}, kI32, {t == x ? 2 : 7}));
  std::vector<Data> out{Result({1}, kI32, 4)};
  ASSERT_OK(Execute(*s.device, *s.queue, **exe, in, out));
  EXPECT_SAME(Values<int32_t>(out[0]), (std::vector<int32_t>{7}));

  Standin bad;
  Tensor* bx = bad.Placeholder({1}, kI32);
  Tensor* bl = bad.Placeholder({1}, kI32);
  EXPECT_ERROR(StatusOf(bad.Compile({CountingLoop(*bad.graph, bx, bl, kI32)[0]})), "predicate must be a bool");
  Standin count;
  Tensor* cx = count.Placeholder({1}, kI32);
  Tensors cr = count.graph->whileWithInitialInputs(
      {cx},
      [&](const Tensors& in, Tensors& results) {
        results = in;
        return count.graph->isFiniteWithTensor(count.graph->castTensor(in[0], kF32));
      },
      [&](const Tensors& in) { return Tensors{in[0], in[0]}; });
  EXPECT_ERROR(StatusOf(count.Compile({cx})), "after block returns 2 tensors for 1 loop values");
}

JMP_TEST(Standin, AnInjectedErrorInASplitBufferReachesTheCompletionHandler) {
  Standin s;
  Tensor* x = s.Placeholder({1}, kI32);
  Tensor* limit = s.Placeholder({1}, kI32);
  auto exe = s.Compile({CountingLoop(*s.graph, x, limit, DataType::kBool)[0]});
  ASSERT_OK(exe);
  std::vector<Data> in{Of<int32_t>({1}, kI32, {0}), Of<int32_t>({1}, kI32, {3})};
  std::vector<Data> out{Result({1}, kI32, 4)};
  setenv("JAX_METAL_STANDIN_GPU_ERROR", "split", 1);
  Status st = Execute(*s.device, *s.queue, **exe, in, out);
  unsetenv("JAX_METAL_STANDIN_GPU_ERROR");
  EXPECT_ERROR(st, "injected GPU error (JAX_METAL_STANDIN_GPU_ERROR=split)");
}

JMP_TEST(Standin, CompletionComesAfterCommitOnTheQueueThread) {
  Standin s;
  Tensor* x = s.Placeholder({1}, kI32);
  Tensor* limit = s.Placeholder({1}, kI32);
  auto exe = s.Compile({CountingLoop(*s.graph, x, limit, DataType::kBool)[0]});
  ASSERT_OK(exe);
  auto in_buffer = s.device->newBufferWithLength(4), limit_buffer = s.device->newBufferWithLength(4);
  auto out_buffer = s.device->newBufferWithLength(4);
  const int32_t zero = 0, three = 3, stale = -1;
  std::memcpy(in_buffer->contents(), &zero, 4);
  std::memcpy(limit_buffer->contents(), &three, 4);
  std::memcpy(out_buffer->contents(), &stale, 4);
  auto xd = s.device->newTensorData(*in_buffer, {1}, kI32), ld = s.device->newTensorData(*limit_buffer, {1}, kI32);
  auto od = s.device->newTensorData(*out_buffer, {1}, kI32);
  std::vector<exec::metal::TensorData*> in;
  for (Tensor* t : (*exe)->feedTensors()) in.push_back(t == x ? xd.get() : ld.get());
  auto cb = s.queue->commandBuffer();
  std::promise<std::thread::id> done;
  (*exe)->encodeToCommandBuffer(*cb, in, {od.get()}, [&](Status st) { done.set_value(std::this_thread::get_id()); });
  auto f = done.get_future();
  // Nothing completes before the last buffer is committed, and the result is not yet written.
  EXPECT_TRUE(f.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready);
  int32_t seen;
  std::memcpy(&seen, out_buffer->contents(), 4);
  EXPECT_SAME(seen, stale);
  cb->commit();
  EXPECT_TRUE(f.get() != std::this_thread::get_id());
  std::memcpy(&seen, out_buffer->contents(), 4);
  EXPECT_SAME(seen, 3);
}

JMP_TEST(Standin, BlitCopiesAreMultiplesOfFourInsideBothBuffers) {
  Standin s;
  auto from = s.device->newBufferWithLength(16), to = s.device->newBufferWithLength(16);
  const float values[4] = {1, 2, 3, 4};
  std::memcpy(from->contents(), values, 16);
  auto copy = [&](size_t size, size_t offset) {
    auto cb = s.queue->commandBuffer();
    auto blit = cb->blitCommandEncoder();
    blit->copyFromBuffer(*from, 0, *to, offset, size);
    blit->endEncoding();
    std::promise<Status> done;
    cb->addCompletedHandler([&](Status st) { done.set_value(st); });
    cb->commit();
    return done.get_future().get();
  };
  EXPECT_ERROR(copy(6, 0), "multiples of 4");
  EXPECT_ERROR(copy(8, 12), "past a buffer's end");
  ASSERT_OK(copy(8, 4));
  float got[4];
  std::memcpy(got, to->contents(), 16);
  EXPECT_SAME((std::vector<float>(got, got + 4)), (std::vector<float>{0, 1, 2, 0}));
}

JMP_TEST(Standin, MultiplicationReadOnlyByAnAdditionIsContracted) {
  Standin s;
  Tensor* a = s.Placeholder({1}, kF32);
  Tensor* c = s.Placeholder({1}, kF32);
  auto exe = s.Compile({s.graph->additionWithPrimaryTensor(s.graph->multiplicationWithPrimaryTensor(a, a), c)});
  ASSERT_OK(exe);
  // (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24: rounded to float32 it loses 2^-24, which one FMA keeps.
  const float one_plus = 1.0f + 0x1p-12f, minus = -(1.0f + 0x1p-11f);
  std::vector<Data> in;
  for (Tensor* t : (*exe)->feedTensors()) in.push_back(Of<float>({1}, kF32, {t == a ? one_plus : minus}));
  std::vector<Data> out{Result({1}, kF32, 4)};
  ASSERT_OK(Execute(*s.device, *s.queue, **exe, in, out));
  EXPECT_SAME(Values<float>(out[0]), (std::vector<float>{0x1p-24f}));
}

JMP_TEST(Standin, PackagesRoundTripWithoutFeedTensorsAndRefuseCorruptBytes) {
  Standin s;
  Tensor* a = s.Placeholder({2}, kF32);
  Tensor* b = s.Placeholder({2}, kF32);
  auto exe = s.Compile({s.graph->subtractionWithPrimaryTensor(a, b)});
  ASSERT_OK(exe);
  const Tensors order = (*exe)->feedTensors();
  auto dir = exec::MakeTemporaryDirectory();
  ASSERT_OK(dir);
  const std::string path = *dir + "/p.mpsgraphpackage";
  ASSERT_OK((*exe)->serializeToMPSGraphPackageAtURL(path));
  auto loaded = s.device->newExecutableWithMPSGraphPackageAtURL(path);
  ASSERT_OK(loaded);
  EXPECT_TRUE((*loaded)->feedTensors().empty() && (*loaded)->targetTensors().empty());
  std::vector<Data> in;
  for (Tensor* t : order) in.push_back(t == a ? Of<float>({2}, kF32, {10, 20}) : Of<float>({2}, kF32, {1, 2}));
  std::vector<Data> out{Result({2}, kF32, 4)};
  ASSERT_OK(Execute(*s.device, *s.queue, **loaded, in, out));
  EXPECT_SAME(Values<float>(out[0]), (std::vector<float>{9, 18}));
  // Every truncation, and a flipped byte anywhere, is an error (or, where the byte was slack, a
  // package that still loads), never a crash.
  auto packed = exec::PackDirectory(path);
  ASSERT_OK(packed);
  std::string bytes;
  {
    FILE* f = std::fopen((path + "/program.bin").c_str(), "rb");
    EXPECT_TRUE(f != nullptr);
    if (!f) return;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.append(buf, n);
    std::fclose(f);
  }
  auto write = [&](const std::string& b) {
    FILE* f = std::fopen((path + "/program.bin").c_str(), "wb");
    std::fwrite(b.data(), 1, b.size(), f);
    std::fclose(f);
  };
  for (size_t cut = 0; cut < bytes.size(); cut += 7) {
    write(bytes.substr(0, cut));
    EXPECT_ERROR(StatusOf(s.device->newExecutableWithMPSGraphPackageAtURL(path)), "MPSGraph stand-in");
  }
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string b = bytes;
    b[i] = static_cast<char>(b[i] ^ 0x5a);
    write(b);
    (void)s.device->newExecutableWithMPSGraphPackageAtURL(path);
  }
  exec::RemoveDirectoryTree(*dir);
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
