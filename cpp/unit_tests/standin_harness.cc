// The stand-in unit tests' execution helper (standin_harness.h).
#include "unit_tests/standin_harness.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <future>
#include <memory>
#include <utility>
#include <vector>

namespace jmp::unit::standin_calls {

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

}  // namespace jmp::unit::standin_calls
