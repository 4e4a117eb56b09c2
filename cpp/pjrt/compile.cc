#include "pjrt/compile.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include "exec/work_counters.h"
#include "exec/work_estimate.h"
#include "lower/lower.h"
#include "lower/tile_signature.h"
#include "mps/verify.h"
#include "pjrt/conversions.h"
#include "pjrt/execute_sharded.h"
#include "pjrt/optimized_program.h"
#include "stablehlo/ir.h"
#include "support/byte_stream.h"
#include "support/trace.h"

namespace jmp::pjrt {

namespace {

// What XLA:CPU also runs on the caller's thread: a program that is done in about the time two thread
// handoffs take. Its values must be small (a loop's or a branch's counted once), it must hold no
// host-only op, and its work must be bounded small: a loop counts its body once per iteration, so a
// fori_loop of cheap iterations runs inline, while a long one (or one whose trip count depends on data)
// goes to the worker and the call returns at once, as asynchronous dispatch promises.
bool SmallValues(const mps::Graph& g, size_t& bytes) {
  constexpr size_t kInlineBytes = size_t{256} << 10;
  for (const mps::Op& op : g.ops) {
    if (mps::OpKindHostOnly(op.kind)) return false;
    if (op.subgraphs.empty()) continue;
    if (op.kind != mps::OpKind::kWhile && op.kind != mps::OpKind::kIf) return false;
    for (const mps::Graph& sub : op.subgraphs)
      if (!SmallValues(sub, bytes)) return false;
  }
  for (const mps::TensorType& t : g.values) bytes += t.ByteSize();
  return bytes <= kInlineBytes;
}

bool RunsInline(const mps::Graph& g) {
  // About a millisecond of the host executor's work: a thousand iterations of a loop over small tensors
  // fit, twenty thousand 64x64 matrix products do not.
  constexpr double kInlineWork = double{1 << 21};
  size_t bytes = 0;
  return SmallValues(g, bytes) && exec::EstimateWork(g) <= kInlineWork;
}

// Whether any op, at any depth, calls into Python.
bool CallsPython(const mps::Graph& g) {
  for (const mps::Op& op : g.ops) {
    if (op.kind == mps::OpKind::kPythonCallback) return true;
    for (const mps::Graph& body : op.subgraphs)
      if (CallsPython(body)) return true;
  }
  return false;
}

// The memory space of result j, from the kind the lowering read off @main.
StatusOr<MemorySpace> ResultSpace(const mps::Signature& signature, size_t j) {
  StatusOr<MemorySpace> space = SpaceOfKind(signature.output_memory_kinds.at(j));
  if (!space.ok()) return InvalidArgument("@main result " + std::to_string(j) + ": " + space.status().message());
  return space;
}

std::string Fingerprint(const uint8_t* code, size_t code_size) {
  const uint64_t h = Fnv1a(std::string_view(reinterpret_cast<const char*>(code), code_size));
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

}  // namespace

StatusOr<std::shared_ptr<CompiledProgram>> CompileProgram(exec::Executor& executor, std::string_view format,
                                                          const uint8_t* code, size_t code_size,
                                                          const mps::Partitioning& partitioning) {
  if (format != "mlir")
    return Unimplemented("program format '" + std::string(format) + "' is not supported; expected 'mlir'");
  trace::Scope scope(trace::Line::kCompile, "compile");
  JMP_ASSIGN_OR_RETURN(shlo::Module module, shlo::ReadArtifact(code, code_size));
  auto program = std::make_shared<CompiledProgram>();
  JMP_ASSIGN_OR_RETURN(mps::LoweredProgram lowered, mps::LowerModule(module, partitioning));
  program->num_replicas = partitioning.num_replicas;
  program->num_partitions = partitioning.num_partitions;
  program->graph = std::move(lowered.graph);
  program->signature = std::move(lowered.signature);
  JMP_ASSIGN_OR_RETURN(program->executable, executor.Compile(program->graph));
  scope.Stat("mps_ops", std::to_string(program->graph.ops.size()));
  exec::Counters().programs_lowered.fetch_add(1, std::memory_order_relaxed);
  program->in_place = program->executable->OutputsMayAliasInputs();
  program->name = "main";
  program->fingerprint = Fingerprint(code, code_size);
  for (size_t j = 0; j < program->graph.outputs.size(); ++j) {
    JMP_ASSIGN_OR_RETURN(MemorySpace space, ResultSpace(program->signature, j));
    program->output_spaces.push_back(space);
  }
  DescribeOutputs(*program);
  JMP_RETURN_IF_ERROR(AddTiledProgram(executor, *program));
  return program;
}

namespace {

// A program over tiles, never donating (the devices' shards are JAX's buffers, read as they are).
StatusOr<std::shared_ptr<CompiledProgram>> CompileOverTiles(exec::Executor& executor, const CompiledProgram& p,
                                                            mps::Graph graph, std::vector<DType> input_dtypes,
                                                            std::vector<DType> output_dtypes,
                                                            std::vector<MemorySpace> output_spaces) {
  auto tiles = std::make_shared<CompiledProgram>();
  tiles->graph = std::move(graph);
  tiles->signature.input_dtypes = std::move(input_dtypes);
  tiles->signature.output_dtypes = std::move(output_dtypes);
  tiles->output_spaces = std::move(output_spaces);
  const size_t n = tiles->graph.inputs.size();
  tiles->signature.aliased_output.assign(n, -1);
  tiles->signature.donated.assign(n, false);
  JMP_ASSIGN_OR_RETURN(tiles->executable, executor.Compile(tiles->graph));
  tiles->in_place = tiles->executable->OutputsMayAliasInputs();
  tiles->name = p.name;
  tiles->fingerprint = p.fingerprint;
  tiles->platform_version = p.platform_version;
  DescribeOutputs(*tiles);
  return tiles;
}

}  // namespace

Status AddTiledProgram(exec::Executor& executor, CompiledProgram& p) {
  if (p.num_replicas * p.num_partitions == 1) return Status::Ok();
  const mps::Signature& sig = p.signature;
  mps::TileTraffic traffic;
  JMP_ASSIGN_OR_RETURN(mps::Graph graph, mps::TileSignature(p.graph, sig, &traffic));
  p.optimized_program = OptimizedProgramText(p.graph, sig, p.num_replicas * p.num_partitions, traffic);
  std::vector<DType> input_dtypes, output_dtypes;
  std::vector<MemorySpace> spaces;
  for (size_t i = 0; i < sig.input_dtypes.size(); ++i)
    for (int64_t t = 0; t < mps::TileCount(sig.input_shardings.at(i)); ++t) input_dtypes.push_back(sig.input_dtypes[i]);
  for (size_t j = 0; j < sig.output_dtypes.size(); ++j)
    for (int64_t t = 0; t < mps::TileCount(sig.output_shardings.at(j)); ++t) {
      output_dtypes.push_back(sig.output_dtypes[j]);
      spaces.push_back(j < p.output_spaces.size() ? p.output_spaces[j] : MemorySpace::kDevice);
    }
  JMP_ASSIGN_OR_RETURN(p.tiles, CompileOverTiles(executor, p, std::move(graph), std::move(input_dtypes),
                                                 std::move(output_dtypes), std::move(spaces)));
  return Status::Ok();
}

StatusOr<std::shared_ptr<CompiledProgram>> TilesKept(exec::Executor& executor, const CompiledProgram& p,
                                                     const std::vector<bool>& keep) {
  const CompiledProgram& tiles = *p.tiles;
  std::lock_guard<std::mutex> lock(p.kept_tiles->mu);
  std::shared_ptr<CompiledProgram>& kept = p.kept_tiles->programs[keep];
  if (kept) return kept;
  std::vector<DType> output_dtypes;
  std::vector<MemorySpace> spaces;
  for (size_t j = 0; j < keep.size(); ++j) {
    if (!keep[j]) continue;
    output_dtypes.push_back(tiles.signature.output_dtypes.at(j));
    spaces.push_back(tiles.output_spaces.at(j));
  }
  JMP_ASSIGN_OR_RETURN(kept,
                       CompileOverTiles(executor, p, mps::KeepOutputs(tiles.graph, keep), tiles.signature.input_dtypes,
                                        std::move(output_dtypes), std::move(spaces)));
  return kept;
}

StatusOr<std::shared_ptr<CompiledProgram>> ProcessPartOf(exec::Executor& executor, const CompiledProgram& p,
                                                         const std::vector<int>& key, const ProcessLayouts& all) {
  const CompiledProgram& tiles = *p.tiles;
  std::lock_guard<std::mutex> lock(p.kept_tiles->mu);
  auto found = p.kept_tiles->parts.find(key);
  if (found != p.kept_tiles->parts.end()) return found->second;
  std::shared_ptr<CompiledProgram>& part = p.kept_tiles->parts[key];
  size_t self = 0;
  const std::vector<mps::ProcessLayout> layouts = all(&self);
  mps::Graph mine;
  for (size_t q = 0; q < layouts.size(); ++q) {
    mps::Graph graph;
    if (!mps::ProcessPart(tiles.graph, layouts[q], &graph)) return part;  // null: exchange arguments
    if (q == self) mine = std::move(graph);
  }
  const mps::ProcessLayout& layout = layouts.at(self);
  std::vector<DType> input_dtypes, output_dtypes;
  std::vector<MemorySpace> spaces;
  for (size_t i = 0; i < layout.holds.size(); ++i)
    if (layout.holds[i]) input_dtypes.push_back(tiles.signature.input_dtypes.at(i));
  for (size_t j = 0; j < layout.returns.size(); ++j) {
    if (!layout.returns[j]) continue;
    output_dtypes.push_back(tiles.signature.output_dtypes.at(j));
    spaces.push_back(tiles.output_spaces.at(j));
  }
  JMP_RETURN_IF_ERROR(mps::VerifyGraph(mine).WithContext("a process's part of the program"));
  JMP_ASSIGN_OR_RETURN(part, CompileOverTiles(executor, p, std::move(mine), std::move(input_dtypes),
                                              std::move(output_dtypes), std::move(spaces)));
  return part;
}

void DescribeOutputs(CompiledProgram& p) {
  p.runs_inline = RunsInline(p.graph);
  p.calls_python = CallsPython(p.graph);
  p.output_types.clear();
  p.output_ranks.clear();
  p.output_dims_flat.clear();
  p.output_memory_kinds.clear();
  p.output_memory_kind_sizes.clear();
  p.output_bytes.clear();
  for (size_t j = 0; j < p.graph.outputs.size(); ++j) {
    const mps::TensorType& t = p.graph.type(p.graph.outputs[j]);
    p.output_types.push_back(ToBufferType(p.signature.output_dtypes.at(j)));
    // Over several devices, what each device holds: its shard.
    std::vector<int64_t> dims = t.shape;
    if (j < p.signature.output_shardings.size()) {
      StatusOr<std::vector<int64_t>> shard = TileDims(t.shape, p.signature.output_shardings[j]);
      if (shard.ok()) dims = *shard;
    }
    p.output_ranks.push_back(dims.size());
    p.output_dims_flat.insert(p.output_dims_flat.end(), dims.begin(), dims.end());
    const std::string_view kind = KindName(j < p.output_spaces.size() ? p.output_spaces[j] : MemorySpace::kDevice);
    p.output_memory_kinds.push_back(kind.data());  // the names are literals: NUL-terminated and static
    p.output_memory_kind_sizes.push_back(kind.size());
    p.output_bytes.push_back(t.ByteSize());
  }
  const int64_t devices = p.num_replicas * p.num_partitions;
  p.optimized_program = devices > 1 ? OptimizedProgramText(p.graph, p.signature, devices) : std::string();
}

ProgramSizes SizesOf(const CompiledProgram& program) {
  const mps::Graph& g = program.graph;
  ProgramSizes sizes;
  for (int v : g.inputs) sizes.arguments += static_cast<int64_t>(g.type(v).ByteSize());
  for (size_t bytes : program.output_bytes) sizes.outputs += static_cast<int64_t>(bytes);
  if (program.in_place)
    for (size_t i = 0; i < g.inputs.size(); ++i)
      if (program.signature.aliased_output[i] >= 0)
        sizes.aliased += static_cast<int64_t>(g.type(g.inputs[i]).ByteSize());
  return sizes;
}

}  // namespace jmp::pjrt
