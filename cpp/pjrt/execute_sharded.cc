#include "pjrt/execute_sharded.h"

#include <cstring>
#include <string>
#include <utility>

#include "exec/host_callback.h"

namespace jmp::pjrt {

namespace {

int64_t Count(const std::vector<int64_t>& v) {
  int64_t n = 1;
  for (int64_t x : v) n *= x;
  return n;
}

bool Whole(const mps::TileSharding& s) {
  for (int64_t t : s.tiles)
    if (t != 1) return false;
  return true;
}

// Copies the innermost-contiguous block of rank `dims.size() - k` at the given byte offsets.
void CopyBlock(uint8_t* global, const std::vector<int64_t>& dims, const std::vector<int64_t>& offset,
               const std::vector<int64_t>& extent, size_t k, size_t global_at, uint8_t* local, size_t& local_at,
               size_t element, bool to_global) {
  // Row-major strides of the global array from dimension k on.
  size_t stride = element;
  for (size_t j = k + 1; j < dims.size(); ++j) stride *= static_cast<size_t>(dims[j]);
  if (k + 1 == dims.size()) {
    const size_t bytes = static_cast<size_t>(extent[k]) * element;
    uint8_t* g = global + global_at + static_cast<size_t>(offset[k]) * element;
    if (to_global)
      std::memcpy(g, local + local_at, bytes);
    else
      std::memcpy(local + local_at, g, bytes);
    local_at += bytes;
    return;
  }
  for (int64_t i = 0; i < extent[k]; ++i)
    CopyBlock(global, dims, offset, extent, k + 1, global_at + static_cast<size_t>(offset[k] + i) * stride, local,
              local_at, element, to_global);
}

// Device d's shard of one argument, checked against the program's input i.
StatusOr<BufferState*> Shard(const std::vector<std::vector<BufferState*>>& arguments, size_t d, size_t i, DType dtype,
                             const std::vector<int64_t>& shard_dims) {
  BufferState* b = arguments[d][i];
  if (!b) return InvalidArgument("device " + std::to_string(d) + ": argument " + std::to_string(i) + " is null");
  if (b->dtype != dtype || b->dims != shard_dims)
    return InvalidArgument("device " + std::to_string(d) + ": argument " + std::to_string(i) +
                           " has the wrong type or shape for its shard");
  return b;
}

}  // namespace

StatusOr<std::vector<int64_t>> TileDims(const std::vector<int64_t>& dims, const std::vector<int64_t>& tiles) {
  if (tiles.empty()) return dims;
  if (tiles.size() != dims.size())
    return InvalidArgument("a sharding of rank " + std::to_string(tiles.size()) + " for an array of rank " +
                           std::to_string(dims.size()));
  std::vector<int64_t> out(dims.size());
  for (size_t k = 0; k < dims.size(); ++k) {
    if (tiles[k] < 1 || dims[k] % tiles[k] != 0)
      return Unimplemented("dimension " + std::to_string(k) + " of size " + std::to_string(dims[k]) +
                           " is split into " + std::to_string(tiles[k]) +
                           " uneven shards; the metal platform splits dimensions evenly only");
    out[k] = dims[k] / tiles[k];
  }
  return out;
}

void CopyTile(uint8_t* global, const std::vector<int64_t>& dims, const std::vector<int64_t>& tiles, int64_t tile,
              uint8_t* local, size_t element, bool to_global) {
  if (dims.empty()) {
    if (to_global)
      std::memcpy(global, local, element);
    else
      std::memcpy(local, global, element);
    return;
  }
  std::vector<int64_t> extent(dims.size()), offset(dims.size());
  for (size_t k = dims.size(); k-- > 0;) {
    const int64_t t = tiles.empty() ? 1 : tiles[k];
    extent[k] = dims[k] / t;
    offset[k] = (tile % t) * extent[k];
    tile /= t;
  }
  for (int64_t e : extent)
    if (e == 0) return;
  size_t local_at = 0;
  CopyBlock(global, dims, offset, extent, 0, 0, local, local_at, element, to_global);
}

Status ExecuteSharded(const std::vector<ExecutionContext>& devices, const DevicePlacement& placement,
                      const std::shared_ptr<CompiledProgram>& program,
                      const std::vector<std::vector<BufferState*>>& arguments, const int64_t* non_donatable,
                      size_t num_non_donatable, std::vector<std::vector<std::shared_ptr<BufferState>>>& outputs,
                      std::vector<std::shared_ptr<EventState>>& done) {
  const mps::Graph& g = program->graph;
  const mps::Signature& sig = program->signature;
  const size_t num_devices = devices.size(), n = g.inputs.size(), m = g.outputs.size();
  if (sig.input_shardings.size() != n || sig.output_shardings.size() != m)
    return Internal("a program for several devices without a sharding per argument and result");
  if (placement.local_positions.size() != num_devices || num_devices == 0)
    return Internal("a placement for another number of devices");
  for (size_t d = 0; d < num_devices; ++d) JMP_RETURN_IF_ERROR(CheckArgumentCount(*program, arguments[d].size()));
  bool across_processes = false;
  for (int p : placement.process_of) across_processes |= p != placement.process;
  if (across_processes && !placement.group) return Internal("devices of other processes without a process group");
  // Which of this process's devices is at each position, if any.
  std::vector<int> local_at(placement.process_of.size(), -1);
  for (size_t d = 0; d < num_devices; ++d) local_at.at(placement.local_positions[d]) = static_cast<int>(d);

  std::vector<bool> donate = sig.donated;
  if (exec::InPythonCallback()) donate.assign(n, false);
  for (size_t k = 0; k < num_non_donatable; ++k) {
    const int64_t i = non_donatable[k];
    if (i >= 0 && static_cast<size_t>(i) < n) donate[static_cast<size_t>(i)] = false;
  }

  // The global arguments: a replicated one is the first device's buffer; the others are assembled on
  // the first device once their shards are ready, each tile from the first device (in position order)
  // holding it, this process's or another's.
  const ExecutionContext& first = devices[0];
  std::vector<std::shared_ptr<BufferState>> assembled(n);
  std::vector<BufferState*> global(n);
  std::vector<Transfer> sends, receives;
  std::vector<std::shared_ptr<void>> held;  // what the transfers read and write
  struct Scattered {                        // a received tile to place after the exchange
    size_t input;
    int64_t tile;
    std::shared_ptr<std::vector<uint8_t>> data;
  };
  std::vector<Scattered> scattered;
  for (size_t i = 0; i < n; ++i) {
    const mps::TensorType& t = g.type(g.inputs[i]);
    const mps::TileSharding& sharding = sig.input_shardings[i];
    JMP_ASSIGN_OR_RETURN(std::vector<int64_t> shard_dims, TileDims(t.shape, sharding.tiles));
    std::vector<BufferState*> shards(num_devices);
    for (size_t d = 0; d < num_devices; ++d) {
      JMP_ASSIGN_OR_RETURN(shards[d], Shard(arguments, d, i, sig.input_dtypes[i], shard_dims));
    }
    if (Whole(sharding)) {
      global[i] = shards[0];
      continue;
    }
    const size_t element = ByteSize(sig.input_dtypes[i]);
    const size_t bytes = static_cast<size_t>(Count(t.shape)) * element;
    const size_t tile_bytes = static_cast<size_t>(Count(shard_dims)) * element;
    JMP_ASSIGN_OR_RETURN(std::shared_ptr<exec::DeviceMemory> memory, first.executor.Allocate(bytes));
    uint8_t* whole = static_cast<uint8_t*>(memory->data());
    // Split along the first dimension only, a tile is one contiguous range of the whole.
    bool contiguous = true;
    for (size_t k = 1; k < sharding.tiles.size(); ++k) contiguous &= sharding.tiles[k] == 1;
    std::vector<bool> seen(static_cast<size_t>(Count(sharding.tiles)), false);
    for (size_t position = 0; position < placement.process_of.size(); ++position) {
      const int64_t tile = sharding.device_tile.at(position);
      if (seen.at(static_cast<size_t>(tile))) continue;
      seen[static_cast<size_t>(tile)] = true;
      const int owner = placement.process_of[position];
      if (owner == placement.process) {
        const size_t d = static_cast<size_t>(local_at[position]);
        JMP_RETURN_IF_ERROR(shards[d]->ready->Await());
        JMP_ASSIGN_OR_RETURN(std::shared_ptr<exec::DeviceMemory> shard, LiveMemory(*shards[d]));
        if (bytes)
          CopyTile(whole, t.shape, sharding.tiles, tile, static_cast<uint8_t*>(shard->data()), element,
                   /*to_global=*/true);
        if (!across_processes || !tile_bytes) continue;
        for (int p = 0; p < placement.group->count(); ++p)
          if (p != placement.process) sends.push_back({p, shard->data(), tile_bytes});
        held.push_back(shard);
      } else if (tile_bytes) {
        if (contiguous) {
          receives.push_back({owner, whole + static_cast<size_t>(tile) * tile_bytes, tile_bytes});
        } else {
          auto data = std::make_shared<std::vector<uint8_t>>(tile_bytes);
          receives.push_back({owner, data->data(), tile_bytes});
          scattered.push_back({i, tile, data});
          held.push_back(data);
        }
      }
    }
    held.push_back(memory);
    assembled[i] = MakeBuffer(first.counters, sig.input_dtypes[i], t.shape, std::move(memory));
    assembled[i]->ready->Set(Status::Ok());
    global[i] = assembled[i].get();
  }
  if (across_processes) {
    JMP_RETURN_IF_ERROR(placement.group->Exchange(
        program->fingerprint, "the arguments of a program over several processes", sends, receives, std::move(held)));
    for (const Scattered& s : scattered) {
      const mps::TensorType& t = g.type(g.inputs[s.input]);
      JMP_ASSIGN_OR_RETURN(std::shared_ptr<exec::DeviceMemory> whole, LiveMemory(*assembled[s.input]));
      CopyTile(static_cast<uint8_t*>(whole->data()), t.shape, sig.input_shardings[s.input].tiles, s.tile,
               s.data->data(), ByteSize(sig.input_dtypes[s.input]), /*to_global=*/true);
    }
  }

  std::vector<std::shared_ptr<BufferState>> results;
  std::shared_ptr<EventState> ran;
  // Device 0's own buffers are donated (or not) by the run itself; an assembled copy always may be.
  std::vector<int64_t> keep;
  for (size_t i = 0; i < n; ++i)
    if (!donate[i]) keep.push_back(static_cast<int64_t>(i));
  JMP_RETURN_IF_ERROR(Execute(first, program, global, keep.data(), keep.size(), results, ran));
  // The other devices' donated shards are consumed with the call.
  for (size_t i = 0; i < n; ++i) {
    if (!donate[i]) continue;
    for (size_t d = 0; d < num_devices; ++d) {
      BufferState* b = arguments[d][i];
      if (b == global[i]) continue;
      std::lock_guard<std::mutex> lock(b->mu);
      if (b->external_refs == 0 && !b->SharedLocked()) b->DeleteLocked();
    }
  }
  JMP_RETURN_IF_ERROR(ran->Await());

  outputs.assign(num_devices, {});
  done.assign(num_devices, nullptr);
  for (size_t j = 0; j < m; ++j) {
    const mps::TensorType& t = g.type(g.outputs[j]);
    const mps::TileSharding& sharding = sig.output_shardings[j];
    JMP_ASSIGN_OR_RETURN(std::vector<int64_t> shard_dims, TileDims(t.shape, sharding.tiles));
    const DType dtype = sig.output_dtypes[j];
    const size_t element = ByteSize(dtype);
    const size_t bytes = static_cast<size_t>(Count(shard_dims)) * element;
    JMP_ASSIGN_OR_RETURN(std::shared_ptr<exec::DeviceMemory> whole, LiveMemory(*results[j]));
    for (size_t d = 0; d < num_devices; ++d) {
      if (d == 0 && Whole(sharding)) {
        outputs[d].push_back(results[j]);
        continue;
      }
      JMP_ASSIGN_OR_RETURN(std::shared_ptr<exec::DeviceMemory> memory, devices[d].executor.Allocate(bytes));
      if (bytes)
        CopyTile(static_cast<uint8_t*>(whole->data()), t.shape, sharding.tiles,
                 sharding.device_tile.empty() ? 0 : sharding.device_tile.at(placement.local_positions[d]),
                 static_cast<uint8_t*>(memory->data()), element, /*to_global=*/false);
      auto shard = MakeBuffer(devices[d].counters, dtype, shard_dims, std::move(memory));
      shard->space = results[j]->space;
      shard->ready->Set(Status::Ok());
      outputs[d].push_back(std::move(shard));
    }
  }
  for (size_t d = 0; d < num_devices; ++d) done[d] = CompletedEvent(Status::Ok());
  return Status::Ok();
}

}  // namespace jmp::pjrt
