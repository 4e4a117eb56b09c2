#include "pjrt/program_serial.h"

#include <cstring>
#include <iterator>
#include <utility>

#include "exec/work_counters.h"
#include "mps/graph_serial.h"
#include "support/byte_stream.h"

namespace jmp::pjrt {

namespace {

// Bumped whenever the layout below changes.
constexpr char kMagic[8] = {'J', 'M', 'P', 'X', 'E', 'C', '0', '6'};
constexpr char kWhat[] = "serialized executable";

void WriteDTypes(const std::vector<DType>& v, ByteWriter& out) {
  out.U64(v.size());
  for (DType d : v) out.U64(static_cast<uint64_t>(d));
}

StatusOr<std::vector<DType>> ReadDTypes(ByteReader& in, size_t expected) {
  JMP_ASSIGN_OR_RETURN(size_t n, in.Count(8));
  if (n != expected) return in.Malformed("element types do not match the graph");
  std::vector<DType> v;
  for (size_t i = 0; i < n; ++i) {
    JMP_ASSIGN_OR_RETURN(uint64_t d, in.U64());
    if (d >= std::size(kAllDTypes)) return in.Malformed("unknown element type");
    v.push_back(static_cast<DType>(d));
  }
  return v;
}

void WriteSpaces(const std::vector<MemorySpace>& v, ByteWriter& out) {
  out.U64(v.size());
  for (MemorySpace s : v) out.U64(static_cast<uint64_t>(s));
}

StatusOr<std::vector<MemorySpace>> ReadSpaces(ByteReader& in, size_t expected) {
  JMP_ASSIGN_OR_RETURN(size_t n, in.Count(8));
  if (n != expected && n != 0) return in.Malformed("output memory kinds do not match the graph");
  std::vector<MemorySpace> v;
  for (size_t i = 0; i < n; ++i) {
    JMP_ASSIGN_OR_RETURN(uint64_t s, in.U64());
    if (s >= kNumMemorySpaces) return in.Malformed("unknown memory kind");
    v.push_back(static_cast<MemorySpace>(s));
  }
  return v;
}

void WriteShardings(const std::vector<mps::TileSharding>& v, ByteWriter& out) {
  out.U64(v.size());
  for (const mps::TileSharding& s : v) {
    out.I64s(s.tiles);
    out.I64s(s.device_tile);
    out.I64(s.parts);
  }
}

StatusOr<std::vector<mps::TileSharding>> ReadShardings(ByteReader& in, size_t expected, int64_t devices) {
  JMP_ASSIGN_OR_RETURN(size_t n, in.Count(16));
  if (n != expected && n != 0) return in.Malformed("shardings do not match the graph");
  std::vector<mps::TileSharding> v(n);
  for (mps::TileSharding& s : v) {
    JMP_ASSIGN_OR_RETURN(s.tiles, in.I64s());
    JMP_ASSIGN_OR_RETURN(s.device_tile, in.I64s());
    JMP_ASSIGN_OR_RETURN(s.parts, in.I64());
    if (s.parts < 1 || (s.parts > 1 && (s.tiles.empty() || s.tiles[0] != s.parts)))
      return in.Malformed("a sharding's parts do not match its tiles");
    int64_t tiles = 1;
    for (int64_t t : s.tiles) {
      if (t < 1 || t > devices) return in.Malformed("a sharding's tile count is out of range");
      tiles *= t;
    }
    if (!s.tiles.empty() && static_cast<int64_t>(s.device_tile.size()) != devices)
      return in.Malformed("a sharding does not place every device");
    for (int64_t t : s.device_tile)
      if (t < 0 || t >= tiles) return in.Malformed("a sharding's device holds no tile");
  }
  return v;
}

}  // namespace

StatusOr<std::string> SerializeProgram(const CompiledProgram& program, const std::string& platform_version) {
  if (mps::HasPythonCallbacks(program.graph))
    return FailedPrecondition(
        "a program that calls back into Python cannot be serialized: its callbacks live in "
        "this process");
  JMP_ASSIGN_OR_RETURN(std::string compiled, program.executable->Serialize());
  ByteWriter out;
  out.str().append(kMagic, sizeof(kMagic));
  out.Bytes(platform_version);
  out.Bytes(program.name);
  out.Bytes(program.fingerprint);
  mps::WriteGraph(program.graph, out);
  WriteDTypes(program.signature.input_dtypes, out);
  WriteDTypes(program.signature.output_dtypes, out);
  WriteSpaces(program.output_spaces, out);
  out.I64s(program.signature.aliased_output);
  out.U64(program.signature.donated.size());
  for (bool d : program.signature.donated) out.U64(d ? 1 : 0);
  out.U64(static_cast<uint64_t>(program.num_replicas));
  out.U64(static_cast<uint64_t>(program.num_partitions));
  WriteShardings(program.signature.input_shardings, out);
  WriteShardings(program.signature.output_shardings, out);
  out.Bytes(compiled);
  return std::move(out.str());
}

StatusOr<std::shared_ptr<CompiledProgram>> DeserializeProgram(exec::Executor& executor,
                                                              const std::string& platform_version, const uint8_t* bytes,
                                                              size_t size) {
  if (!bytes || size < sizeof(kMagic) || std::memcmp(bytes, kMagic, sizeof(kMagic)) != 0)
    return InvalidArgument(
        "not an executable serialized by this version of jax-metal-plugin (the bytes lack its format's header)");
  ByteReader in(bytes + sizeof(kMagic), size - sizeof(kMagic), kWhat);
  JMP_ASSIGN_OR_RETURN(std::string_view made_by, in.Bytes());
  if (made_by != platform_version)
    return InvalidArgument(
        "the executable was serialized by another build of jax-metal-plugin or for another "
        "executor (" +
        std::string(made_by) + "; this is " + platform_version + ")");
  auto program = std::make_shared<CompiledProgram>();
  JMP_ASSIGN_OR_RETURN(std::string_view name, in.Bytes());
  JMP_ASSIGN_OR_RETURN(std::string_view fingerprint, in.Bytes());
  program->name = std::string(name);
  program->fingerprint = std::string(fingerprint);
  JMP_ASSIGN_OR_RETURN(program->graph, mps::ReadGraph(in));
  const size_t n = program->graph.inputs.size();
  JMP_ASSIGN_OR_RETURN(program->signature.input_dtypes, ReadDTypes(in, n));
  JMP_ASSIGN_OR_RETURN(program->signature.output_dtypes, ReadDTypes(in, program->graph.outputs.size()));
  JMP_ASSIGN_OR_RETURN(program->output_spaces, ReadSpaces(in, program->graph.outputs.size()));
  JMP_ASSIGN_OR_RETURN(program->signature.aliased_output, in.I64s());
  JMP_ASSIGN_OR_RETURN(size_t donated, in.Count(8));
  if (program->signature.aliased_output.size() != n || donated != n)
    return in.Malformed("donation does not match the graph");
  for (size_t i = 0; i < n; ++i) {
    JMP_ASSIGN_OR_RETURN(uint64_t d, in.U64());
    program->signature.donated.push_back(d != 0);
  }
  JMP_ASSIGN_OR_RETURN(uint64_t replicas, in.U64());
  JMP_ASSIGN_OR_RETURN(uint64_t partitions, in.U64());
  if (replicas < 1 || partitions < 1 || replicas * partitions > 4096) return in.Malformed("device counts out of range");
  program->num_replicas = static_cast<int64_t>(replicas);
  program->num_partitions = static_cast<int64_t>(partitions);
  const int64_t devices = program->num_replicas * program->num_partitions;
  JMP_ASSIGN_OR_RETURN(program->signature.input_shardings, ReadShardings(in, n, devices));
  JMP_ASSIGN_OR_RETURN(program->signature.output_shardings, ReadShardings(in, program->graph.outputs.size(), devices));
  if (devices > 1 && (program->signature.input_shardings.size() != n ||
                      program->signature.output_shardings.size() != program->graph.outputs.size()))
    return in.Malformed("a program for several devices without its shardings");
  JMP_ASSIGN_OR_RETURN(std::string_view compiled, in.Bytes());
  if (in.left() != 0) return in.Malformed("bytes after its end");
  JMP_ASSIGN_OR_RETURN(program->executable, executor.Load(program->graph, compiled));
  exec::Counters().programs_deserialized.fetch_add(1, std::memory_order_relaxed);
  program->in_place = program->executable->OutputsMayAliasInputs();
  DescribeOutputs(*program);
  JMP_RETURN_IF_ERROR(AddTiledProgram(executor, *program));
  return program;
}

}  // namespace jmp::pjrt
