// Python host callbacks (the PythonCallback op): the C ABI through which the Python package installs
// its trampoline, and what the rest of the runtime needs to know about a callback in progress.
//
// The plugin library exports jmp_set_python_callback (cpp/plugin/get_pjrt_api.cc); jax_metal_plugin's
// _callbacks.py calls it through ctypes at initialize(). No exception crosses this boundary: the
// trampoline returns nonzero and writes the Python exception's text into `error`.
#pragma once

#include <cstdint>

#include "support/status.h"

extern "C" {

// One call of the callback registered under `callback_id`. `operands` describes its operands, each
// as its dtype in MLIR spelling ("f32", "bf16", "i1", "complex<f32>") and its dims, ';' between them:
// "f32[]", "f32[2,3];i1[4]", "" for none. It is the same text for every call with the same operand
// types, so a trampoline can keep what it makes of it, and per call read only `data`: the operands'
// data pointers (host memory, read-only, null allowed for zero-size arrays). Decoding a description per
// call cost more than copying a small operand.
// The trampoline hands each result to jmp_python_callback_result(results, i, ...) while it holds the
// array alive; the runtime checks it against the declared type and copies it. Returns 0 on success;
// otherwise nonzero with a NUL-terminated message in `error` (at most error_capacity bytes).
typedef int32_t (*jmp_python_callback_fn)(uint64_t callback_id, const char* operands, int32_t num_operands,
                                          const void* const* data, int32_t num_results, void* results, char* error,
                                          int64_t error_capacity);

}  // extern "C"

namespace jmp::exec {

// Installs (or, with null, removes) the trampoline the PythonCallback op calls.
void SetPythonCallbackTrampoline(jmp_python_callback_fn fn);

// Result i of the call `results` belongs to: its bytes, dtype name and shape, checked against the
// declared type (an error naming both when they differ) and copied into the op's output.
Status DeliverPythonCallbackResult(void* results, int32_t index, const void* data, const char* dtype, int32_t rank,
                                   const int64_t* dims);

// True on a thread that is inside a Python callback (the callback may call JAX again: work it submits
// then runs on that thread at once, never behind the queue that is waiting for the callback).
bool InPythonCallback();

}  // namespace jmp::exec
