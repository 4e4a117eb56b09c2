// sdy.sharding_constraint, registered beside the manual computations (lower_manual.cc).
#include <cstdint>
#include <string>
#include <utility>

#include "lower/lower_context.h"
#include "lower/lower_manual.h"
#include "lower/partial_sums.h"
#include "lower/sharding.h"

namespace jmp::mps::manual {

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

}  // namespace jmp::mps::manual
