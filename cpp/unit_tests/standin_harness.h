// What the stand-in's unit tests share (test_standin.cc: the graph's rules; test_standin_runtime.cc:
// command buffers, loops and packages): a stand-in device with its graph, and one execution's data.
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "exec/metal/metal_api.h"
#include "exec/standin/standin.h"
#include "support/status.h"

// A namespace of its own: its names for the Metal interface's types (Shape, Tensor, DataType) would
// clash with the IR's in the files compiled beside it.
namespace jmp::unit::standin_calls {

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
               std::vector<Data>& results);

Data Result(Shape shape, DataType dt, size_t element_bytes);

inline constexpr DataType kF32 = DataType::kFloat32;
inline constexpr DataType kI32 = DataType::kInt32;

}  // namespace jmp::unit::standin_calls
