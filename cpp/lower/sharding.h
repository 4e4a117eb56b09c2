// Shardings as JAX writes them, read into TileSharding (lower.h): Shardy's textual attributes
// (#sdy.mesh, #sdy.sharding, a manual computation's lists of them) and XLA's HloSharding strings
// ("{devices=[2,1]<=[2]}", "{replicated}"). Input is untrusted: every form not understood is an error
// naming the text.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lower/lower.h"
#include "support/status.h"

namespace jmp::mps {

// A Shardy mesh: named axes with their sizes, and the device id at each mesh position (row-major over
// the axes); no device_ids: position k is device k.
struct Mesh {
  std::vector<std::string> axis_names;
  std::vector<int64_t> axis_sizes;
  std::vector<int64_t> device_ids;
  int64_t size() const;
  int64_t DeviceAt(int64_t position) const { return device_ids.empty() ? position : device_ids.at(position); }
  // The axis's index, or -1.
  int AxisIndex(std::string_view name) const;
};
using Meshes = std::map<std::string, Mesh>;

// One Shardy tensor sharding: the mesh it names and, per dimension, the axes it is split over (major
// first). Open dimensions and replicated axes split nothing.
struct SdySharding {
  Mesh mesh;
  std::vector<std::vector<int>> dim_axes;  // axis indices into mesh
  std::vector<int> unreduced;              // axes over which the devices hold partial sums
};

// "#sdy.mesh<[\"x\"=4, \"y\"=2], device_ids=[...]>" (the prefix optional).
StatusOr<Mesh> ParseSdyMesh(std::string_view text);
// "{mesh = #sdy.mesh<...>, other = #sdy.mesh<...>}": a module's meshes by name.
StatusOr<Meshes> ParseSdyMeshes(std::string_view text);
// "#sdy.sharding<@mesh, [{\"x\"}, {}]>" or "<@mesh, [...]>" or with an inline mesh<...>.
StatusOr<SdySharding> ParseSdySharding(std::string_view text, const Meshes& meshes);
// "[<@mesh, [...]>, <@mesh, [...]>]" (a manual computation's in_shardings / out_shardings); the
// "#sdy.sharding_per_value" prefix optional.
StatusOr<std::vector<SdySharding>> ParseSdyShardings(std::string_view text, const Meshes& meshes);

// How an array of `rank` dimensions lies on `num_devices` devices under the Shardy sharding: device ids
// index device_tile; unreduced axes make parts (lower.h). An error unless the mesh has num_devices devices.
StatusOr<TileSharding> TilesOf(const SdySharding& sharding, size_t rank, int64_t num_devices);
// The same for an HloSharding string.
StatusOr<TileSharding> ParseHloSharding(std::string_view text, size_t rank, int64_t num_devices);
// For @main's results without a sharding: one found where the program states it (result_shardings.cc),
// else whole on every device. One per program, as it parses the module's meshes and maps every value of
// @main to the op producing it.
class ResultShardingFinder {
 public:
  ResultShardingFinder(const shlo::Module& module, const shlo::Func& main, int64_t num_devices);
  // The sharding of @main's result `result`, of rank `rank`.
  TileSharding ForResult(size_t result, size_t rank) const;

 private:
  // The sharding found for value `id` (of rank `rank`), if any.
  bool Find(int id, size_t rank, TileSharding* out, int depth = 0) const;
  bool Parse(const std::string& text, size_t rank, TileSharding* out) const;
  bool FromList(const std::string& text, size_t j, size_t rank, TileSharding* out) const;

  const shlo::Func& main_;
  int64_t devices_;
  Meshes meshes_;
  std::map<int, size_t> argument_;
  std::map<int, std::pair<const shlo::Op*, size_t>> producer_;
};
// The sharding with the parts of a partial sum as copies of its tiles.
TileSharding WithoutParts(const TileSharding& sharding);
// The inverse of ParseHloSharding, as XLA prints it: "{replicated}", "{devices=[1,4]0,1,2,3}", with a trailing copies
// dimension (last_tile_dim_replicate) where several devices hold one tile.
std::string HloShardingText(const TileSharding& sharding, int64_t num_devices);

}  // namespace jmp::mps
