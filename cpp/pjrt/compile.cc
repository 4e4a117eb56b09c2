#include "pjrt/compile.h"

#include <cstdio>
#include <cstring>
#include <utility>

#include "lower/lower.h"
#include "pjrt/conversions.h"
#include "stablehlo/ir.h"

namespace jmp::pjrt {

namespace {

// What XLA:CPU also runs on the caller's thread: a program of a few small ops.
bool RunsInline(const mps::Graph& g) {
  constexpr size_t kInlineBytes = size_t{256} << 10;
  size_t bytes = 0;
  for (const mps::Op& op : g.ops)
    if (!op.subgraphs.empty() || mps::OpKindHostOnly(op.kind)) return false;
  for (const mps::TensorType& t : g.values) bytes += t.ByteSize();
  return bytes <= kInlineBytes;
}

std::string Fingerprint(const uint8_t* code, size_t code_size) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the artifact
  for (size_t i = 0; i < code_size; ++i) h = (h ^ code[i]) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

}  // namespace

StatusOr<std::shared_ptr<CompiledProgram>> CompileProgram(exec::Executor& executor, std::string_view format,
                                                          const uint8_t* code, size_t code_size) {
  if (format != "mlir")
    return Unimplemented("program format '" + std::string(format) + "' is not supported; expected 'mlir'");
  JMP_ASSIGN_OR_RETURN(shlo::Module module, shlo::ReadArtifact(code, code_size));
  auto program = std::make_shared<CompiledProgram>();
  JMP_ASSIGN_OR_RETURN(mps::LoweredProgram lowered, mps::LowerModule(module));
  program->graph = std::move(lowered.graph);
  program->signature = std::move(lowered.signature);
  JMP_ASSIGN_OR_RETURN(program->executable, executor.Compile(program->graph));
  program->in_place = program->executable->OutputsMayAliasInputs();
  program->runs_inline = RunsInline(program->graph);
  program->name = "main";
  program->fingerprint = Fingerprint(code, code_size);
  program->code.assign(code, code + code_size);
  for (size_t j = 0; j < program->graph.outputs.size(); ++j) {
    const mps::TensorType& t = program->graph.type(program->graph.outputs[j]);
    program->output_types.push_back(ToBufferType(program->signature.output_dtypes[j]));
    program->output_ranks.push_back(t.shape.size());
    program->output_dims_flat.insert(program->output_dims_flat.end(), t.shape.begin(), t.shape.end());
    program->output_memory_kinds.push_back("device");
    program->output_memory_kind_sizes.push_back(6);
    program->output_bytes.push_back(t.ByteSize());
  }
  return program;
}

namespace {

// Bumped whenever what a serialized program means changes; a cache entry of another version is refused
// (JAX then compiles afresh).
constexpr char kSerialMagic[8] = {'J', 'M', 'P', 'X', 'E', 'C', '0', '1'};

}  // namespace

std::string SerializeProgram(const CompiledProgram& program) {
  std::string out(kSerialMagic, sizeof(kSerialMagic));
  uint64_t n = program.code.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out.append(reinterpret_cast<const char*>(program.code.data()), program.code.size());
  return out;
}

StatusOr<std::shared_ptr<CompiledProgram>> DeserializeProgram(exec::Executor& executor, const uint8_t* bytes,
                                                              size_t size) {
  constexpr size_t kHeader = sizeof(kSerialMagic) + 8;
  if (!bytes || size < kHeader || std::memcmp(bytes, kSerialMagic, sizeof(kSerialMagic)) != 0)
    return InvalidArgument("not an executable serialized by this version of jax-metal-plugin");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(bytes[sizeof(kSerialMagic) + i]) << (8 * i);
  if (n != size - kHeader) return InvalidArgument("serialized executable: truncated or padded");
  return CompileProgram(executor, "mlir", bytes + kHeader, static_cast<size_t>(n));
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
