// Shardings as JAX writes them, read into TileSharding (lower.h): Shardy's textual attributes
// (#sdy.mesh, #sdy.sharding, a manual computation's lists of them) and XLA's HloSharding strings
// ("{devices=[2,1]<=[2]}", "{replicated}"). Input is untrusted: every form not understood is an error
// naming the text.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
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
  std::vector<bool> open;                  // per dimension: open ({?}), left to propagation
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
// The sharding's splits over `axes` alone, its partial sums kept: a manual computation's body sees its
// operands and results split over the manual axes only, whole along auto axes its shardings also split.
SdySharding OverAxes(const SdySharding& sharding, const std::vector<int>& axes);
// For @main's results without a sharding: one found where the program states it (result_shardings.cc),
// else whole on every device. One per program, as it parses the module's meshes and maps every value of
// @main to the op producing it.
class ResultShardingFinder {
 public:
  ResultShardingFinder(const shlo::Module& module, const shlo::Func& main, int64_t num_devices);
  // The sharding of @main's result `result`, of rank `rank`.
  TileSharding ForResult(size_t result, size_t rank) const;

 private:
  // Where each value of a block comes from: its arguments' positions and the ops producing the rest.
  struct Scope {
    std::map<int, size_t> argument;
    std::map<int, std::pair<const shlo::Op*, size_t>> producer;
  };
  // A block being searched: @main's, a nested jit's callee reached through the func.call `call`, or a
  // manual computation's body reached through `call`, the manual computation itself.
  struct Frame {
    const shlo::Func* func;  // whose value_types give the block's types
    const shlo::Block* block;
    const Frame* caller = nullptr;
    const shlo::Op* call = nullptr;
  };
  const Scope& ScopeOf(const shlo::Block& block) const;
  // The sharding found for value `id` of `frame`'s block (of rank `rank`), if any.
  bool Find(const Frame& frame, int id, size_t rank, TileSharding* out, int depth = 0) const;
  bool Search(const Frame& frame, int id, size_t rank, TileSharding* out, int depth) const;
  // The same through the last op of `body` (a block `call` enters from `frame`), which returns `id`'s
  // value as its operand j.
  bool FindReturned(const Frame& frame, const shlo::Op& call, const shlo::Func& func, const shlo::Block& body, size_t j,
                    size_t rank, TileSharding* out, int depth) const;
  // Result j (value `id`) of a manual computation `call` with these out_shardings and this body (of
  // `body_func`; null when unknown).
  bool FromManual(const Frame& frame, const shlo::Op& call, const shlo::Func& body_func, const shlo::Block* body,
                  const std::string& out_shardings, size_t j, int id, size_t rank, TileSharding* out, int depth) const;
  bool Parse(const std::string& text, size_t rank, TileSharding* out) const;
  // A stated sharding (an sdy list and its entry j) that splits nothing but leaves dimensions open:
  // what propagation puts there, the split of `operand` on those dimensions.
  bool ThroughOpen(const Frame& frame, int operand, const std::string& list, size_t j, size_t rank, TileSharding* out,
                   int depth) const;
  bool FromList(const std::string& text, size_t j, size_t rank, TileSharding* out) const;

  const shlo::Module& module_;
  const shlo::Func& main_;
  int64_t devices_;
  Meshes meshes_;
  mutable std::map<const shlo::Block*, Scope> scopes_;
  // What Find gave per (block and the calls that led there, value, rank).
  mutable std::map<std::tuple<std::vector<const void*>, int, size_t>, std::optional<TileSharding>> found_;
};
// The sharding with the parts of a partial sum as copies of its tiles.
TileSharding WithoutParts(const TileSharding& sharding);
// The inverse of ParseHloSharding, as XLA prints it: "{replicated}", "{devices=[1,4]0,1,2,3}", with a trailing copies
// dimension (last_tile_dim_replicate) where several devices hold one tile.
std::string HloShardingText(const TileSharding& sharding, int64_t num_devices);

}  // namespace jmp::mps
