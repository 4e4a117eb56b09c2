// Collectives between a manual computation's copies: each becomes data movement between the copies'
// values (an all_reduce reduces the copies' operands in group order, as each device would).
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lower/lower_context.h"
#include "lower/lower_manual.h"

namespace jmp::mps::manual {

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

}  // namespace

StatusOr<std::vector<std::vector<size_t>>> Unroller::Groups(const shlo::Op& op, const char* attr) {
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

StatusOr<int> Unroller::Reduce(const shlo::Op& op, const std::vector<int>& values, Scope& scope) {
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

StatusOr<int> Unroller::ReduceGroup(const shlo::Op& op, const std::vector<int>& values,
                                    const std::vector<size_t>& group, Scope& scope) {
  if (!cx_.partitioning().across_processes || values.size() < 2) return Reduce(op, values, scope);
  cx_.SwapScope(&scope);
  const size_t before = cx_.graph().ops.size();
  JMP_ASSIGN_OR_RETURN(int pair, Reduce(op, {values[0], values[1]}, scope));
  Graph& g = cx_.graph();
  BinaryOp binary;
  if (g.ops.size() == before + 1 && BinaryOpOf(g.ops.back().kind, &binary) &&
      g.ops.back().inputs == std::vector<int>{values[0], values[1]} && g.ops.back().outputs == std::vector<int>{pair}) {
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

int Unroller::Concat(const std::vector<int>& parts, int64_t dim) {
  if (parts.size() == 1) return parts[0];
  TensorType t = cx_.Type(parts[0]);
  for (size_t k = 1; k < parts.size(); ++k)
    t.shape[static_cast<size_t>(dim)] += cx_.ShapeOf(parts[k])[static_cast<size_t>(dim)];
  return cx_.Emit(OpKind::kConcat, parts, t.dtype, t.shape, AxisAttrs{dim});
}

int Unroller::Part(int v, int64_t dim, int64_t index, int64_t count) {
  Shape shape = cx_.ShapeOf(v);
  Shape starts(shape.size(), 0), ends = shape;
  const int64_t size = shape[static_cast<size_t>(dim)] / count;
  starts[static_cast<size_t>(dim)] = index * size;
  ends[static_cast<size_t>(dim)] = (index + 1) * size;
  return cx_.Slice(v, starts, ends);
}

Status Unroller::Collective(const shlo::Op& op, std::vector<Scope>& scopes) {
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

Status Unroller::Combine(const shlo::Op& op, size_t i, const std::vector<size_t>& group, const std::vector<int>& values,
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

Status Unroller::Permute(const shlo::Op& op, const std::vector<std::vector<int>>& in,
                         std::vector<std::vector<int>>& out) {
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

}  // namespace jmp::mps::manual
