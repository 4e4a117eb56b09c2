#include "pjrt/compile_options.h"

#include <cstring>
#include <map>
#include <string_view>

namespace jmp::pjrt {

namespace {

// Protobuf's wire format, just what reading CompileOptionsProto's field 7 (map<string,
// OptionOverrideProto> env_option_overrides) and the device fields of its field 3 (executable build
// options) needs; every other field is skipped.
class Wire {
 public:
  Wire(const uint8_t* p, size_t n) : p_(p), end_(p + n) {}
  bool done() const { return p_ >= end_; }

  bool Varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64 && p_ < end_; shift += 7) {
      uint8_t byte = *p_++;
      *v |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return true;
    }
    return false;
  }
  // A field's number, its wire type, and for length-delimited ones the bytes.
  bool Next(uint32_t* field, uint32_t* wire, Wire* sub, uint64_t* scalar) {
    uint64_t tag;
    if (!Varint(&tag)) return false;
    *field = static_cast<uint32_t>(tag >> 3);
    *wire = static_cast<uint32_t>(tag & 7);
    switch (*wire) {
      case 0: return Varint(scalar);
      case 1: return Fixed(8, scalar);
      case 5: return Fixed(4, scalar);
      case 2: {
        uint64_t len;
        if (!Varint(&len) || len > static_cast<uint64_t>(end_ - p_)) return false;
        *sub = Wire(p_, static_cast<size_t>(len));
        p_ += len;
        return true;
      }
      default: return false;  // groups (3, 4) are not in these messages
    }
  }
  std::string Str() const { return std::string(reinterpret_cast<const char*>(p_), static_cast<size_t>(end_ - p_)); }

 private:
  bool Fixed(size_t n, uint64_t* v) {
    if (static_cast<size_t>(end_ - p_) < n) return false;
    *v = 0;
    std::memcpy(v, p_, n);  // little-endian, as the wire format is
    p_ += n;
    return true;
  }
  const uint8_t* p_;
  const uint8_t* end_;
};

Status Malformed() { return InvalidArgument("compile options: not a serialized CompileOptionsProto"); }

StatusOr<OptionOverride> ReadEntry(Wire entry) {
  OptionOverride o;
  uint32_t field, wire;
  uint64_t scalar = 0;
  Wire sub(nullptr, 0);
  while (!entry.done()) {
    if (!entry.Next(&field, &wire, &sub, &scalar)) return Malformed();
    if (field == 1 && wire == 2) o.name = sub.Str();
    if (field != 2 || wire != 2) continue;
    Wire value = sub;
    while (!value.done()) {
      if (!value.Next(&field, &wire, &sub, &scalar)) return Malformed();
      if (field == 1 && wire == 2) {
        o.kind = OptionOverride::Kind::kString;
        o.s = sub.Str();
      } else if (field == 2 && wire == 0) {
        o.kind = OptionOverride::Kind::kBool;
        o.b = scalar != 0;
      } else if (field == 3 && wire == 0) {
        o.kind = OptionOverride::Kind::kInt;
        o.i = static_cast<int64_t>(scalar);
      } else if (field == 4 && wire == 1) {
        o.kind = OptionOverride::Kind::kDouble;
        std::memcpy(&o.d, &scalar, sizeof(o.d));
      }
    }
  }
  return o;
}

enum class Type { kBool, kInt, kString, kDouble, kEnum };

// XLA's DebugOptions fields that JAX programs pass as compiler options, with their types. A name
// missing here is refused, as XLA refuses one missing from DebugOptions; none changes what this
// plugin compiles (one device, its own lowering), so adding one only needs its type.
const std::map<std::string_view, Type>& KnownOptions() {
  static const std::map<std::string_view, Type> known = {
      {"xla_allow_excess_precision", Type::kBool},
      {"xla_backend_optimization_level", Type::kInt},
      {"xla_cpu_enable_concurrency_optimized_scheduler", Type::kBool},
      {"xla_cpu_enable_fast_math", Type::kBool},
      {"xla_cpu_enable_fast_min_max", Type::kBool},
      {"xla_cpu_fast_math_honor_division", Type::kBool},
      {"xla_cpu_fast_math_honor_functions", Type::kBool},
      {"xla_cpu_fast_math_honor_infs", Type::kBool},
      {"xla_cpu_fast_math_honor_nans", Type::kBool},
      {"xla_cpu_multi_thread_eigen", Type::kBool},
      {"xla_cpu_parallel_codegen_split_count", Type::kInt},
      {"xla_cpu_prefer_vector_width", Type::kInt},
      {"xla_cpu_strict_dot_conv_math", Type::kBool},
      {"xla_cpu_use_thunk_runtime", Type::kBool},
      {"xla_detailed_logging", Type::kBool},
      {"xla_disable_all_hlo_passes", Type::kBool},
      {"xla_disable_hlo_passes", Type::kString},
      {"xla_dump_disable_metadata", Type::kBool},
      {"xla_dump_hlo_as_dot", Type::kBool},
      {"xla_dump_hlo_as_html", Type::kBool},
      {"xla_dump_hlo_as_proto", Type::kBool},
      {"xla_dump_hlo_as_text", Type::kBool},
      {"xla_dump_hlo_module_re", Type::kString},
      {"xla_dump_hlo_pass_re", Type::kString},
      {"xla_dump_include_timestamp", Type::kBool},
      {"xla_dump_large_constants", Type::kBool},
      {"xla_dump_max_hlo_modules", Type::kInt},
      {"xla_dump_module_metadata", Type::kBool},
      {"xla_dump_to", Type::kString},
      {"xla_embed_ir_in_executable", Type::kBool},
      {"xla_enable_dumping", Type::kBool},
      {"xla_enable_hlo_passes_only", Type::kString},
      {"xla_force_host_platform_device_count", Type::kInt},
      {"xla_gpu_auto_spmd_partitioning_memory_budget_ratio", Type::kDouble},
      {"xla_gpu_autotune_level", Type::kInt},
      {"xla_gpu_cuda_data_dir", Type::kString},
      {"xla_gpu_deterministic_ops", Type::kBool},
      {"xla_gpu_enable_command_buffer", Type::kEnum},
      {"xla_gpu_enable_latency_hiding_scheduler", Type::kBool},
      {"xla_gpu_enable_triton_gemm", Type::kBool},
      {"xla_gpu_exclude_nondeterministic_ops", Type::kBool},
      {"xla_hlo_profile", Type::kBool},
      {"xla_llvm_disable_expensive_passes", Type::kBool},
      {"xla_step_marker_location", Type::kEnum},
      {"xla_test_all_input_layouts", Type::kBool},
  };
  return known;
}

bool ParsesAsInt(const std::string& s) {
  if (s.empty()) return false;
  size_t i = s[0] == '-' || s[0] == '+' ? 1 : 0;
  if (i == s.size()) return false;
  for (; i < s.size(); ++i)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}

// The value as XLA's message shows it.
std::string Shown(const OptionOverride& o) {
  switch (o.kind) {
    case OptionOverride::Kind::kString: return o.s;
    case OptionOverride::Kind::kBool: return o.b ? "1" : "0";
    case OptionOverride::Kind::kInt: return std::to_string(o.i);
    case OptionOverride::Kind::kDouble: {
      std::string s = std::to_string(o.d);
      while (s.size() > 1 && s.back() == '0') s.pop_back();
      if (!s.empty() && s.back() == '.') s.pop_back();
      return s;
    }
    case OptionOverride::Kind::kNone: return "";
  }
  return "";
}

// Whether `o` is a value of `type`: the proto's own kind, or a string that spells one. (XLA takes
// "True"/"False" for a bool given as text, a decimal for an int, any name or number for an enum.)
bool Fits(const OptionOverride& o, Type type) {
  using K = OptionOverride::Kind;
  switch (type) {
    case Type::kBool: return o.kind == K::kBool || (o.kind == K::kString && (o.s == "True" || o.s == "False"));
    case Type::kInt: return o.kind == K::kInt || (o.kind == K::kString && ParsesAsInt(o.s));
    case Type::kString: return o.kind == K::kString;
    case Type::kDouble: return o.kind == K::kDouble || o.kind == K::kInt;
    case Type::kEnum: return o.kind == K::kString || o.kind == K::kInt;
  }
  return false;
}

const char* TypeName(Type type) {
  switch (type) {
    case Type::kBool: return "bool";
    case Type::kInt: return "int32";
    case Type::kString: return "string";
    case Type::kDouble: return "double";
    case Type::kEnum: return "enum";
  }
  return "?";
}

// Appends a repeated int64 field's values, packed (wire type 2) or one by one (wire type 0).
bool AppendInts(uint32_t wire, Wire packed, uint64_t scalar, std::vector<int64_t>* out) {
  if (wire == 0) {
    out->push_back(static_cast<int64_t>(scalar));
    return true;
  }
  if (wire != 2) return false;
  while (!packed.done()) {
    uint64_t v;
    if (!packed.Varint(&v)) return false;
    out->push_back(static_cast<int64_t>(v));
  }
  return true;
}

// DeviceAssignmentProto{replica_count = 1, computation_count = 2, computation_devices = 3
// {replica_device_ids = 1}}: devices by partition, then replica; returned replica-major.
Status ReadDeviceAssignment(Wire w, BuildOptions* o) {
  uint32_t field, wire;
  uint64_t scalar = 0;
  Wire sub(nullptr, 0);
  int64_t replicas = 0, partitions = 0;
  std::vector<std::vector<int64_t>> by_partition;
  while (!w.done()) {
    if (!w.Next(&field, &wire, &sub, &scalar)) return Malformed();
    if (field == 1 && wire == 0) replicas = static_cast<int64_t>(scalar);
    if (field == 2 && wire == 0) partitions = static_cast<int64_t>(scalar);
    if (field != 3 || wire != 2) continue;
    by_partition.emplace_back();
    Wire device = sub;
    while (!device.done()) {
      if (!device.Next(&field, &wire, &sub, &scalar)) return Malformed();
      if (field == 1 && !AppendInts(wire, sub, scalar, &by_partition.back())) return Malformed();
    }
  }
  if (replicas < 1 || partitions < 1 || static_cast<int64_t>(by_partition.size()) != partitions)
    return InvalidArgument("compile options: a device assignment of " + std::to_string(replicas) + " replicas and " +
                           std::to_string(partitions) + " partitions lists " + std::to_string(by_partition.size()) +
                           " partitions");
  for (const auto& ids : by_partition)
    if (static_cast<int64_t>(ids.size()) != replicas)
      return InvalidArgument("compile options: a device assignment's partition does not list one device per replica");
  o->device_assignment.clear();
  for (int64_t r = 0; r < replicas; ++r)
    for (int64_t p = 0; p < partitions; ++p)
      o->device_assignment.push_back(by_partition[static_cast<size_t>(p)][static_cast<size_t>(r)]);
  return Status::Ok();
}

// Calls `each` with every length-delimited field `wanted` of a CompileOptionsProto.
template <typename Each>
Status ForEachMessage(const uint8_t* bytes, size_t size, uint32_t wanted, Each each) {
  Wire wire(bytes, size);
  uint32_t field, type;
  uint64_t scalar = 0;
  Wire sub(nullptr, 0);
  while (!wire.done()) {
    if (!wire.Next(&field, &type, &sub, &scalar)) return Malformed();
    if (field == wanted && type == 2) JMP_RETURN_IF_ERROR(each(sub));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<BuildOptions> ReadBuildOptions(const uint8_t* bytes, size_t size) {
  BuildOptions o;
  // ExecutableBuildOptionsProto (field 3): device_ordinal = 1, num_replicas = 4, num_partitions = 5,
  // device_assignment = 9.
  JMP_RETURN_IF_ERROR(ForEachMessage(bytes, size, 3, [&o](Wire build) -> Status {
    uint32_t field, type;
    uint64_t scalar = 0;
    Wire sub(nullptr, 0);
    while (!build.done()) {
      if (!build.Next(&field, &type, &sub, &scalar)) return Malformed();
      if (type == 0 && field == 1) o.device_ordinal = static_cast<int64_t>(scalar);
      if (type == 0 && field == 4) o.num_replicas = static_cast<int64_t>(scalar);
      if (type == 0 && field == 5) o.num_partitions = static_cast<int64_t>(scalar);
      if (type == 2 && field == 9) JMP_RETURN_IF_ERROR(ReadDeviceAssignment(sub, &o));
    }
    return Status::Ok();
  }));
  if (o.num_replicas < 1) o.num_replicas = 1;  // 0: unset, as XLA reads it
  if (o.num_partitions < 1) o.num_partitions = 1;
  if (o.num_replicas > 1024 || o.num_partitions > 1024)
    return InvalidArgument("compile options: " + std::to_string(o.num_replicas) + " replicas of " +
                           std::to_string(o.num_partitions) + " partitions is more than any device count");
  if (!o.device_assignment.empty() &&
      static_cast<int64_t>(o.device_assignment.size()) != o.num_replicas * o.num_partitions)
    return InvalidArgument("compile options: the device assignment does not match " + std::to_string(o.num_replicas) +
                           " replicas of " + std::to_string(o.num_partitions) + " partitions");
  return o;
}

StatusOr<std::vector<OptionOverride>> ReadOptionOverrides(const uint8_t* bytes, size_t size) {
  std::vector<OptionOverride> out;
  JMP_RETURN_IF_ERROR(ForEachMessage(bytes, size, 7, [&out](Wire entry) -> Status {
    JMP_ASSIGN_OR_RETURN(OptionOverride o, ReadEntry(entry));
    out.push_back(std::move(o));
    return Status::Ok();
  }));
  return out;
}

Status CheckCompileOptions(const uint8_t* bytes, size_t size) {
  if (!bytes || !size) return Status::Ok();
  JMP_ASSIGN_OR_RETURN(std::vector<OptionOverride> overrides, ReadOptionOverrides(bytes, size));
  const auto& known = KnownOptions();
  for (const OptionOverride& o : overrides) {
    auto it = known.find(o.name);
    if (it == known.end()) return InvalidArgument("No such compile option: '" + o.name + "'");
    if (!Fits(o, it->second))
      return InvalidArgument("While setting option " + o.name + ", '" + Shown(o) + "' is not a valid " +
                             TypeName(it->second) + " value.");
  }
  return Status::Ok();
}

}  // namespace jmp::pjrt
