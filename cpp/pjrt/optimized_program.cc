#include "pjrt/optimized_program.h"

#include <vector>

#include "lower/sharding.h"
#include "pjrt/execute_sharded.h"

namespace jmp::pjrt {

namespace {

std::string TensorText(const std::vector<int64_t>& shape, DType dtype) {
  std::string out = "tensor<";
  for (int64_t d : shape) out += std::to_string(d) + "x";
  return out + std::string(DTypeName(dtype)) + ">";
}

std::string Join(const std::vector<std::string>& parts) {
  std::string out;
  for (size_t k = 0; k < parts.size(); ++k) out += (k ? ", " : "") + parts[k];
  return out;
}

// An MLIR string literal of sharding text (which holds no quote or backslash).
std::string Quoted(const std::string& s) { return "\"" + s + "\""; }

const mps::TileSharding& At(const std::vector<mps::TileSharding>& shardings, size_t k) {
  static const mps::TileSharding kWhole;
  return k < shardings.size() ? shardings[k] : kWhole;
}

// One device's piece: as in XLA's partitioned module, whose signature is each device's.
std::vector<int64_t> ShardShape(const std::vector<int64_t>& shape, const mps::TileSharding& sharding) {
  StatusOr<std::vector<int64_t>> dims = TileDims(shape, sharding);
  return dims.ok() ? *dims : shape;
}

}  // namespace

std::string OptimizedProgramText(const mps::Graph& graph, const mps::Signature& signature, int64_t num_devices,
                                 const mps::TileTraffic& traffic) {
  std::vector<std::string> arg_types, args, params, result_types, results, outputs;
  for (size_t i = 0; i < graph.inputs.size(); ++i) {
    const DType dtype =
        i < signature.input_dtypes.size() ? signature.input_dtypes[i] : graph.type(graph.inputs[i]).dtype;
    const mps::TileSharding& sharding = At(signature.input_shardings, i);
    arg_types.push_back(TensorText(ShardShape(graph.type(graph.inputs[i]).shape, sharding), dtype));
    args.push_back("%arg" + std::to_string(i));
    params.push_back(Quoted(mps::HloShardingText(sharding, num_devices)));
  }
  for (size_t j = 0; j < graph.outputs.size(); ++j) {
    const DType dtype =
        j < signature.output_dtypes.size() ? signature.output_dtypes[j] : graph.type(graph.outputs[j]).dtype;
    const mps::TileSharding& sharding = At(signature.output_shardings, j);
    result_types.push_back(TensorText(ShardShape(graph.type(graph.outputs[j]).shape, sharding), dtype));
    results.push_back(graph.outputs.size() == 1 ? "%0" : "%0#" + std::to_string(j));
    outputs.push_back(mps::HloShardingText(sharding, num_devices));
  }
  std::string attrs = "mhlo.num_partitions = " + std::to_string(num_devices) + " : i32";
  if (!params.empty()) attrs += ", mhlo.spmd_parameters_shardings = [" + Join(params) + "]";
  if (outputs.size() == 1) attrs += ", mhlo.spmd_output_sharding = " + Quoted(outputs[0]);
  if (outputs.size() > 1) attrs += ", mhlo.spmd_output_sharding = " + Quoted("{" + Join(outputs) + "}");

  std::string text = "module @main attributes {" + attrs + "} {\n";
  text += "  func.func public @main(";
  for (size_t i = 0; i < args.size(); ++i) text += (i ? ", " : "") + args[i] + ": " + arg_types[i];
  text += ") -> (" + Join(result_types) + ") {\n";
  if (!results.empty()) {
    text += "    %0";
    if (results.size() > 1) text += ":" + std::to_string(results.size());
    std::vector<std::string> moves;
    if (traffic.all_gathers) moves.push_back(std::to_string(traffic.all_gathers) + " all-gather");
    if (traffic.all_reduces) moves.push_back(std::to_string(traffic.all_reduces) + " all-reduce");
    const std::string config = moves.empty() ? "" : " {backend_config = \"between devices: " + Join(moves) + "\"}";
    text += " = stablehlo.custom_call @jax_metal_program(" + Join(args) + ")" + config + " : (" + Join(arg_types) +
            ") -> (" + Join(result_types) + ")\n";
    text += "    return " + Join(results) + " : " + Join(result_types) + "\n";
  } else {
    text += "    return\n";
  }
  return text + "  }\n}\n";
}

}  // namespace jmp::pjrt
