// The PythonCallback kernel: operands' bytes out to the trampoline the Python package installed,
// results' bytes back, each checked against the type the program declared. The kernel knows nothing of
// Python; the trampoline (jax_metal_plugin/_callbacks.py) takes the GIL for the call and nothing else.
#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "exec/host/host_kernels.h"
#include "exec/host_callback.h"
#include "support/trace.h"

namespace jmp::exec {

namespace {

std::atomic<jmp_python_callback_fn> g_trampoline{nullptr};
thread_local int t_callback_depth = 0;

// What one call's results are delivered into.
struct ResultSink {
  const host::OpArgs* args;
  std::vector<bool> delivered;
  Status status;  // the first delivery error, kept even if the trampoline ignores the return code
};

std::string Describe(const std::string& dtype, const std::vector<int64_t>& shape) {
  std::string s = dtype + "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

struct DepthGuard {
  DepthGuard() { ++t_callback_depth; }
  ~DepthGuard() { --t_callback_depth; }
};

}  // namespace

void SetPythonCallbackTrampoline(jmp_python_callback_fn fn) { g_trampoline.store(fn); }

bool InPythonCallback() { return t_callback_depth > 0; }

Status DeliverPythonCallbackResult(void* results, int32_t index, const void* data, const char* dtype, int32_t rank,
                                   const int64_t* dims) {
  if (!results) return InvalidArgument("Python callback: no call to deliver a result to");
  auto& sink = *static_cast<ResultSink*>(results);
  const host::OpArgs& a = *sink.args;
  Status status;
  const size_t n = sink.delivered.size();
  if (index < 0 || static_cast<size_t>(index) >= n || rank < 0 || (rank > 0 && !dims) || !dtype) {
    status = InvalidArgument("Python callback: result " + std::to_string(index) + " does not exist (the callback has " +
                             std::to_string(n) + " results)");
  } else {
    const mps::TensorType& want = a.OutType(static_cast<size_t>(index) + 1);
    std::vector<int64_t> shape(dims, dims + rank);
    if (dtype != DTypeName(want.dtype) || shape != want.shape) {
      status = InvalidArgument("Python callback: result " + std::to_string(index) + " is " + Describe(dtype, shape) +
                               " but the program declared " + want.ToString() +
                               (a.op.location.empty() ? "" : " (at " + a.op.location + ")"));
    } else {
      size_t bytes = want.ByteSize();
      if (bytes && !data) {
        status = InvalidArgument("Python callback: result " + std::to_string(index) + " has no data");
      } else {
        if (bytes) std::memcpy(a.out[static_cast<size_t>(index) + 1], data, bytes);
        sink.delivered[static_cast<size_t>(index)] = true;
      }
    }
  }
  if (!status.ok() && sink.status.ok()) sink.status = status;
  return status;
}

namespace host {

Status RunPythonCallback(const OpArgs& a) {
  const mps::PythonCallbackAttrs& attrs = a.op.Attrs<mps::PythonCallbackAttrs>();
  trace::Scope scope(trace::Line::kCallback, "python callback");
  if (scope.on()) scope.Stat("source", a.op.location);
  jmp_python_callback_fn fn = g_trampoline.load();
  if (!fn)
    return FailedPrecondition(
        "Python callback: no callback handler is installed in this library (jax_metal_plugin.initialize() installs "
        "it in the plugin JAX loads)");
  const size_t first = static_cast<size_t>(attrs.token_inputs);
  std::vector<const void*> data;
  std::string operands;  // what the trampoline reads once per layout (host_callback.h)
  for (size_t i = first; i < a.op.inputs.size(); ++i) {
    const mps::TensorType& t = a.InType(i);
    data.push_back(a.in[i]);
    if (i > first) operands += ';';
    operands += DTypeName(t.dtype);
    operands += '[';
    for (size_t d = 0; d < t.shape.size(); ++d) {
      if (d) operands += ',';
      operands += std::to_string(t.shape[d]);
    }
    operands += ']';
  }
  ResultSink sink{&a, std::vector<bool>(a.op.outputs.size() - 1, false), Status::Ok()};
  // Room for a traceback, written only on failure: left uninitialised (zeroing 16 KiB per call was a
  // measurable part of a small callback's round trip) but for the terminator an error-less return keeps.
  constexpr size_t kErrorCapacity = 16384;
  std::unique_ptr<char[]> error(new char[kErrorCapacity]);
  error[0] = '\0';
  int32_t rc;
  {
    DepthGuard inside;
    rc = fn(static_cast<uint64_t>(attrs.callback_id), operands.c_str(), static_cast<int32_t>(data.size()), data.data(),
            static_cast<int32_t>(sink.delivered.size()), &sink, error.get(), static_cast<int64_t>(kErrorCapacity));
  }
  if (!sink.status.ok()) return sink.status;
  if (rc != 0) {
    std::string text(error.get(), strnlen(error.get(), kErrorCapacity));
    return Internal(text.empty() ? "Python callback failed" : text);
  }
  for (size_t i = 0; i < sink.delivered.size(); ++i)
    if (!sink.delivered[i]) return Internal("Python callback: result " + std::to_string(i) + " was not returned");
  return Status::Ok();
}

}  // namespace host

}  // namespace jmp::exec
