// Manual computations (shard_map, pmap), in the two forms a plugin receives: Shardy's op
//   %o = sdy.manual_computation(%g) in_shardings=[...] out_shardings=[...] manual_axes={...} ({body})
// and Shardy's export for XLA:
//   %l = custom_call @xla.sdy.GlobalToLocalShape(%g)
//   %r = call @xla.sdy.manual_computation_body(%l) {mhlo.frontend_attributes = {xla.sdy.in_shardings,
//            xla.sdy.out_shardings, xla.sdy.manual_axes}}
//   %o = custom_call @xla.sdy.LocalToGlobalShape(%r)
// The program stays one global graph: the body is lowered once per device, on that device's slice of
// each argument, and the results are assembled from the devices' pieces. Collectives in the body become
// data movement between the copies (an all_reduce reduces the copies' operands in group order, as each
// device would), partition_id is each copy's device. With auto axes beside the manual ones, a copy
// stands for the devices that differ only along the auto axes (they compute the same).
#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lower/lower_context.h"
#include "lower/lower_families.h"
#include "lower/partial_sums.h"
#include "lower/sharding.h"

namespace jmp::mps {

namespace {

// Whether a collective's ids are partitions (a channel: cross-partition, or flattened ids) rather than
// replicas. VHLO carries the channel as channel_id (0: none); StableHLO as channel_handle.
bool AcrossPartitions(const shlo::Op& op) {
  if (op.Find("channel_handle")) return true;
  const shlo::Attr* global = op.Find("use_global_device_ids");
  if (global && (global->kind != shlo::Attr::Kind::kBool || global->b)) return true;
  const shlo::Attr* id = op.Find("channel_id");
  return id && ((id->kind == shlo::Attr::Kind::kInt && id->i > 0) ||
                (id->kind == shlo::Attr::Kind::kInts && !id->ints.empty() && id->ints[0] > 0));
}

bool IsCollective(const std::string& name) {
  return name == "stablehlo.all_reduce" || name == "stablehlo.all_gather" || name == "stablehlo.reduce_scatter" ||
         name == "stablehlo.all_to_all" || name == "stablehlo.collective_permute" ||
         name == "stablehlo.collective_broadcast";
}

// Ops an op walk (OpHolds) looks for, and what a call to a function the module lacks counts as.
struct OpQuery {
  bool (*is)(const shlo::Op& op);
  bool unknown_callee;
};

bool RegionsHold(const shlo::Module& module, const std::vector<shlo::Region>& regions, const OpQuery& query, int depth);

// Whether an op, its regions or the functions it calls hold an op `query` looks for.
bool OpHolds(const shlo::Module& module, const shlo::Op& op, const OpQuery& query, int depth) {
  if (depth > 64) return true;  // too deep to say: treated as holding one (it is unrolled, or refused)
  if (query.is(op)) return true;
  if (op.name == "func.call") {
    const shlo::Attr* callee = op.Find("callee");
    const shlo::Func* f = callee ? module.FindFunc(callee->s) : nullptr;
    if (f ? RegionsHold(module, {f->body}, query, depth + 1) : query.unknown_callee) return true;
  }
  return RegionsHold(module, op.regions, query, depth + 1);
}

bool RegionsHold(const shlo::Module& module, const std::vector<shlo::Region>& regions, const OpQuery& query,
                 int depth) {
  for (const shlo::Region& region : regions)
    for (const shlo::Block& block : region.blocks)
      for (const shlo::Op& op : block.ops)
        if (OpHolds(module, op, query, depth)) return true;
  return false;
}

bool IsCollectiveOp(const shlo::Op& op) { return IsCollective(op.name); }

// A loop or an op with effects beyond its results (a custom call marked with side effects: host
// callbacks): what must not run in a branch that is not taken.
bool IsLoopOrEffect(const shlo::Op& op) {
  if (op.name == "stablehlo.while") return true;
  if (op.name != "stablehlo.custom_call") return false;
  const shlo::Attr* effects = op.Find("has_side_effect");
  return effects && effects->kind == shlo::Attr::Kind::kBool && effects->b;
}

// A call to a function the module lacks is left to the ordinary lowering, which reports it; for a branch
// that runs untaken, such a call might hold a loop or an effect.
const OpQuery kCollectives{IsCollectiveOp, /*unknown_callee=*/false};
const OpQuery kLoopsOrEffects{IsLoopOrEffect, /*unknown_callee=*/true};

// The devices the body is lowered for: one per combination of the manual axes' coordinates, each the
// device whose auto-axis coordinates are 0.
struct Copies {
  std::vector<int64_t> device;      // per copy, its device id (partition id)
  std::vector<int> copy_of_device;  // per device id, its copy or -1
};

StatusOr<Copies> CopiesOf(const Mesh& mesh, const std::vector<int>& manual_axes) {
  Copies c;
  const int64_t n = mesh.size();
  c.copy_of_device.assign(static_cast<size_t>(n), -1);
  const size_t axes = mesh.axis_sizes.size();
  for (int64_t position = 0; position < n; ++position) {
    bool representative = true;
    for (size_t a = axes, rest = static_cast<size_t>(position); a-- > 0;) {
      const size_t coord = rest % static_cast<size_t>(mesh.axis_sizes[a]);
      rest /= static_cast<size_t>(mesh.axis_sizes[a]);
      const bool manual = std::find(manual_axes.begin(), manual_axes.end(), static_cast<int>(a)) != manual_axes.end();
      if (!manual && coord != 0) representative = false;
    }
    if (!representative) continue;
    c.copy_of_device[static_cast<size_t>(mesh.DeviceAt(position))] = static_cast<int>(c.device.size());
    c.device.push_back(mesh.DeviceAt(position));
  }
  return c;
}

// A manual computation as read from its op: either form (sdy.manual_computation with its region, or
// the call to an outlined body with frontend attributes), its shardings and its manual axes.
struct ManualOp {
  const shlo::Func* body = nullptr;  // the call form's outlined body; null for the region form
  std::vector<SdySharding> ins, outs;
  Mesh mesh;
  std::vector<int> manual_axes;
};

bool IsManualOp(const shlo::Op& op) {
  if (op.name == "sdy.manual_computation") return true;
  const shlo::Attr* callee = op.name == "func.call" ? op.Find("callee") : nullptr;
  return callee && IsManualComputationBody(callee->s);
}

StatusOr<ManualOp> ReadManualOp(LowerContext& cx);
// Operand i's piece for the device `device`, from the operand's value `global` (global over the op's
// manual axes).
StatusOr<int> OperandPiece(LowerContext& cx, const ManualOp& m, size_t i, int global, int64_t device);
// Result j from the copies' pieces `local` (one per copy of `copies`).
StatusOr<int> ResultFromPieces(LowerContext& cx, const ManualOp& m, size_t j, std::vector<int> local,
                               const Copies& copies);

// Lowers a body once per copy, op by op, so that a collective sees every copy's operands.
class Unroller {
 public:
  Unroller(LowerContext& cx, const Copies& copies, std::vector<int> axes)
      : cx_(cx), copies_(copies), axes_(std::move(axes)) {}

  // Lowers `func`'s body in each copy on `args[c]`; returns each copy's results.
  StatusOr<std::vector<std::vector<int>>> Call(const shlo::Func& func, const std::vector<std::vector<int>>& args,
                                               int depth) {
    if (func.body.blocks.size() != 1) return cx_.Unsupported("functions with several blocks are not supported");
    return Run(func, func.body.blocks[0], args, depth, {});
  }

  // Lowers `block` (of `func`) in each copy on `args[c]`. `outer[c]`: the scope copy c's block reads
  // other values from (none for a function's body).
  StatusOr<std::vector<std::vector<int>>> Run(const shlo::Func& func, const shlo::Block& block,
                                              const std::vector<std::vector<int>>& args, int depth,
                                              const std::vector<Scope*>& outer) {
    if (depth > 64) return cx_.Unsupported("calls nest too deeply in a manual computation");
    const size_t n = copies_.device.size();
    std::vector<Scope> scopes(n);
    for (size_t c = 0; c < n; ++c) {
      scopes[c].graph = &cx_.graph();
      scopes[c].func = &func;
      scopes[c].parent = outer.empty() ? nullptr : outer[c];
      scopes[c].shares_parent_graph = !outer.empty();
      if (args[c].size() != block.args.size())
        return InvalidArgument("a manual computation's body takes another number of arguments");
      for (size_t i = 0; i < args[c].size(); ++i) scopes[c].env[block.args[i]] = args[c][i];
    }
    Scope* current = &cx_.scope();
    Status status = Block(block, scopes, depth);
    std::vector<std::vector<int>> results(n);
    for (size_t c = 0; status.ok() && c < n; ++c) {
      cx_.SwapScope(&scopes[c]);
      StatusOr<std::vector<int>> r = cx_.Values(block.ops.back().operands);
      if (!r.ok()) status = r.status();
      if (r.ok()) results[c] = std::move(*r);
    }
    cx_.SwapScope(current);
    cx_.SetManual(-1, 0);
    if (!status.ok()) return status;
    return results;
  }

 private:
  Status Block(const shlo::Block& block, std::vector<Scope>& scopes, int depth) {
    if (block.ops.empty() || (block.ops.back().name != "func.return" && block.ops.back().name != "stablehlo.return" &&
                              block.ops.back().name != "sdy.return"))
      return InvalidArgument("a manual computation's body ends without a return");
    for (const shlo::Op& op : block.ops) {
      if (&op == &block.ops.back()) break;
      if (IsManualOp(op)) {
        JMP_RETURN_IF_ERROR(Nested(op, scopes, depth));
        continue;
      }
      if (IsCollective(op.name)) {
        JMP_RETURN_IF_ERROR(Collective(op, scopes));
        continue;
      }
      const bool holds = OpHolds(cx_.module(), op, kCollectives, 0);
      if (holds && op.name == "func.call") {
        JMP_RETURN_IF_ERROR(Inline(op, scopes, depth));
        continue;
      }
      if (holds && op.name == "stablehlo.while") {
        JMP_RETURN_IF_ERROR(Loop(op, scopes, depth));
        continue;
      }
      if (holds && (op.name == "stablehlo.if" || op.name == "stablehlo.case")) {
        JMP_RETURN_IF_ERROR(Branches(op, scopes, depth));
        continue;
      }
      for (size_t c = 0; c < scopes.size(); ++c) {
        cx_.SwapScope(&scopes[c]);
        cx_.SetManual(copies_.device[c], static_cast<int64_t>(copies_.device.size()));
        JMP_RETURN_IF_ERROR(cx_.LowerOp(op));
      }
    }
    return Status::Ok();
  }

  // A loop that holds a collective: one loop for every copy, carrying the copies' values side by side,
  // so that each iteration's collectives see every copy's operands. It runs while copy 0's condition
  // holds: on real devices copies that disagree on the trip count would wait forever in the
  // collective, so a program whose copies agree is the only well-defined one.
  Status Loop(const shlo::Op& op, std::vector<Scope>& scopes, int depth) {
    cx_.SetOp(op);
    if (op.regions.size() != 2) return cx_.Unsupported("while needs a condition and a body");
    const size_t n = scopes.size(), k = op.operands.size();
    std::vector<int> init;
    for (size_t c = 0; c < n; ++c) {
      cx_.SwapScope(&scopes[c]);
      JMP_ASSIGN_OR_RETURN(std::vector<int> values, cx_.Values(op.operands));
      init.insert(init.end(), values.begin(), values.end());
    }
    std::vector<TensorType> carried;
    for (int v : init) carried.push_back(cx_.Type(v));
    std::vector<int> cond_caps, body_caps;
    JMP_ASSIGN_OR_RETURN(Graph cond, Region(op.regions[0], scopes, carried, depth, &cond_caps));
    JMP_ASSIGN_OR_RETURN(Graph body, Region(op.regions[1], scopes, carried, depth, &body_caps));
    cx_.SwapScope(&scopes[0]);
    cx_.SetOp(op);
    if (cond.outputs.size() != n || body.outputs.size() != init.size())
      return cx_.Unsupported("while's regions return the wrong number of values");
    cond.outputs.resize(1);
    const std::vector<int> outputs = EmitWhile(cx_, init, std::move(cond), cond_caps, std::move(body), body_caps);
    for (size_t c = 0; c < n; ++c)
      for (size_t i = 0; i < k; ++i) scopes[c].env[op.results.at(i)] = outputs[c * k + i];
    return Status::Ok();
  }

  // A branch (if, case) that holds a collective: every branch is lowered for every copy, inline, and
  // copy 0's predicate picks each copy's results, as copies that take different branches would wait
  // forever in the collective on real devices. Untaken branches run too, so a branch holding a loop
  // (which need not end there) or an op with effects (a host callback) is refused.
  Status Branches(const shlo::Op& op, std::vector<Scope>& scopes, int depth) {
    cx_.SetOp(op);
    if (op.regions.empty() || op.operands.size() != 1)
      return cx_.Unsupported("a branch needs its predicate or index and its regions");
    if (RegionsHold(cx_.module(), op.regions, kLoopsOrEffects, 0))
      return cx_.Unsupported(
          "a collective in a branch that holds a loop or a host callback, in a manual computation, "
          "is not supported");
    const size_t n = scopes.size();
    cx_.SwapScope(&scopes[0]);
    cx_.SetOp(op);
    JMP_ASSIGN_OR_RETURN(int selector, cx_.In(0));
    std::vector<Scope*> outer(n);
    for (size_t c = 0; c < n; ++c) outer[c] = &scopes[c];
    std::vector<std::vector<std::vector<int>>> results;  // per branch, per copy
    for (const shlo::Region& region : op.regions) {
      if (region.blocks.size() != 1 || !region.blocks[0].args.empty())
        return cx_.Unsupported("branch regions must have one block without arguments");
      JMP_ASSIGN_OR_RETURN(std::vector<std::vector<int>> r,
                           Run(*scopes[0].func, region.blocks[0], std::vector<std::vector<int>>(n), depth + 1, outer));
      results.push_back(std::move(r));
    }
    cx_.SwapScope(&scopes[0]);
    cx_.SetOp(op);
    // Which branch runs: if's first region when its predicate holds; case's index, the last region when
    // the index is out of range.
    const bool is_if = op.name == "stablehlo.if";
    std::vector<int> takes(op.regions.size() - 1);
    for (size_t b = 0; b + 1 < op.regions.size(); ++b)
      takes[b] = is_if
                     ? selector
                     : cx_.Compare(OpKind::kEqual, selector, cx_.Scalar(cx_.DTypeOf(selector), static_cast<double>(b)));
    for (size_t c = 0; c < n; ++c) {
      for (size_t j = 0; j < op.results.size(); ++j) {
        int value = results.back().at(c).at(j);
        for (size_t b = op.regions.size() - 1; b-- > 0;) value = cx_.Select(takes[b], results[b].at(c).at(j), value);
        scopes[c].env[op.results[j]] = value;
      }
    }
    return Status::Ok();
  }

  // One subgraph holding `region`'s block lowered for every copy: its parameters are `params` (each
  // copy's k values, copy after copy) followed by the outer values the copies read (`captures`, each
  // once); its outputs are the copies' results, copy after copy.
  StatusOr<Graph> Region(const shlo::Region& region, std::vector<Scope>& scopes, const std::vector<TensorType>& params,
                         int depth, std::vector<int>* captures) {
    if (region.blocks.size() != 1) return cx_.Unsupported("regions with several blocks are not supported");
    const size_t n = scopes.size(), k = params.size() / n;
    Graph sub;
    std::vector<int> values;
    for (const TensorType& t : params) {
      values.push_back(sub.AddValue(t.dtype, t.shape));
      sub.inputs.push_back(values.back());
    }
    // Each copy's edge of the subgraph: what copy c reads from outside becomes a parameter there.
    std::vector<Scope> edges(n);
    std::vector<Scope*> outer(n);
    std::vector<std::vector<int>> args(n);
    for (size_t c = 0; c < n; ++c) {
      edges[c].graph = &sub;
      edges[c].func = scopes[c].func;
      edges[c].parent = &scopes[c];
      outer[c] = &edges[c];
      args[c].assign(values.begin() + static_cast<std::ptrdiff_t>(c * k),
                     values.begin() + static_cast<std::ptrdiff_t>((c + 1) * k));
    }
    Scope* current = cx_.SwapScope(&edges[0]);
    StatusOr<std::vector<std::vector<int>>> results = Run(*scopes[0].func, region.blocks[0], args, depth + 1, outer);
    cx_.SwapScope(current);
    cx_.ForgetFactsOf(&sub);
    if (!results.ok()) return results.status();
    for (const std::vector<int>& r : *results) sub.outputs.insert(sub.outputs.end(), r.begin(), r.end());
    // The captured parameters in input order, an outer value read by several copies merged into one.
    std::map<int, int> outer_of;
    for (const Scope& e : edges)
      for (const auto& [outer_value, inner] : e.captures) outer_of[inner] = outer_value;
    std::map<int, int> first_inner;  // outer value -> its parameter
    std::map<int, int> merged;       // a repeated parameter -> the first one
    std::vector<int> inputs(sub.inputs.begin(), sub.inputs.begin() + static_cast<std::ptrdiff_t>(params.size()));
    captures->clear();
    for (size_t i = params.size(); i < sub.inputs.size(); ++i) {
      const int inner = sub.inputs[i];
      const int outer_value = outer_of.at(inner);
      auto [it, fresh] = first_inner.emplace(outer_value, inner);
      if (!fresh) {
        merged[inner] = it->second;
        continue;
      }
      inputs.push_back(inner);
      captures->push_back(outer_value);
    }
    sub.inputs = std::move(inputs);
    auto rename = [&merged](int& v) {
      auto it = merged.find(v);
      if (it != merged.end()) v = it->second;
    };
    for (Op& o : sub.ops)
      for (int& v : o.inputs) rename(v);
    for (int& v : sub.outputs) rename(v);
    return sub;
  }

  Status Inline(const shlo::Op& op, std::vector<Scope>& scopes, int depth) {
    const shlo::Func* callee = cx_.module().FindFunc(op.Find("callee")->s);
    if (!callee) {
      cx_.SetOp(op);
      return cx_.Unsupported("call to an unknown function");
    }
    std::vector<std::vector<int>> args(scopes.size());
    for (size_t c = 0; c < scopes.size(); ++c) {
      cx_.SwapScope(&scopes[c]);
      JMP_ASSIGN_OR_RETURN(args[c], cx_.Values(op.operands));
    }
    JMP_ASSIGN_OR_RETURN(std::vector<std::vector<int>> results, Call(*callee, args, depth + 1));
    for (size_t c = 0; c < scopes.size(); ++c) {
      if (results[c].size() != op.results.size())
        return InvalidArgument("@" + callee->name + " returns the wrong number of values");
      for (size_t j = 0; j < op.results.size(); ++j) scopes[c].env[op.results[j]] = results[c][j];
    }
    return Status::Ok();
  }

  // The groups of copies a collective combines, each in the order its ids list them. Ids are partition
  // ids (channel_handle or use_global_device_ids: cross-partition or flattened ids, the same with one
  // replica); without either the groups are of replicas, and with one replica each device is alone.
  StatusOr<std::vector<std::vector<size_t>>> Groups(const shlo::Op& op, const char* attr) {
    const size_t n = copies_.device.size();
    std::vector<std::vector<size_t>> groups;
    if (!AcrossPartitions(op)) {
      for (size_t c = 0; c < n; ++c) groups.push_back({c});
      return groups;
    }
    const shlo::Attr* a = op.Find(attr);
    std::vector<int64_t> ids;
    size_t width = 0;
    if (a && a->kind == shlo::Attr::Kind::kInts) {
      ids = a->ints;
      width = a->type.shape.size() == 2 ? static_cast<size_t>(a->type.shape[1]) : ids.size();
    } else if (a) {
      return cx_.Unsupported(std::string(attr) + " is not a list of device ids");
    }
    if (ids.empty()) {
      groups.emplace_back();
      for (size_t c = 0; c < n; ++c) groups.back().push_back(c);
      return groups;
    }
    if (width == 0 || ids.size() % width) return cx_.Unsupported(std::string("malformed ") + attr);
    std::vector<bool> seen(n, false);
    for (size_t g = 0; g < ids.size() / width; ++g) {
      std::vector<size_t> group;
      bool others = false;  // devices no copy stands for: their group repeats a represented one
      for (size_t k = 0; k < width; ++k) {
        const int64_t id = ids[g * width + k];
        if (id < 0) continue;  // padding of ragged groups
        if (static_cast<size_t>(id) >= copies_.copy_of_device.size())
          return cx_.Unsupported(std::string(attr) + " names device " + std::to_string(id) + ", beyond the program's " +
                                 std::to_string(copies_.copy_of_device.size()));
        const int c = copies_.copy_of_device[static_cast<size_t>(id)];
        if (c < 0) {
          others = true;
          continue;
        }
        group.push_back(static_cast<size_t>(c));
      }
      if (others && !group.empty())
        return cx_.Unsupported(std::string(attr) + " groups devices across the manual computation's auto axes");
      if (others) continue;
      for (size_t c : group) {
        if (seen[c]) return cx_.Unsupported(std::string(attr) + " names a device twice");
        seen[c] = true;
      }
      groups.push_back(std::move(group));
    }
    for (size_t c = 0; c < n; ++c)
      if (!seen[c]) return cx_.Unsupported(std::string(attr) + " leaves a device out of every group");
    return groups;
  }

  // Reduces values[0..] in order with the op's body, applied elementwise.
  StatusOr<int> Reduce(const shlo::Op& op, const std::vector<int>& values, Scope& scope) {
    if (op.regions.size() != 1 || op.regions[0].blocks.size() != 1)
      return cx_.Unsupported("collective without a reduction body");
    cx_.SwapScope(&scope);
    cx_.SetOp(op);
    int acc = values[0];
    for (size_t k = 1; k < values.size(); ++k) {
      JMP_ASSIGN_OR_RETURN(std::vector<int> r, cx_.LowerBlockInline(op.regions[0].blocks[0], {acc, values[k]}));
      if (r.size() != 1) return cx_.Unsupported("a reduction body with several results");
      acc = r[0];
    }
    return acc;
  }

  // An all_reduce's fold over one group. In a program over several processes a body that is one
  // binary op on (accumulator, member), the usual sum, product, max or min, becomes one AllReduce of
  // that op, which each process's part of the program runs with the others (lower/process_part.h);
  // any other body is folded here, and the processes exchange the arguments instead.
  StatusOr<int> ReduceGroup(const shlo::Op& op, const std::vector<int>& values, const std::vector<size_t>& group,
                            Scope& scope) {
    if (!cx_.partitioning().across_processes || values.size() < 2) return Reduce(op, values, scope);
    cx_.SwapScope(&scope);
    const size_t before = cx_.graph().ops.size();
    JMP_ASSIGN_OR_RETURN(int pair, Reduce(op, {values[0], values[1]}, scope));
    Graph& g = cx_.graph();
    BinaryOp binary;
    if (g.ops.size() == before + 1 && BinaryOpOf(g.ops.back().kind, &binary) &&
        g.ops.back().inputs == std::vector<int>{values[0], values[1]} &&
        g.ops.back().outputs == std::vector<int>{pair}) {
      AllReduceAttrs attrs;
      attrs.combine = g.ops.back().kind;
      for (size_t c : group) attrs.devices.push_back(copies_.device[c]);
      g.ops.pop_back();
      const TensorType t = cx_.Type(values[0]);
      return cx_.Emit(OpKind::kAllReduce, values, t.dtype, t.shape, attrs);
    }
    std::vector<int> rest{pair};
    rest.insert(rest.end(), values.begin() + 2, values.end());
    return Reduce(op, rest, scope);
  }

  int Concat(const std::vector<int>& parts, int64_t dim) {
    if (parts.size() == 1) return parts[0];
    TensorType t = cx_.Type(parts[0]);
    for (size_t k = 1; k < parts.size(); ++k)
      t.shape[static_cast<size_t>(dim)] += cx_.ShapeOf(parts[k])[static_cast<size_t>(dim)];
    return cx_.Emit(OpKind::kConcat, parts, t.dtype, t.shape, AxisAttrs{dim});
  }

  // Part `index` of `count` equal parts of v along dim.
  int Part(int v, int64_t dim, int64_t index, int64_t count) {
    Shape shape = cx_.ShapeOf(v);
    Shape starts(shape.size(), 0), ends = shape;
    const int64_t size = shape[static_cast<size_t>(dim)] / count;
    starts[static_cast<size_t>(dim)] = index * size;
    ends[static_cast<size_t>(dim)] = (index + 1) * size;
    return cx_.Slice(v, starts, ends);
  }

  Status Collective(const shlo::Op& op, std::vector<Scope>& scopes) {
    const size_t n = scopes.size();
    // Each copy's operands.
    std::vector<std::vector<int>> in(n);
    for (size_t c = 0; c < n; ++c) {
      cx_.SwapScope(&scopes[c]);
      cx_.SetOp(op);
      JMP_ASSIGN_OR_RETURN(in[c], cx_.Values(op.operands));
    }
    cx_.SetOp(op);
    std::vector<std::vector<int>> out(n, std::vector<int>(op.results.size(), -1));
    const std::string& name = op.name;
    if (name == "stablehlo.collective_permute") {
      JMP_RETURN_IF_ERROR(Permute(op, in, out));
    } else {
      JMP_ASSIGN_OR_RETURN(std::vector<std::vector<size_t>> groups, Groups(op, "replica_groups"));
      for (const std::vector<size_t>& group : groups) {
        if (group.empty()) continue;
        for (size_t i = 0; i < op.operands.size(); ++i) {
          std::vector<int> values;
          for (size_t c : group) values.push_back(in[c][i]);
          JMP_RETURN_IF_ERROR(Combine(op, i, group, values, scopes, out));
        }
      }
    }
    for (size_t c = 0; c < n; ++c) {
      cx_.SwapScope(&scopes[c]);
      cx_.SetOp(op);
      for (size_t j = 0; j < op.results.size(); ++j) {
        if (out[c][j] < 0) return cx_.Unsupported("collective with results its operands do not give");
        const shlo::Type& t = cx_.OutType(j);
        if (cx_.ShapeOf(out[c][j]) != t.shape || cx_.DTypeOf(out[c][j]) != t.dtype)
          return cx_.Unsupported("collective whose result type does not follow from its operands");
        cx_.Bind(j, out[c][j]);
      }
    }
    return Status::Ok();
  }

  // One operand i over one group: each member's result i.
  Status Combine(const shlo::Op& op, size_t i, const std::vector<size_t>& group, const std::vector<int>& values,
                 std::vector<Scope>& scopes, std::vector<std::vector<int>>& out) {
    const std::string& name = op.name;
    const int64_t size = static_cast<int64_t>(group.size());
    if (i >= op.results.size()) return cx_.Unsupported("collective with fewer results than operands");
    if (name == "stablehlo.all_reduce") {
      JMP_ASSIGN_OR_RETURN(int r, ReduceGroup(op, values, group, scopes[group[0]]));
      for (size_t c : group) out[c][i] = r;
    } else if (name == "stablehlo.collective_broadcast") {
      for (size_t c : group) out[c][i] = values[0];
    } else if (name == "stablehlo.all_gather") {
      JMP_ASSIGN_OR_RETURN(int64_t dim, cx_.IntAttr("all_gather_dim"));
      if (dim < 0 || static_cast<size_t>(dim) >= cx_.ShapeOf(values[0]).size())
        return cx_.Unsupported("all_gather_dim out of range");
      const int r = Concat(values, dim);
      for (size_t c : group) out[c][i] = r;
    } else if (name == "stablehlo.reduce_scatter") {
      JMP_ASSIGN_OR_RETURN(int64_t dim, cx_.IntAttr("scatter_dimension"));
      const Shape shape = cx_.ShapeOf(values[0]);
      if (dim < 0 || static_cast<size_t>(dim) >= shape.size() || shape[static_cast<size_t>(dim)] % size)
        return cx_.Unsupported("scatter_dimension does not split evenly over the group");
      JMP_ASSIGN_OR_RETURN(int r, ReduceGroup(op, values, group, scopes[group[0]]));
      cx_.SetOp(op);
      for (size_t k = 0; k < group.size(); ++k) out[group[k]][i] = Part(r, dim, static_cast<int64_t>(k), size);
    } else if (name == "stablehlo.all_to_all") {
      JMP_ASSIGN_OR_RETURN(int64_t split, cx_.IntAttr("split_dimension"));
      JMP_ASSIGN_OR_RETURN(int64_t concat, cx_.IntAttr("concat_dimension"));
      const Shape shape = cx_.ShapeOf(values[0]);
      if (split < 0 || concat < 0 || static_cast<size_t>(split) >= shape.size() ||
          static_cast<size_t>(concat) >= shape.size() || shape[static_cast<size_t>(split)] % size)
        return cx_.Unsupported("all_to_all dimensions do not split evenly over the group");
      if (op.Find("split_count")) {
        JMP_ASSIGN_OR_RETURN(int64_t count, cx_.IntAttr("split_count"));
        if (count != size) return cx_.Unsupported("split_count differs from the group's size");
      }
      // Member k receives part k of every member's operand, in group order.
      for (size_t k = 0; k < group.size(); ++k) {
        std::vector<int> parts;
        for (int v : values) parts.push_back(Part(v, split, static_cast<int64_t>(k), size));
        out[group[k]][i] = Concat(parts, concat);
      }
    } else {
      return cx_.Unsupported("collective not supported in a manual computation");
    }
    return Status::Ok();
  }

  // source_target_pairs: each target receives its source's operand; a copy no pair targets, zeros.
  Status Permute(const shlo::Op& op, const std::vector<std::vector<int>>& in, std::vector<std::vector<int>>& out) {
    if (op.operands.size() != 1 || op.results.size() != 1) return cx_.Unsupported("malformed collective_permute");
    const shlo::Attr* a = op.Find("source_target_pairs");
    std::vector<int64_t> pairs = a && a->kind == shlo::Attr::Kind::kInts ? a->ints : std::vector<int64_t>{};
    if (pairs.size() % 2) return cx_.Unsupported("source_target_pairs of odd length");
    const bool across_partitions = AcrossPartitions(op);
    const size_t n = in.size();
    for (size_t k = 0; k < pairs.size(); k += 2) {
      int64_t source = pairs[k], target = pairs[k + 1];
      if (!across_partitions) {
        // Replica ids: with one replica only 0 exists, and each device sends to itself.
        if (source != 0 || target != 0) return cx_.Unsupported("source_target_pairs names a replica other than 0");
        for (size_t c = 0; c < n; ++c) out[c][0] = in[c][0];
        continue;
      }
      for (int64_t id : {source, target})
        if (id < 0 || static_cast<size_t>(id) >= copies_.copy_of_device.size())
          return cx_.Unsupported("source_target_pairs names device " + std::to_string(id) + ", beyond the program's " +
                                 std::to_string(copies_.copy_of_device.size()));
      const int s = copies_.copy_of_device[static_cast<size_t>(source)];
      const int t = copies_.copy_of_device[static_cast<size_t>(target)];
      if (s < 0 || t < 0) continue;  // between devices no copy stands for: a repeat of a represented pair
      if (out[static_cast<size_t>(t)][0] >= 0) return cx_.Unsupported("source_target_pairs names a target twice");
      out[static_cast<size_t>(t)][0] = in[static_cast<size_t>(s)][0];
    }
    for (size_t c = 0; c < n; ++c)
      if (out[c][0] < 0) {
        const shlo::Type& t = cx_.OutType(0);
        out[c][0] = cx_.Splat(t.dtype, t.shape, 0);
      }
    return Status::Ok();
  }

  // A manual computation inside this one: its body unrolled over the devices of both computations'
  // manual axes, each inner copy reading its piece of its outer copy's operands; each outer copy's
  // results joined from its inner copies' pieces.
  Status Nested(const shlo::Op& op, std::vector<Scope>& scopes, int depth);

  LowerContext& cx_;
  const Copies& copies_;
  std::vector<int> axes_;  // the manual axes the copies stand for
};

// A frontend attribute of the op being lowered, as text.
StatusOr<std::string> Frontend(LowerContext& cx, const char* name) {
  const shlo::Attr* attrs = cx.op().Find("mhlo.frontend_attributes");
  if (attrs && attrs->kind == shlo::Attr::Kind::kDict) {
    auto it = attrs->dict.find(name);
    if (it != attrs->dict.end() && it->second.kind == shlo::Attr::Kind::kString) return it->second.s;
  }
  return cx.Unsupported(std::string("manual computation without its ") + name);
}

// "#sdy<manual_axes{\"x\", \"y\"}>": the axes' indices in `mesh`.
StatusOr<std::vector<int>> ManualAxes(LowerContext& cx, const std::string& text, const Mesh& mesh) {
  std::vector<int> axes;
  size_t at = text.find('{');
  const size_t end = text.rfind('}');
  if (at == std::string::npos || end == std::string::npos || end < at) return cx.Unsupported("malformed manual_axes");
  while (true) {
    size_t open = text.find('"', at);
    if (open == std::string::npos || open > end) break;
    size_t close = text.find('"', open + 1);
    if (close == std::string::npos || close > end) return cx.Unsupported("malformed manual_axes");
    std::string name = text.substr(open + 1, close - open - 1);
    if (!name.empty() && name.back() == '\\') name.pop_back();
    const int k = mesh.AxisIndex(name);
    if (k < 0) return cx.Unsupported("manual axis '" + name + "' is not an axis of the mesh");
    axes.push_back(k);
    at = close + 1;
  }
  return axes;
}

// Device d's tile of a global value.
int Slice(LowerContext& cx, int global, const TileSharding& s, int64_t device) {
  if (s.tiles.empty()) return global;
  Shape shape = cx.ShapeOf(global);
  Shape starts(shape.size()), ends(shape.size());
  int64_t tile = s.device_tile.at(static_cast<size_t>(device));
  for (size_t k = shape.size(); k-- > 0;) {
    const int64_t size = shape[k] / s.tiles[k];
    starts[k] = (tile % s.tiles[k]) * size;
    ends[k] = starts[k] + size;
    tile /= s.tiles[k];
  }
  return cx.Slice(global, starts, ends);
}

// The global value from the copies' tiles: each tile from the first copy holding it.
StatusOr<int> Assemble(LowerContext& cx, const std::vector<int>& local, const TileSharding& s, const Copies& copies) {
  if (s.tiles.empty()) return local[0];
  int64_t count = 1;
  for (int64_t t : s.tiles) count *= t;
  std::vector<int> tile_value(static_cast<size_t>(count), -1);
  for (size_t c = 0; c < copies.device.size(); ++c) {
    const int64_t tile = s.device_tile.at(static_cast<size_t>(copies.device[c]));
    if (tile_value[static_cast<size_t>(tile)] < 0) tile_value[static_cast<size_t>(tile)] = local[c];
  }
  for (int v : tile_value)
    if (v < 0) return cx.Unsupported("a manual computation's result sharding leaves a piece on no device");
  // Concatenated along the last dimension first, then outwards.
  const size_t rank = s.tiles.size();
  std::vector<int> level = tile_value;
  for (size_t k = rank; k-- > 0;) {
    const size_t t = static_cast<size_t>(s.tiles[k]);
    std::vector<int> next;
    for (size_t g = 0; g < level.size() / t; ++g) {
      std::vector<int> parts(level.begin() + static_cast<std::ptrdiff_t>(g * t),
                             level.begin() + static_cast<std::ptrdiff_t>((g + 1) * t));
      if (parts.size() == 1) {
        next.push_back(parts[0]);
        continue;
      }
      TensorType type = cx.Type(parts[0]);
      type.shape[k] *= static_cast<int64_t>(t);
      next.push_back(cx.Emit(OpKind::kConcat, parts, type.dtype, type.shape, AxisAttrs{static_cast<int64_t>(k)}));
    }
    level = std::move(next);
  }
  return level[0];
}

// The op's attribute `name` as text (Shardy's attributes arrive as their text).
StatusOr<std::string> TextAttr(LowerContext& cx, const char* name) {
  const shlo::Attr* a = cx.op().Find(name);
  if (a && a->kind == shlo::Attr::Kind::kString) return a->s;
  return cx.Unsupported(std::string("manual computation without its ") + name);
}

StatusOr<ManualOp> ReadManualOp(LowerContext& cx) {
  const shlo::Op& op = cx.op();
  ManualOp m;
  std::string in_text, out_text, axes_text;
  if (op.name == "sdy.manual_computation") {
    if (op.regions.size() != 1 || op.regions[0].blocks.size() != 1)
      return cx.Unsupported("a manual computation without one body");
    JMP_ASSIGN_OR_RETURN(in_text, TextAttr(cx, "in_shardings"));
    JMP_ASSIGN_OR_RETURN(out_text, TextAttr(cx, "out_shardings"));
    JMP_ASSIGN_OR_RETURN(axes_text, TextAttr(cx, "manual_axes"));
  } else {
    const shlo::Attr* callee_attr = op.Find("callee");
    m.body = callee_attr ? cx.module().FindFunc(callee_attr->s) : nullptr;
    if (!m.body) return cx.Unsupported("call to an unknown function");
    JMP_ASSIGN_OR_RETURN(in_text, Frontend(cx, "xla.sdy.in_shardings"));
    JMP_ASSIGN_OR_RETURN(out_text, Frontend(cx, "xla.sdy.out_shardings"));
    JMP_ASSIGN_OR_RETURN(axes_text, Frontend(cx, "xla.sdy.manual_axes"));
  }
  Meshes meshes;
  if (!cx.module().sdy_meshes.empty()) {
    StatusOr<Meshes> parsed = ParseSdyMeshes(cx.module().sdy_meshes);
    if (!parsed.ok()) return cx.Unsupported(parsed.status().message());
    meshes = std::move(*parsed);
  }
  StatusOr<std::vector<SdySharding>> ins = ParseSdyShardings(in_text, meshes);
  if (!ins.ok()) return cx.Unsupported(ins.status().message());
  StatusOr<std::vector<SdySharding>> outs = ParseSdyShardings(out_text, meshes);
  if (!outs.ok()) return cx.Unsupported(outs.status().message());
  m.ins = std::move(*ins);
  m.outs = std::move(*outs);
  if (m.ins.size() != op.operands.size() || m.outs.size() != op.results.size())
    return cx.Unsupported("a manual computation's shardings do not match its operands and results");
  // The mesh: the shardings', else the module's only one.
  if (!m.ins.empty()) {
    m.mesh = m.ins[0].mesh;
  } else if (!m.outs.empty()) {
    m.mesh = m.outs[0].mesh;
  } else if (meshes.size() == 1) {
    m.mesh = meshes.begin()->second;
  } else {
    return cx.Unsupported("a manual computation without a mesh");
  }
  const int64_t devices = cx.partitioning().num_devices();
  if (m.mesh.size() != devices)
    return cx.Unsupported("a manual computation over " + std::to_string(m.mesh.size()) +
                          " devices in a program compiled for " + std::to_string(devices));
  JMP_ASSIGN_OR_RETURN(m.manual_axes, ManualAxes(cx, axes_text, m.mesh));
  return m;
}

StatusOr<int> OperandPiece(LowerContext& cx, const ManualOp& m, size_t i, int global, int64_t device) {
  const shlo::Op& op = cx.op();
  // A token carries no data: every copy orders after the one token (its sharding has rank 0).
  if (cx.ShloType(op.operands.at(i)).kind == shlo::Type::Kind::kToken) return global;
  const Shape shape = cx.ShapeOf(global);
  StatusOr<TileSharding> s = TilesOf(OverAxes(m.ins[i], m.manual_axes), shape.size(), cx.partitioning().num_devices());
  if (!s.ok()) return cx.Unsupported("operand " + std::to_string(i) + ": " + s.status().message());
  const shlo::Type& local = m.body ? cx.InType(i) : cx.ShloType(op.regions[0].blocks[0].args.at(i));
  const size_t part_dims = s->parts > 1 ? 1 : 0;
  for (size_t k = 0; k < shape.size(); ++k) {
    const int64_t t = s->tiles.empty() ? 1 : s->tiles[k + part_dims];
    if (k >= local.shape.size() || shape[k] % t != 0 || shape[k] / t != local.shape[k])
      return cx.Unsupported("operand " + std::to_string(i) + " of global shape " + cx.Type(global).ToString() +
                            " does not split into the body's argument " + local.ToString());
  }
  // An operand in parts: each device its tile of its part.
  const int sliced = part_dims ? PartsOf(cx, global, s->parts) : global;
  return cx.Reshape(Slice(cx, sliced, *s, device), local.shape);
}

StatusOr<int> ResultFromPieces(LowerContext& cx, const ManualOp& m, size_t j, std::vector<int> local,
                               const Copies& copies) {
  if (cx.ShloType(cx.op().results.at(j)).kind == shlo::Type::Kind::kToken) return local.at(0);
  Shape local_shape = cx.ShapeOf(local.at(0));
  StatusOr<TileSharding> s =
      TilesOf(OverAxes(m.outs[j], m.manual_axes), local_shape.size(), cx.partitioning().num_devices());
  if (!s.ok()) return cx.Unsupported("result " + std::to_string(j) + ": " + s.status().message());
  if (s->parts == 1) return Assemble(cx, local, *s, copies);
  // A result in parts: the devices' pieces make the stack of parts, and the value is their sum.
  local_shape.insert(local_shape.begin(), 1);
  for (int& v : local) v = cx.Reshape(v, local_shape);
  JMP_ASSIGN_OR_RETURN(int stack, Assemble(cx, local, *s, copies));
  return SumOfParts(cx, stack);
}

// Either form, at the top of the program: the body unrolled over the copies of the manual axes.
Status ManualComputation(LowerContext& cx) {
  const shlo::Op& op = cx.op();
  if (cx.manual_copies() > 0)
    return cx.Unsupported("a manual computation in a branch or loop of another one is not supported");
  JMP_ASSIGN_OR_RETURN(ManualOp m, ReadManualOp(cx));
  JMP_ASSIGN_OR_RETURN(Copies copies, CopiesOf(m.mesh, m.manual_axes));
  // Each copy's slice of each operand.
  const size_t n = copies.device.size();
  std::vector<std::vector<int>> args(n);
  for (size_t i = 0; i < op.operands.size(); ++i) {
    JMP_ASSIGN_OR_RETURN(int global, cx.In(i));
    for (size_t c = 0; c < n; ++c) {
      JMP_ASSIGN_OR_RETURN(int piece, OperandPiece(cx, m, i, global, copies.device[c]));
      args[c].push_back(piece);
    }
  }
  Unroller unroller(cx, copies, m.manual_axes);
  Scope* outer = &cx.scope();
  JMP_ASSIGN_OR_RETURN(
      std::vector<std::vector<int>> results,
      m.body ? unroller.Call(*m.body, args, 0)
             : unroller.Run(*outer->func, op.regions[0].blocks[0], args, 0, std::vector<Scope*>(n, outer)));
  cx.SetOp(op);
  for (size_t j = 0; j < op.results.size(); ++j) {
    std::vector<int> local(n);
    for (size_t c = 0; c < n; ++c) local[c] = results[c].at(j);
    JMP_ASSIGN_OR_RETURN(int global, ResultFromPieces(cx, m, j, std::move(local), copies));
    cx.BindShlo(op.results[j], global);
  }
  return Status::Ok();
}

Status Unroller::Nested(const shlo::Op& op, std::vector<Scope>& scopes, int depth) {
  cx_.SwapScope(&scopes[0]);
  cx_.SetOp(op);
  JMP_ASSIGN_OR_RETURN(ManualOp m, ReadManualOp(cx_));
  std::vector<int> axes = axes_;
  for (int a : m.manual_axes)
    if (std::find(axes.begin(), axes.end(), a) == axes.end()) axes.push_back(a);
  JMP_ASSIGN_OR_RETURN(Copies inner, CopiesOf(m.mesh, axes));
  // Each inner copy's outer copy: the device with its coordinates on the outer axes and 0 on the others.
  const size_t n = inner.device.size();
  std::vector<int64_t> position_of(static_cast<size_t>(m.mesh.size()));
  for (int64_t p = 0; p < m.mesh.size(); ++p) position_of.at(static_cast<size_t>(m.mesh.DeviceAt(p))) = p;
  std::vector<size_t> owner(n);
  for (size_t c = 0; c < n; ++c) {
    int64_t rest = position_of.at(static_cast<size_t>(inner.device[c])), position = 0, stride = 1;
    for (size_t a = m.mesh.axis_sizes.size(); a-- > 0;) {
      const int64_t size = m.mesh.axis_sizes[a], coord = rest % size;
      rest /= size;
      if (std::find(axes_.begin(), axes_.end(), static_cast<int>(a)) != axes_.end()) position += coord * stride;
      stride *= size;
    }
    const int outer = copies_.copy_of_device.at(static_cast<size_t>(m.mesh.DeviceAt(position)));
    if (outer < 0) return cx_.Unsupported("a nested manual computation over another mesh than the one around it");
    owner[c] = static_cast<size_t>(outer);
  }
  std::vector<std::vector<int>> args(n);
  std::vector<Scope*> outer_scopes(n);
  for (size_t c = 0; c < n; ++c) {
    cx_.SwapScope(&scopes[owner[c]]);
    cx_.SetOp(op);
    outer_scopes[c] = &scopes[owner[c]];
    for (size_t i = 0; i < op.operands.size(); ++i) {
      JMP_ASSIGN_OR_RETURN(int value, cx_.In(i));
      JMP_ASSIGN_OR_RETURN(int piece, OperandPiece(cx_, m, i, value, inner.device[c]));
      args[c].push_back(piece);
    }
  }
  Unroller unroller(cx_, inner, axes);
  JMP_ASSIGN_OR_RETURN(std::vector<std::vector<int>> results,
                       m.body ? unroller.Call(*m.body, args, depth + 1)
                              : unroller.Run(*scopes[0].func, op.regions[0].blocks[0], args, depth + 1, outer_scopes));
  // Each outer copy's results from the pieces of its inner copies.
  for (size_t outer = 0; outer < scopes.size(); ++outer) {
    Copies mine;
    mine.copy_of_device.assign(inner.copy_of_device.size(), -1);
    std::vector<size_t> members;
    for (size_t c = 0; c < n; ++c)
      if (owner[c] == outer) {
        mine.copy_of_device[static_cast<size_t>(inner.device[c])] = static_cast<int>(mine.device.size());
        mine.device.push_back(inner.device[c]);
        members.push_back(c);
      }
    cx_.SwapScope(&scopes[outer]);
    cx_.SetOp(op);
    for (size_t j = 0; j < op.results.size(); ++j) {
      std::vector<int> local;
      for (size_t c : members) local.push_back(results[c].at(j));
      if (local.empty()) return cx_.Unsupported("a nested manual computation leaves a device of the outer one out");
      JMP_ASSIGN_OR_RETURN(int value, ResultFromPieces(cx_, m, j, std::move(local), mine));
      scopes[outer].env[op.results[j]] = value;
    }
  }
  return Status::Ok();
}

// A sharding constraint changes no value. One that splits a dot_general's or a sum's result into
// partial sums over its split contraction (reduced dimension) makes them the ones XLA's partitioner
// leaves on each device.
Status ShardingConstraint(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int value, cx.In(0));
  cx.Bind(0, value);
  const shlo::Attr* text = cx.op().Find("sharding");
  if (cx.partitioning().num_devices() <= 1 || cx.manual_copies() > 0 || !text ||
      text->kind != shlo::Attr::Kind::kString || text->s.find("unreduced") == std::string::npos)
    return Status::Ok();
  Meshes meshes;
  if (!cx.module().sdy_meshes.empty()) {
    StatusOr<Meshes> parsed = ParseSdyMeshes(cx.module().sdy_meshes);
    if (!parsed.ok()) return cx.Unsupported(parsed.status().message());
    meshes = std::move(*parsed);
  }
  StatusOr<SdySharding> sharding = ParseSdySharding(text->s, meshes);
  if (!sharding.ok()) return cx.Unsupported(sharding.status().message());
  int64_t parts = 1;
  for (int a : sharding->unreduced) parts *= sharding->mesh.axis_sizes.at(static_cast<size_t>(a));
  if (parts > 1) SplitDotIntoParts(cx, value, parts);
  if (parts > 1) SplitSumIntoParts(cx, value, parts);
  return Status::Ok();
}

}  // namespace

bool IsManualComputationBody(const std::string& callee) {
  return callee.rfind("xla.sdy.manual_computation_body", 0) == 0;
}

void RegisterManualRules(std::map<std::string, LowerRule>& r) {
  // The shape conversions around the outlined body: the call takes and gives global values (it slices
  // and assembles them), so both pass their operands through.
  RegisterRule(r, "custom_call:xla.sdy.GlobalToLocalShape", &PassThrough);
  RegisterRule(r, "custom_call:xla.sdy.LocalToGlobalShape", &PassThrough);
  // Shardy's export marks a function's results with their shardings; @main's are read from its
  // attributes.
  RegisterRule(r, "custom_call:xla.sdy.FuncResultSharding", &PassThrough);
  RegisterRule(r, "sdy.sharding_constraint", &ShardingConstraint);
  RegisterRule(r, kManualComputationRule, &ManualComputation);
  RegisterRule(r, "sdy.manual_computation", &ManualComputation);
}

}  // namespace jmp::mps
