#include "lower/sharding.h"

#include <algorithm>
#include <cctype>
#include <utility>

namespace jmp::mps {

namespace {

constexpr int64_t kMaxDevices = 4096;

// A cursor over attribute text: skips blanks, reads the few tokens the sharding grammars use.
class Text {
 public:
  explicit Text(std::string_view s) : s_(s) {}
  void Blanks() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool Peek(std::string_view token) {
    Blanks();
    return s_.substr(i_, token.size()) == token;
  }
  bool Eat(std::string_view token) {
    if (!Peek(token)) return false;
    i_ += token.size();
    return true;
  }
  bool Int(int64_t* v) {
    Blanks();
    size_t start = i_;
    if (i_ < s_.size() && s_[i_] == '-') ++i_;
    int64_t x = 0;
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
      x = x * 10 + (s_[i_] - '0');
      if (x > (int64_t{1} << 40)) return false;
      ++i_;
    }
    if (i_ == start || (s_[start] == '-' && i_ == start + 1)) return false;
    *v = s_[start] == '-' ? -x : x;
    return true;
  }
  // "name" with the quotes (escaped quotes \" included, as a string attribute holding Shardy text has).
  bool Quoted(std::string* out) {
    Blanks();
    if (Eat("\\\"")) return Until("\\\"", out);
    if (Eat("\"")) return Until("\"", out);
    return false;
  }
  // An identifier (mesh names: letters, digits, '_', '.', '$', '-').
  bool Name(std::string* out) {
    Blanks();
    size_t start = i_;
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_' || s_[i_] == '.' ||
                              s_[i_] == '$' || s_[i_] == '-'))
      ++i_;
    *out = std::string(s_.substr(start, i_ - start));
    return i_ > start;
  }
  bool Done() {
    Blanks();
    return i_ >= s_.size();
  }
  // Skips to the closing `close` of a bracket just opened (nesting counted).
  bool SkipNested(char open, char close) {
    int depth = 1;
    for (; i_ < s_.size(); ++i_) {
      if (s_[i_] == open) ++depth;
      if (s_[i_] == close && --depth == 0) {
        ++i_;
        return true;
      }
    }
    return false;
  }

 private:
  bool Until(std::string_view end, std::string* out) {
    size_t at = s_.find(end, i_);
    if (at == std::string_view::npos) return false;
    *out = std::string(s_.substr(i_, at - i_));
    i_ = at + end.size();
    return true;
  }
  std::string_view s_;
  size_t i_ = 0;
};

Status Bad(const char* what, std::string_view text) {
  return InvalidArgument(std::string("malformed ") + what + ": '" + std::string(text.substr(0, 200)) + "'");
}

// An integer list "[1, 2, 3]".
bool IntList(Text& t, std::vector<int64_t>* out) {
  if (!t.Eat("[")) return false;
  if (t.Eat("]")) return true;
  do {
    int64_t v;
    if (!t.Int(&v)) return false;
    out->push_back(v);
  } while (t.Eat(","));
  return t.Eat("]");
}

// The body of a mesh after its '<': ["x"=4, ...] then optional ", device_ids=[...]", up to '>'.
bool MeshBody(Text& t, Mesh* mesh) {
  if (!t.Eat("[")) return false;
  if (!t.Eat("]")) {
    do {
      std::string name;
      int64_t size;
      if (!t.Quoted(&name) || !t.Eat("=") || !t.Int(&size) || size < 1 || size > kMaxDevices) return false;
      mesh->axis_names.push_back(std::move(name));
      mesh->axis_sizes.push_back(size);
    } while (t.Eat(","));
    if (!t.Eat("]")) return false;
  }
  if (t.Eat(",")) {
    if (!t.Eat("device_ids") || !t.Eat("=") || !IntList(t, &mesh->device_ids)) return false;
  }
  return t.Eat(">");
}

StatusOr<Mesh> CheckedMesh(Mesh mesh, std::string_view text) {
  const int64_t n = mesh.size();
  if (n < 1 || n > kMaxDevices) return Bad("mesh", text);
  if (!mesh.device_ids.empty()) {
    if (static_cast<int64_t>(mesh.device_ids.size()) != n) return Bad("mesh (device_ids)", text);
    std::vector<bool> seen(static_cast<size_t>(n), false);
    for (int64_t id : mesh.device_ids) {
      if (id < 0 || id >= n || seen[static_cast<size_t>(id)]) return Bad("mesh (device_ids)", text);
      seen[static_cast<size_t>(id)] = true;
    }
  }
  return mesh;
}

// One sharding after its '<': "@mesh, [dims...]" or "mesh<...>, [dims...]", optional ", replicated=..."
// and the like, up to '>'.
StatusOr<SdySharding> ShardingBody(Text& t, const Meshes& meshes, std::string_view text) {
  SdySharding out;
  if (t.Eat("@")) {
    std::string name;
    if (!t.Name(&name)) return Bad("sharding", text);
    auto it = meshes.find(name);
    if (it == meshes.end()) return InvalidArgument("a sharding names mesh @" + name + ", which the module lacks");
    out.mesh = it->second;
  } else if (t.Eat("#sdy.mesh<") || t.Eat("mesh<") || t.Eat("<")) {
    if (!MeshBody(t, &out.mesh)) return Bad("sharding (its mesh)", text);
    JMP_ASSIGN_OR_RETURN(out.mesh, CheckedMesh(std::move(out.mesh), text));
  } else {
    return Bad("sharding", text);
  }
  if (!t.Eat(",") || !t.Eat("[")) return Bad("sharding", text);
  if (!t.Eat("]")) {
    do {
      if (!t.Eat("{")) return Bad("sharding", text);
      std::vector<int> axes;
      bool open = false;
      if (!t.Eat("}")) {
        do {
          if (t.Eat("?")) {  // an open dimension: split over no further axis
            open = true;
            continue;
          }
          std::string axis;
          if (!t.Quoted(&axis)) return Bad("sharding", text);
          if (t.Peek(":")) return Unimplemented("a sharding over a sub-axis ('" + axis + "':...) is not supported");
          const int k = out.mesh.AxisIndex(axis);
          if (k < 0) return InvalidArgument("a sharding names axis '" + axis + "', which its mesh lacks");
          axes.push_back(k);
        } while (t.Eat(","));
        if (!t.Eat("}")) return Bad("sharding", text);
      }
      int64_t priority;
      if (t.Eat("p") && !t.Int(&priority)) return Bad("sharding", text);
      out.dim_axes.push_back(std::move(axes));
      out.open.push_back(open);
    } while (t.Eat(","));
    if (!t.Eat("]")) return Bad("sharding", text);
  }
  // replicated={...}: copies on those axes, as the axes no dimension names. unreduced={...}: partial
  // sums over those axes.
  while (t.Eat(",")) {
    std::string key;
    if (!t.Name(&key) || !t.Eat("=") || !t.Eat("{")) return Bad("sharding", text);
    if (key == "replicated") {
      if (!t.SkipNested('{', '}')) return Bad("sharding", text);
      continue;
    }
    if (key != "unreduced") return Unimplemented("a sharding with '" + key + "' axes is not supported");
    if (t.Eat("}")) continue;
    do {
      std::string axis;
      if (!t.Quoted(&axis)) return Bad("sharding", text);
      if (t.Peek(":")) return Unimplemented("a sharding over a sub-axis ('" + axis + "':...) is not supported");
      const int k = out.mesh.AxisIndex(axis);
      if (k < 0) return InvalidArgument("a sharding names axis '" + axis + "', which its mesh lacks");
      out.unreduced.push_back(k);
    } while (t.Eat(","));
    if (!t.Eat("}")) return Bad("sharding", text);
  }
  if (!t.Eat(">")) return Bad("sharding", text);
  return out;
}

}  // namespace

int64_t Mesh::size() const {
  int64_t n = 1;
  for (int64_t s : axis_sizes) n *= s;
  return n;
}

int Mesh::AxisIndex(std::string_view name) const {
  for (size_t k = 0; k < axis_names.size(); ++k)
    if (axis_names[k] == name) return static_cast<int>(k);
  return -1;
}

StatusOr<Mesh> ParseSdyMesh(std::string_view text) {
  Text t(text);
  if (!t.Eat("#sdy.mesh<") && !t.Eat("<")) return Bad("mesh", text);
  Mesh mesh;
  if (!MeshBody(t, &mesh) || !t.Done()) return Bad("mesh", text);
  return CheckedMesh(std::move(mesh), text);
}

StatusOr<Meshes> ParseSdyMeshes(std::string_view text) {
  Text t(text);
  Meshes meshes;
  if (!t.Eat("{")) return Bad("mesh list", text);
  if (t.Eat("}")) return meshes;
  do {
    std::string name;
    if (!t.Name(&name) || !t.Eat("=") || (!t.Eat("#sdy.mesh<") && !t.Eat("<"))) return Bad("mesh list", text);
    Mesh mesh;
    if (!MeshBody(t, &mesh)) return Bad("mesh list", text);
    JMP_ASSIGN_OR_RETURN(meshes[name], CheckedMesh(std::move(mesh), text));
  } while (t.Eat(","));
  if (!t.Eat("}") || !t.Done()) return Bad("mesh list", text);
  return meshes;
}

StatusOr<SdySharding> ParseSdySharding(std::string_view text, const Meshes& meshes) {
  Text t(text);
  if (!t.Eat("#sdy.sharding<") && !t.Eat("<")) return Bad("sharding", text);
  JMP_ASSIGN_OR_RETURN(SdySharding s, ShardingBody(t, meshes, text));
  if (!t.Done()) return Bad("sharding", text);
  return s;
}

StatusOr<std::vector<SdySharding>> ParseSdyShardings(std::string_view text, const Meshes& meshes) {
  Text t(text);
  const bool wrapped = t.Eat("#sdy.sharding_per_value<");
  if (!t.Eat("[")) return Bad("sharding list", text);
  std::vector<SdySharding> out;
  if (!t.Eat("]")) {
    do {
      if (!t.Eat("#sdy.sharding<") && !t.Eat("<")) return Bad("sharding list", text);
      JMP_ASSIGN_OR_RETURN(SdySharding s, ShardingBody(t, meshes, text));
      out.push_back(std::move(s));
    } while (t.Eat(","));
    if (!t.Eat("]")) return Bad("sharding list", text);
  }
  if (wrapped && !t.Eat(">")) return Bad("sharding list", text);
  if (!t.Done()) return Bad("sharding list", text);
  return out;
}

StatusOr<TileSharding> TilesOf(const SdySharding& sharding, size_t rank, int64_t num_devices) {
  const Mesh& mesh = sharding.mesh;
  // A mesh without axes or devices (JAX's empty_mesh) names no split: the value is whole everywhere.
  if (mesh.axis_names.empty() && mesh.device_ids.empty()) return TileSharding{};
  if (mesh.size() != num_devices)
    return InvalidArgument("a sharding over a mesh of " + std::to_string(mesh.size()) + " devices in a program for " +
                           std::to_string(num_devices));
  if (sharding.dim_axes.size() != rank)
    return InvalidArgument("a sharding of rank " + std::to_string(sharding.dim_axes.size()) + " for a value of rank " +
                           std::to_string(rank));
  TileSharding out;
  for (int a : sharding.unreduced) out.parts *= mesh.axis_sizes[static_cast<size_t>(a)];
  // The parts count as the leading dimension of the value's stack (lower.h).
  const bool partial = out.parts > 1;
  std::vector<std::vector<int>> dim_axes = sharding.dim_axes;
  if (partial) {
    dim_axes.insert(dim_axes.begin(), sharding.unreduced);
    ++rank;
  }
  bool split = false;
  out.tiles.assign(rank, 1);
  for (size_t k = 0; k < rank; ++k)
    for (int a : dim_axes[k]) {
      out.tiles[k] *= mesh.axis_sizes[static_cast<size_t>(a)];
      split = split || mesh.axis_sizes[static_cast<size_t>(a)] > 1;
    }
  if (!split) return TileSharding{};
  out.device_tile.assign(static_cast<size_t>(num_devices), 0);
  const size_t axes = mesh.axis_sizes.size();
  for (int64_t position = 0; position < num_devices; ++position) {
    std::vector<int64_t> coord(axes);
    for (size_t a = axes, rest = static_cast<size_t>(position); a-- > 0;) {
      coord[a] = static_cast<int64_t>(rest % static_cast<size_t>(mesh.axis_sizes[a]));
      rest /= static_cast<size_t>(mesh.axis_sizes[a]);
    }
    int64_t tile = 0;
    for (size_t k = 0; k < rank; ++k) {
      int64_t index = 0;  // along dimension k: the named axes' coordinates, major first
      for (int a : dim_axes[k]) index = index * mesh.axis_sizes[static_cast<size_t>(a)] + coord[static_cast<size_t>(a)];
      tile = tile * out.tiles[k] + index;
    }
    out.device_tile[static_cast<size_t>(mesh.DeviceAt(position))] = tile;
  }
  return out;
}

StatusOr<TileSharding> ParseHloSharding(std::string_view text, size_t rank, int64_t num_devices) {
  Text t(text);
  if (!t.Eat("{")) return Bad("HloSharding", text);
  if (t.Eat("replicated") || t.Eat("manual")) return TileSharding{};
  if (t.Eat("unreduced")) {  // every device a part of the whole
    if (num_devices <= 1) return TileSharding{};
    TileSharding out;
    out.parts = num_devices;
    out.tiles.assign(rank + 1, 1);
    out.tiles[0] = num_devices;
    for (int64_t d = 0; d < num_devices; ++d) out.device_tile.push_back(d);
    return out;
  }
  if (t.Peek("{")) return Unimplemented("a tuple sharding of one value is not supported: '" + std::string(text) + "'");
  if (t.Eat("maximal")) return Unimplemented("a sharding on one device only (maximal) is not supported");
  if (!t.Eat("devices=")) return Bad("HloSharding", text);
  std::vector<int64_t> shape;
  if (!IntList(t, &shape) || shape.empty()) return Bad("HloSharding", text);
  int64_t count = 1;
  for (int64_t s : shape) {
    if (s < 1 || s > kMaxDevices) return Bad("HloSharding", text);
    count *= s;
    if (count > kMaxDevices) return Bad("HloSharding", text);
  }
  // The devices in tile order: listed, or an iota reshaped and transposed ("<=[2,2]T(1,0)").
  std::vector<int64_t> devices;
  if (t.Eat("<=")) {
    std::vector<int64_t> dims, perm;
    if (!IntList(t, &dims)) return Bad("HloSharding", text);
    if (t.Eat("T(")) {
      do {
        int64_t p;
        if (!t.Int(&p)) return Bad("HloSharding", text);
        perm.push_back(p);
      } while (t.Eat(","));
      if (!t.Eat(")")) return Bad("HloSharding", text);
    }
    int64_t total = 1;
    for (int64_t d : dims) total *= d > 0 ? d : 0;
    if (total != count) return Bad("HloSharding", text);
    if (perm.empty())
      for (size_t k = 0; k < dims.size(); ++k) perm.push_back(static_cast<int64_t>(k));
    if (perm.size() != dims.size()) return Bad("HloSharding", text);
    std::vector<int64_t> tdims;
    for (int64_t p : perm) {
      if (p < 0 || static_cast<size_t>(p) >= dims.size()) return Bad("HloSharding", text);
      tdims.push_back(dims[static_cast<size_t>(p)]);
    }
    // Element i of the transposed iota: its coordinates in tdims, mapped back through perm.
    for (int64_t i = 0; i < count; ++i) {
      std::vector<int64_t> c(tdims.size());
      int64_t rest = i;
      for (size_t k = tdims.size(); k-- > 0;) {
        c[k] = rest % tdims[k];
        rest /= tdims[k];
      }
      std::vector<int64_t> orig(dims.size());
      for (size_t k = 0; k < perm.size(); ++k) orig[static_cast<size_t>(perm[k])] = c[k];
      int64_t v = 0;
      for (size_t k = 0; k < dims.size(); ++k) v = v * dims[k] + orig[k];
      devices.push_back(v);
    }
  } else {
    do {
      int64_t d;
      if (!t.Int(&d)) return Bad("HloSharding", text);
      devices.push_back(d);
    } while (t.Eat(","));
  }
  if (static_cast<int64_t>(devices.size()) != count) return Bad("HloSharding", text);
  // Trailing tile dimensions beyond the rank hold copies (last_tile_dim_replicate, last_tile_dims) or
  // parts (an "unreduced" one).
  size_t replicated_dims = 0;
  std::vector<bool> unreduced_dim;  // per trailing dimension
  if (t.Eat("last_tile_dim_replicate")) {
    replicated_dims = 1;
    unreduced_dim.push_back(false);
  } else if (t.Eat("last_tile_dims=")) {
    if (!t.Eat("{")) return Bad("HloSharding", text);
    do {
      std::string kind;
      if (!t.Name(&kind)) return Bad("HloSharding", text);
      if (kind != "replicated" && kind != "manual" && kind != "unreduced")
        return Unimplemented("a sharding with '" + kind + "' tile dimensions is not supported");
      ++replicated_dims;
      unreduced_dim.push_back(kind == "unreduced");
    } while (t.Eat(","));
    if (!t.Eat("}")) return Bad("HloSharding", text);
  }
  if (shape.size() != rank + replicated_dims)
    return InvalidArgument("a sharding of rank " + std::to_string(shape.size() - replicated_dims) +
                           " for a value of rank " + std::to_string(rank) + ": '" + std::string(text) + "'");
  if (count != num_devices)
    return InvalidArgument("a sharding over " + std::to_string(count) + " devices in a program for " +
                           std::to_string(num_devices) + ": '" + std::string(text) + "'");
  TileSharding out;
  out.tiles.assign(shape.begin(), shape.begin() + static_cast<std::ptrdiff_t>(rank));
  const int64_t per_part = TileCount(out);
  for (size_t k = 0; k < unreduced_dim.size(); ++k)
    if (unreduced_dim[k]) out.parts *= shape[rank + k];
  out.device_tile.assign(static_cast<size_t>(num_devices), -1);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t d = devices[static_cast<size_t>(i)];
    if (d < 0 || d >= num_devices || out.device_tile[static_cast<size_t>(d)] >= 0) return Bad("HloSharding", text);
    // Device i's coordinates: its tile over the first `rank` dimensions, its part over the unreduced ones.
    int64_t rest = i, part = 0, part_stride = 1;
    for (size_t k = shape.size(); k-- > rank;) {
      const int64_t coord = rest % shape[k];
      rest /= shape[k];
      if (unreduced_dim[k - rank]) {
        part += coord * part_stride;
        part_stride *= shape[k];
      }
    }
    out.device_tile[static_cast<size_t>(d)] = part * per_part + rest;
  }
  if (out.parts > 1) {
    out.tiles.insert(out.tiles.begin(), out.parts);
    return out;
  }
  bool split = false;
  for (int64_t x : out.tiles) split = split || x > 1;
  if (!split) return TileSharding{};
  return out;
}

SdySharding OverAxes(const SdySharding& sharding, const std::vector<int>& axes) {
  SdySharding out = sharding;
  for (std::vector<int>& dim : out.dim_axes)
    dim.erase(std::remove_if(dim.begin(), dim.end(),
                             [&](int a) { return std::find(axes.begin(), axes.end(), a) == axes.end(); }),
              dim.end());
  return out;
}

TileSharding WithoutParts(const TileSharding& sharding) {
  if (sharding.parts <= 1) return sharding;
  TileSharding whole;
  whole.tiles.assign(sharding.tiles.begin() + 1, sharding.tiles.end());
  const int64_t per_part = TileCount(whole);
  if (per_part <= 1) return TileSharding{};
  for (int64_t tile : sharding.device_tile) whole.device_tile.push_back(tile % per_part);
  return whole;
}

std::string HloShardingText(const TileSharding& sharding, int64_t num_devices) {
  const int64_t tiles = TileCount(sharding);
  if (tiles <= 1 || sharding.device_tile.size() != static_cast<size_t>(num_devices)) return "{replicated}";
  // XLA lists the devices tile by tile, within a tile part by part (its "unreduced" subgroup), and the
  // copies of one part last, here in ascending id.
  const int64_t parts = sharding.parts;
  if (parts > 1 && parts == num_devices) return "{unreduced}";
  const int64_t per_part = tiles / parts;
  std::vector<int64_t> order;
  for (int64_t tile = 0; tile < per_part; ++tile)
    for (int64_t part = 0; part < parts; ++part)
      for (int64_t d = 0; d < num_devices; ++d)
        if (sharding.device_tile[static_cast<size_t>(d)] == part * per_part + tile) order.push_back(d);
  const int64_t copies = num_devices / tiles;
  std::vector<int64_t> dims(sharding.tiles.begin() + (parts > 1 ? 1 : 0), sharding.tiles.end());
  if (parts > 1) dims.push_back(parts);
  if (copies > 1) dims.push_back(copies);
  std::string out = "{devices=[";
  for (size_t k = 0; k < dims.size(); ++k) out += (k ? "," : "") + std::to_string(dims[k]);
  out += "]";
  for (size_t k = 0; k < order.size(); ++k) out += (k ? "," : "") + std::to_string(order[k]);
  if (parts > 1) out += copies > 1 ? " last_tile_dims={unreduced, replicated}" : " last_tile_dims={unreduced}";
  if (parts == 1 && copies > 1) out += " last_tile_dim_replicate";
  return out + "}";
}

}  // namespace jmp::mps
