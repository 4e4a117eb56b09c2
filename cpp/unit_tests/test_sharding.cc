// Sharding text both ways: XLA's HloSharding strings read into TileSharding and printed back, and the
// module XLA reads a several-device program's shardings from.
#include <string>
#include <vector>

#include "lower/sharding.h"
#include "pjrt/optimized_program.h"
#include "unit_tests/host_graph.h"
#include "unit_tests/unit_test.h"

namespace jmp::unit {
namespace {

// Printed text parses back to the same placement of tiles on devices.
void RoundTrip(Context& jmp_test_, const std::string& text, size_t rank, int64_t devices, const std::string& expect) {
  StatusOr<mps::TileSharding> s = mps::ParseHloSharding(text, rank, devices);
  EXPECT_TRUE(s.ok());
  if (!s.ok()) return;
  const std::string printed = mps::HloShardingText(*s, devices);
  if (printed != expect) jmp_test_.Fail(__FILE__, __LINE__, text + " printed as " + printed + ", expected " + expect);
  StatusOr<mps::TileSharding> back = mps::ParseHloSharding(printed, rank, devices);
  EXPECT_TRUE(back.ok());
  if (!back.ok()) return;
  EXPECT_TRUE(back->tiles == s->tiles);
  EXPECT_TRUE(back->device_tile == s->device_tile);
  EXPECT_TRUE(back->parts == s->parts);
}

JMP_TEST(Sharding, HloTextRoundTrips) {
  RoundTrip(jmp_test_, "{replicated}", 2, 4, "{replicated}");
  RoundTrip(jmp_test_, "{devices=[4,1]<=[4]}", 2, 4, "{devices=[4,1]0,1,2,3}");
  RoundTrip(jmp_test_, "{devices=[1,4]3,2,1,0}", 2, 4, "{devices=[1,4]3,2,1,0}");
  // A transposed iota: tile k of dimension 0 on devices k and k+2 ... as XLA writes a mesh's minor axis.
  RoundTrip(jmp_test_, "{devices=[2,2]<=[2,2]T(1,0)}", 2, 4, "{devices=[2,2]0,2,1,3}");
  // Two copies of each tile: the copies dimension comes last.
  RoundTrip(jmp_test_, "{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}", 2, 4,
            "{devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}");
  RoundTrip(jmp_test_, "{devices=[2,4]<=[8] last_tile_dim_replicate}", 1, 8,
            "{devices=[2,4]0,1,2,3,4,5,6,7 last_tile_dim_replicate}");
  // Parts of partial sums (XLA's unreduced subgroup), with copies of each part, and over every device.
  RoundTrip(jmp_test_, "{devices=[2,2]<=[4] last_tile_dims={unreduced, replicated}}", 0, 4,
            "{devices=[2,2]0,1,2,3 last_tile_dims={unreduced, replicated}}");
  RoundTrip(jmp_test_, "{devices=[2,2]<=[2,2]T(1,0) last_tile_dims={unreduced}}", 1, 4,
            "{devices=[2,2]0,2,1,3 last_tile_dims={unreduced}}");
  RoundTrip(jmp_test_, "{unreduced}", 2, 4, "{unreduced}");
}

// Unreduced axes make parts: the stack's leading dimension, counted first in a device's tile; XLA's text
// shows the parts as copies.
JMP_TEST(Sharding, UnreducedAxesMakeParts) {
  StatusOr<mps::Meshes> meshes = mps::ParseSdyMeshes("{mesh = #sdy.mesh<[\"x\"=2, \"y\"=2]>}");
  EXPECT_TRUE(meshes.ok());
  if (!meshes.ok()) return;
  StatusOr<mps::SdySharding> sdy =
      mps::ParseSdySharding("#sdy.sharding<@mesh, [{\"x\"}, {}], unreduced={\"y\"}>", *meshes);
  EXPECT_TRUE(sdy.ok());
  if (!sdy.ok()) return;
  StatusOr<mps::TileSharding> s = mps::TilesOf(*sdy, 2, 4);
  EXPECT_TRUE(s.ok());
  if (!s.ok()) return;
  EXPECT_TRUE(s->parts == 2);
  EXPECT_TRUE((s->tiles == std::vector<int64_t>{2, 2, 1}));
  // Device (x, y) holds part y of tile x.
  EXPECT_TRUE((s->device_tile == std::vector<int64_t>{0, 2, 1, 3}));
  EXPECT_TRUE(mps::HloShardingText(*s, 4) == "{devices=[2,1,2]0,1,2,3 last_tile_dims={unreduced}}");
  // Over every axis, a scalar: four parts of one tile.
  StatusOr<mps::SdySharding> all = mps::ParseSdySharding("#sdy.sharding<@mesh, [], unreduced={\"x\", \"y\"}>", *meshes);
  EXPECT_TRUE(all.ok());
  if (!all.ok()) return;
  StatusOr<mps::TileSharding> scalar = mps::TilesOf(*all, 0, 4);
  EXPECT_TRUE(scalar.ok() && scalar->parts == 4 && scalar->tiles == std::vector<int64_t>{4});
  EXPECT_TRUE(mps::HloShardingText(*scalar, 4) == "{unreduced}");
  // An axis the mesh lacks is an error.
  EXPECT_TRUE(!mps::ParseSdySharding("#sdy.sharding<@mesh, [{}], unreduced={\"z\"}>", *meshes).ok());
}

JMP_TEST(Sharding, OptimizedProgramDeclaresEveryValuesSharding) {
  GraphBuilder b;
  int x = b.Input(DType::kF32, {8, 4});
  int y = b.Input(DType::kI32, {});
  b.Output(b.Apply(mps::OpKind::kNegative, {x}, DType::kF32, {8, 4}));
  b.Output(y);
  mps::Signature sig;
  sig.input_dtypes = {DType::kF32, DType::kI32};
  sig.output_dtypes = {DType::kF32, DType::kI32};
  sig.input_shardings = {mps::TileSharding{{4, 1}, {0, 1, 2, 3}}, mps::TileSharding{}};
  sig.output_shardings = {mps::TileSharding{{1, 2}, {0, 0, 1, 1}}, mps::TileSharding{}};
  const std::string text = pjrt::OptimizedProgramText(b.graph(), sig, 4);
  auto has = [&](const std::string& part) { return text.find(part) != std::string::npos; };
  EXPECT_TRUE(has("mhlo.num_partitions = 4 : i32"));
  EXPECT_TRUE(has("mhlo.spmd_parameters_shardings = [\"{devices=[4,1]0,1,2,3}\", \"{replicated}\"]"));
  EXPECT_TRUE(has("mhlo.spmd_output_sharding = \"{{devices=[1,2,2]0,1,2,3 last_tile_dim_replicate}, {replicated}}\""));
  EXPECT_TRUE(
      has("func.func public @main(%arg0: tensor<2x4xf32>, %arg1: tensor<i32>) -> (tensor<8x2xf32>, tensor<i32>)"));
  EXPECT_TRUE(has("%0:2 = stablehlo.custom_call @jax_metal_program(%arg0, %arg1)"));
  EXPECT_TRUE(has("return %0#0, %0#1 : tensor<8x2xf32>, tensor<i32>"));
}

}  // namespace
}  // namespace jmp::unit
