// Collectives where one device takes part: psum, all_gather, psum_scatter, all_to_all, ppermute and
// axis_index under pmap or shard_map over a mesh of one, or in a manual computation whose body has one
// copy. Each replica group is {0} and a collective over it is the identity: a group of one combines
// nothing (XLA applies no reduction body to a single member), gathers and scatters along a dimension of
// size x1. collective_permute is the one exception: a device that no pair sends to receives zeros, so
// without a (0, 0) pair the result is zeros. Over several devices, lower_manual_collectives.cc lowers collectives
// across the body's copies, in loops and branches too; one that reaches these rules there (a region the
// unroller does not take apart) is refused.
#include "lower/lower_context.h"

namespace jmp::mps {

namespace {

// Device ids an id-list attribute (replica_groups, source_target_pairs) names; -1 pads ragged groups.
StatusOr<std::vector<int64_t>> DeviceIds(LowerContext& cx, const char* name) {
  const shlo::Attr* a = cx.op().Find(name);
  if (!a) return std::vector<int64_t>{};  // absent: every replica in one group
  if (a->kind == shlo::Attr::Kind::kInts) return a->ints;
  if (a->kind == shlo::Attr::Kind::kTensor && a->type.dtype == DType::kI64 && a->data.size() % 8 == 0 && !a->splat) {
    std::vector<int64_t> ids(a->data.size() / 8);
    for (size_t i = 0; i < ids.size(); ++i) {
      uint64_t v = 0;
      for (int b = 7; b >= 0; --b) v = (v << 8) | a->data[8 * i + static_cast<size_t>(b)];
      ids[i] = static_cast<int64_t>(v);
    }
    return ids;
  }
  return cx.Unsupported(std::string("attribute ") + name + " is not a list of device ids");
}

// A collective here must combine one device only.
Status OneDevice(LowerContext& cx) {
  if (cx.manual_copies() > 1)
    return cx.Unsupported("a collective inside this region of a manual computation over " +
                          std::to_string(cx.manual_copies()) + " devices is not supported");
  if (cx.manual_copies() == 0 && cx.partitioning().num_devices() > 1)
    return cx.Unsupported("a collective outside a manual computation (shard_map) in a program for " +
                          std::to_string(cx.partitioning().num_devices()) + " devices is not supported");
  return Status::Ok();
}

Status OnlyDeviceZero(LowerContext& cx, const char* name) {
  JMP_RETURN_IF_ERROR(OneDevice(cx));
  JMP_ASSIGN_OR_RETURN(std::vector<int64_t> ids, DeviceIds(cx, name));
  for (int64_t id : ids)
    if (id > 0) return cx.Unsupported(std::string(name) + " names a device other than 0 (metal has one device)");
  return Status::Ok();
}

// Each result is its operand, of the same type (a group of one).
Status Identity(LowerContext& cx) {
  const shlo::Op& op = cx.op();
  if (op.operands.size() != op.results.size()) return cx.Unsupported("collective with unmatched results");
  for (size_t i = 0; i < op.results.size(); ++i) {
    JMP_ASSIGN_OR_RETURN(int v, cx.In(i));
    if (cx.ShapeOf(v) != cx.OutType(i).shape || cx.DTypeOf(v) != cx.OutType(i).dtype)
      return cx.Unsupported("collective over one device whose result differs from its operand");
    cx.Bind(i, v);
  }
  return Status::Ok();
}

Status OverGroups(LowerContext& cx) {
  JMP_RETURN_IF_ERROR(OnlyDeviceZero(cx, "replica_groups"));
  return Identity(cx);
}

Status AllToAll(LowerContext& cx) {
  if (cx.op().Find("split_count")) {
    JMP_ASSIGN_OR_RETURN(int64_t count, cx.IntAttr("split_count"));
    if (count != 1) return cx.Unsupported("all_to_all split over more than one device");
  }
  return OverGroups(cx);
}

Status CollectivePermute(LowerContext& cx) {
  JMP_RETURN_IF_ERROR(OneDevice(cx));
  JMP_ASSIGN_OR_RETURN(std::vector<int64_t> pairs, DeviceIds(cx, "source_target_pairs"));
  if (pairs.size() % 2) return cx.Unsupported("source_target_pairs of odd length");
  bool to_self = false;
  for (size_t i = 0; i < pairs.size(); i += 2) {
    if (pairs[i] > 0 || pairs[i + 1] > 0)
      return cx.Unsupported("source_target_pairs names a device other than 0 (metal has one device)");
    to_self = to_self || (pairs[i] == 0 && pairs[i + 1] == 0);
  }
  if (to_self) return Identity(cx);
  if (cx.op().operands.size() != 1 || cx.op().results.size() != 1)
    return cx.Unsupported("malformed collective_permute");
  const shlo::Type& out = cx.OutType(0);
  cx.Bind(0, cx.Splat(out.dtype, out.shape, 0));
  return Status::Ok();
}

// replica_id and partition_id (axis_index under pmap or shard_map): in a manual computation's body, the
// device of the copy being lowered; with one device, 0. There is one replica.
Status DeviceId(LowerContext& cx, bool partition) {
  if (cx.op().results.size() != 1) return cx.Unsupported("malformed device id");
  int64_t id = 0;
  if (partition && cx.manual_device() >= 0) {
    id = cx.manual_device();
  } else if (partition && cx.partitioning().num_devices() > 1) {
    return cx.Unsupported("partition_id outside a manual computation (shard_map) in a program for " +
                          std::to_string(cx.partitioning().num_devices()) + " devices is not supported");
  }
  const shlo::Type& out = cx.OutType(0);
  cx.Bind(0, cx.Splat(out.dtype, out.shape, static_cast<double>(id)));
  return Status::Ok();
}

Status PartitionId(LowerContext& cx) { return DeviceId(cx, true); }
Status ReplicaId(LowerContext& cx) { return DeviceId(cx, false); }

}  // namespace

void RegisterCollectiveRules(std::map<std::string, LowerRule>& r) {
  RegisterRule(r, "stablehlo.all_reduce", &OverGroups);
  RegisterRule(r, "stablehlo.all_gather", &OverGroups);
  RegisterRule(r, "stablehlo.reduce_scatter", &OverGroups);
  RegisterRule(r, "stablehlo.all_to_all", &AllToAll);
  RegisterRule(r, "stablehlo.collective_broadcast", &OverGroups);
  RegisterRule(r, "stablehlo.collective_permute", &CollectivePermute);
  RegisterRule(r, "stablehlo.replica_id", &ReplicaId);
  RegisterRule(r, "stablehlo.partition_id", &PartitionId);
}

}  // namespace jmp::mps
