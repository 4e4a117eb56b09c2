#include "lower/lower.h"

#include <algorithm>
#include <optional>

#include "lower/lower_context.h"
#include "lower/lower_cse.h"
#include "lower/lower_multiply_add.h"
#include "lower/partial_sums.h"
#include "lower/sharding.h"
#include "mps/verify.h"
#include "stablehlo/passes/narrow_types.h"

namespace jmp::mps {

namespace {

// @main's shardings: per argument and per result (both empty for a program on one device).
struct MainShardings {
  std::vector<TileSharding> arguments, results;
};

StatusOr<Graph> LowerMain(const shlo::Module& module, const Partitioning& partitioning, const MainShardings& shardings);
StatusOr<Signature> SignatureOf(const shlo::Func& main, const Graph& graph);

// How each of @main's arguments (results) lies on the devices: its sdy.sharding or mhlo.sharding;
// without one an argument is whole on every device and a result takes the sharding the program states
// for it elsewhere (ResultShardingFinder). Only partitions split values; replicas (pmap's old form) are not
// supported.
StatusOr<std::vector<TileSharding>> ShardingsOf(const shlo::Module& module, const std::vector<std::string>& texts,
                                                const std::vector<shlo::Type>& types, const Partitioning& partitioning,
                                                bool results) {
  if (partitioning.num_replicas > 1)
    return Unimplemented("programs with several replicas (num_replicas " + std::to_string(partitioning.num_replicas) +
                         ") are not supported; the metal platform runs partitioned (SPMD) programs");
  std::vector<TileSharding> out;
  std::optional<ResultShardingFinder> unspecified;  // built at the first result without a sharding
  for (size_t i = 0; i < types.size(); ++i) {
    const std::string text = i < texts.size() ? texts[i] : "";
    const size_t rank = types[i].shape.size();
    if (text.empty()) {
      if (results && !unspecified) unspecified.emplace(module, *module.FindFunc("main"), partitioning.num_devices());
      out.push_back(results ? unspecified->ForResult(i, rank) : TileSharding{});
      continue;
    }
    StatusOr<TileSharding> s = InvalidArgument("no sharding");
    if (text.rfind("#sdy", 0) == 0) {
      Meshes meshes;
      if (!module.sdy_meshes.empty()) {
        JMP_ASSIGN_OR_RETURN(meshes, ParseSdyMeshes(module.sdy_meshes));
      }
      StatusOr<SdySharding> sdy = ParseSdySharding(text, meshes);
      s = sdy.ok() ? TilesOf(*sdy, rank, partitioning.num_devices()) : StatusOr<TileSharding>(sdy.status());
    } else {
      s = ParseHloSharding(text, rank, partitioning.num_devices());
    }
    if (!s.ok()) return InvalidArgument("@main value " + std::to_string(i) + ": " + s.status().message());
    out.push_back(std::move(*s));
  }
  return out;
}

}  // namespace

// A program that reads fine can still be inconsistent (a corrupted artifact: an attribute index past
// its operand's rank, ...); bounds-checked accessors then throw, and that is a bad-input error.
StatusOr<LoweredProgram> LowerModule(const shlo::Module& module, const Partitioning& partitioning) {
  try {
    const shlo::Func* main = module.FindFunc("main");
    if (!main) return InvalidArgument("the module has no function @main");
    MainShardings shardings;
    if (partitioning.num_devices() > 1) {
      JMP_ASSIGN_OR_RETURN(shardings.arguments,
                           ShardingsOf(module, main->arg_shardings, main->arg_types, partitioning, /*results=*/false));
      JMP_ASSIGN_OR_RETURN(shardings.results, ShardingsOf(module, main->result_shardings, main->result_types,
                                                          partitioning, /*results=*/true));
    }
    LoweredProgram program;
    if (!shlo::HasNarrowTypes(module)) {
      JMP_ASSIGN_OR_RETURN(program.graph, LowerMain(module, partitioning, shardings));
    } else {
      JMP_ASSIGN_OR_RETURN(shlo::Module legal, shlo::LegalizeNarrowTypes(module));
      JMP_ASSIGN_OR_RETURN(program.graph, LowerMain(legal, partitioning, shardings));
    }
    EliminateCommonOps(program.graph);
    ContractMultiplyAdds(program.graph);
    JMP_RETURN_IF_ERROR(VerifyGraph(program.graph));
    JMP_ASSIGN_OR_RETURN(program.signature, SignatureOf(*main, program.graph));
    program.signature.input_shardings = std::move(shardings.arguments);
    program.signature.output_shardings = std::move(shardings.results);
    return program;
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("inconsistent program: ") + e.what());
  }
}

namespace {

StatusOr<Graph> LowerMain(const shlo::Module& module, const Partitioning& partitioning,
                          const MainShardings& shardings) {
  const shlo::Func* main = module.FindFunc("main");
  if (!main) return InvalidArgument("the module has no function @main");
  if (main->body.blocks.size() != 1) return Unimplemented("@main must have exactly one block");
  const shlo::Block& block = main->body.blocks[0];
  if (block.args.size() != main->arg_types.size())
    return InvalidArgument("@main's block arguments do not match its signature");

  Graph graph;
  Scope scope;
  scope.graph = &graph;
  scope.func = main;
  LowerContext cx(module, partitioning);
  cx.SwapScope(&scope);
  auto parts = [](const std::vector<TileSharding>& s, size_t i) { return i < s.size() ? s[i].parts : 1; };
  for (size_t i = 0; i < block.args.size(); ++i) {
    const shlo::Type& t = main->arg_types[i];
    if (t.kind != shlo::Type::Kind::kTensor && t.kind != shlo::Type::Kind::kToken)
      return Unimplemented("@main argument " + std::to_string(i) + " has type " + t.ToString() +
                           "; only tensors and tokens are supported");
    // An argument in parts comes in as their stack, and the program reads their sum.
    Shape shape = t.shape;
    if (parts(shardings.arguments, i) > 1) shape.insert(shape.begin(), parts(shardings.arguments, i));
    int v = graph.AddValue(t.dtype, shape);
    graph.inputs.push_back(v);
    scope.env[block.args[i]] = parts(shardings.arguments, i) > 1 ? SumOfParts(cx, v) : v;
  }
  JMP_ASSIGN_OR_RETURN(const shlo::Op* ret, cx.LowerBlock(block));
  JMP_ASSIGN_OR_RETURN(graph.outputs, cx.Values(ret->operands));
  for (size_t j = 0; j < graph.outputs.size(); ++j) {
    if (parts(shardings.results, j) <= 1) continue;
    // An argument returned in parts splits as XLA reshards it; any other value as PartsOf says.
    const int v = graph.outputs[j];
    auto input = std::find(graph.inputs.begin(), graph.inputs.end(), v);
    const size_t i = static_cast<size_t>(input - graph.inputs.begin());
    const bool split_argument = input != graph.inputs.end() && i < shardings.arguments.size() &&
                                !shardings.arguments[i].tiles.empty() && shardings.arguments[i].parts == 1;
    graph.outputs[j] = split_argument ? PartsByOwner(cx, v, shardings.arguments[i], shardings.results[j])
                                      : PartsOf(cx, v, parts(shardings.results, j));
  }
  return graph;
}

// The declared types of @main where the graph computes on another (narrow types in their storage).
StatusOr<Signature> SignatureOf(const shlo::Func& main, const Graph& graph) {
  JMP_ASSIGN_OR_RETURN(shlo::Donation donation, shlo::DonationOf(main));
  if (donation.aliased_output.size() != graph.inputs.size())
    return Internal("@main's arguments and the graph's inputs differ in number");
  Signature sig;
  sig.aliased_output = std::move(donation.aliased_output);
  sig.donated = std::move(donation.donated);
  auto declared = [](const shlo::Type& t, DType graph_type) {
    return t.kind == shlo::Type::Kind::kTensor && IsNarrow(t.dtype) ? t.dtype : graph_type;
  };
  for (size_t i = 0; i < graph.inputs.size(); ++i)
    sig.input_dtypes.push_back(declared(main.arg_types.at(i), graph.type(graph.inputs[i]).dtype));
  for (size_t j = 0; j < graph.outputs.size(); ++j) {
    const DType t = graph.type(graph.outputs[j]).dtype;
    sig.output_dtypes.push_back(j < main.result_types.size() ? declared(main.result_types[j], t) : t);
    sig.output_memory_kinds.push_back("device");
    if (j >= main.result_attrs.size()) continue;
    auto kind = main.result_attrs[j].find("mhlo.memory_kind");
    if (kind == main.result_attrs[j].end()) continue;
    if (kind->second.kind != shlo::Attr::Kind::kString)
      return InvalidArgument("@main result " + std::to_string(j) + ": mhlo.memory_kind is not a string");
    sig.output_memory_kinds.back() = kind->second.s;
  }
  return sig;
}

}  // namespace

}  // namespace jmp::mps
