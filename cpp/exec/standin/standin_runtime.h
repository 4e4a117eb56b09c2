// The stand-in's Metal objects that its executables reach into: buffers, tensor data and command
// buffers (standin_runtime.cc).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "exec/standin/standin_internal.h"

namespace jmp::exec::standin {

class StandinBuffer : public metal::Buffer {
 public:
  StandinBuffer(uint8_t* bytes, size_t length) : bytes_(bytes), length_(length) {}
  ~StandinBuffer() override { std::free(bytes_); }
  void* contents() override { return bytes_; }
  size_t length() override { return length_; }

 private:
  uint8_t* bytes_;
  size_t length_;
};

class StandinTensorData : public metal::TensorData {
 public:
  StandinTensorData(StandinBuffer* buffer, ShapedType type, Status problem)
      : buffer(buffer), type(std::move(type)), problem(std::move(problem)) {}
  StandinBuffer* buffer;
  ShapedType type;
  Status problem;  // a rule the initializer broke, reported when the data is used
};

// One MTLCommandBuffer: its work runs on the queue's thread after it is committed, then its
// completed handlers, with Ok or the buffer's error.
struct RootBuffer {
  std::vector<std::function<Status()>> work;
  std::vector<std::function<void(Status)>> handlers;
  Status encode_error;  // a rule an encoder broke: the buffer fails and its work is not done
  bool committed = false;
  bool split = false;  // committed by commitAndContinue
};

class StandinCommandBuffer : public metal::CommandBuffer {
 public:
  virtual RootBuffer& root() = 0;
  // commitAndContinue: commits the root buffer as it is and continues in a fresh one.
  virtual void commitAndContinue() = 0;
};

}  // namespace jmp::exec::standin
