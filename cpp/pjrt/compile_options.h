// The compile options JAX passes (a serialized xla.CompileOptionsProto), checked as XLA checks them:
// each of env_option_overrides (jit's `compiler_options`) must name a known option and carry a value of
// its type; otherwise compiling fails with an error naming the option. Of the build options, the
// replicas, partitions and device assignment decide where a program runs; no option changes what it
// compiles.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "support/status.h"

namespace jmp::pjrt {

// One env_option_overrides entry: the option's name and its value as the proto's oneof holds it.
struct OptionOverride {
  enum class Kind { kString, kBool, kInt, kDouble, kNone } kind = Kind::kNone;
  std::string name;
  std::string s;
  bool b = false;
  int64_t i = 0;
  double d = 0;
};

// The overrides in a serialized CompileOptionsProto; InvalidArgument when the bytes are not one.
StatusOr<std::vector<OptionOverride>> ReadOptionOverrides(const uint8_t* bytes, size_t size);

// What ExecutableBuildOptionsProto (CompileOptionsProto field 3) says about devices.
struct BuildOptions {
  int64_t num_replicas = 1;
  int64_t num_partitions = 1;
  int64_t device_ordinal = -1;  // -1: not set
  // The device assignment's device ids, replica-major (replica r, partition p at r * num_partitions + p);
  // empty when the options carry none.
  std::vector<int64_t> device_assignment;
};
StatusOr<BuildOptions> ReadBuildOptions(const uint8_t* bytes, size_t size);

// Ok, or InvalidArgument naming the first override with an unknown name or a value of the wrong type.
Status CheckCompileOptions(const uint8_t* bytes, size_t size);

}  // namespace jmp::pjrt
