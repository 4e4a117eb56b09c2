// The stand-in's runtime, driven as the Metal executor drives it: command buffers complete later on the
// queue's thread with split buffers and injected errors reported, multiply-adds are contracted, and
// packages round-trip.
#include <chrono>
#include <cstdio>
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
#include "unit_tests/standin_harness.h"
#include "unit_tests/unit_test.h"

namespace jmp::unit::standin_calls {
namespace {

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

}  // namespace
}  // namespace jmp::unit::standin_calls
