#include "pjrt/execute_sharded.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "exec/host_callback.h"
#include "exec/work_counters.h"
#include "lower/tile_signature.h"

namespace jmp::pjrt {

namespace {

int64_t Count(const std::vector<int64_t>& v) {
  int64_t n = 1;
  for (int64_t x : v) n *= x;
  return n;
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

// Whether process `q` holds tile `tile` of a value lying as `sharding` says (a whole one: every process).
bool Holds(const mps::TileSharding& sharding, const DevicePlacement& placement, int q, int64_t tile) {
  if (mps::TileCount(sharding) == 1) return true;
  for (size_t position = 0; position < placement.process_of.size(); ++position)
    if (placement.process_of[position] == q && sharding.device_tile.at(position) == tile) return true;
  return false;
}

// This process's part of the program over tiles (lower/process_part.h), or null when the processes
// exchange arguments and each runs the whole program.
StatusOr<std::shared_ptr<CompiledProgram>> PartOf(exec::Executor& executor, const CompiledProgram& program,
                                                  const DevicePlacement& placement,
                                                  const std::vector<int>& participants) {
  std::vector<int> key{placement.process};
  key.insert(key.end(), placement.process_of.begin(), placement.process_of.end());
  return ProcessPartOf(executor, program, key, [&](size_t* self) {
    const mps::Signature& sig = program.signature;
    std::vector<mps::ProcessLayout> layouts;
    for (int q : participants) {
      mps::ProcessLayout layout;
      layout.process = q;
      layout.process_of = placement.process_of;
      for (const mps::TileSharding& sharding : sig.input_shardings)
        for (int64_t tile = 0; tile < mps::TileCount(sharding); ++tile)
          layout.holds.push_back(Holds(sharding, placement, q, tile));
      for (const mps::TileSharding& sharding : sig.output_shardings)
        for (int64_t tile = 0; tile < mps::TileCount(sharding); ++tile)
          layout.returns.push_back(Holds(sharding, placement, q, tile));
      if (q == placement.process) *self = layouts.size();
      layouts.push_back(std::move(layout));
    }
    return layouts;
  });
}

}  // namespace

StatusOr<std::vector<int64_t>> TileDims(const std::vector<int64_t>& dims, const mps::TileSharding& sharding) {
  const std::vector<int64_t>& tiles = sharding.tiles;
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
  if (sharding.parts > 1) out.erase(out.begin());
  return out;
}

Status ExecuteSharded(const std::vector<ExecutionContext>& devices, const DevicePlacement& placement,
                      const std::shared_ptr<CompiledProgram>& program,
                      const std::vector<std::vector<BufferState*>>& arguments, const int64_t* non_donatable,
                      size_t num_non_donatable, std::vector<std::vector<std::shared_ptr<BufferState>>>& outputs,
                      std::vector<std::shared_ptr<EventState>>& done) {
  const mps::Graph& g = program->graph;
  const mps::Signature& sig = program->signature;
  const std::shared_ptr<CompiledProgram>& tiled = program->tiles;
  const size_t num_devices = devices.size(), n = g.inputs.size(), m = g.outputs.size();
  if (!tiled || sig.input_shardings.size() != n || sig.output_shardings.size() != m)
    return Internal("a program for several devices without its shardings and its program over tiles");
  if (placement.local_positions.size() != num_devices || num_devices == 0)
    return Internal("a placement for another number of devices");
  for (size_t d = 0; d < num_devices; ++d) JMP_RETURN_IF_ERROR(CheckArgumentCount(*program, arguments[d].size()));
  const size_t positions = placement.process_of.size();
  bool across_processes = false;
  for (int p : placement.process_of) across_processes |= p != placement.process;
  if (across_processes && !placement.group) return Internal("devices of other processes without a process group");
  const int processes = across_processes ? placement.group->count() : 1;
  // The processes with devices in the program, in order: only they run it.
  std::vector<int> participants;
  for (int p : placement.process_of)
    if (std::find(participants.begin(), participants.end(), p) == participants.end()) participants.push_back(p);
  std::sort(participants.begin(), participants.end());

  std::vector<bool> donate = sig.donated;
  if (exec::InPythonCallback()) donate.assign(n, false);
  for (size_t k = 0; k < num_non_donatable; ++k) {
    const int64_t i = non_donatable[k];
    if (i >= 0 && static_cast<size_t>(i) < n) donate[static_cast<size_t>(i)] = false;
  }

  // Over several processes, each runs only its part where every process has one; otherwise the tiles
  // program's inputs: each tile from this process's device holding it; a tile no device of this process
  // holds comes over MPI from the process of the first device (in position order) holding it, which
  // sends it to every process without it.
  const ExecutionContext& first = devices[0];
  std::shared_ptr<CompiledProgram> part;
  if (across_processes) {
    JMP_ASSIGN_OR_RETURN(part, PartOf(first.executor, *program, placement, participants));
  }
  std::vector<BufferState*> inputs;
  std::vector<std::shared_ptr<BufferState>> received;
  std::vector<Transfer> sends, receives;
  std::vector<std::shared_ptr<void>> held;  // what the transfers read and write
  for (size_t i = 0; i < n; ++i) {
    const mps::TensorType& t = g.type(g.inputs[i]);
    const mps::TileSharding& sharding = sig.input_shardings[i];
    JMP_ASSIGN_OR_RETURN(std::vector<int64_t> shard_dims, TileDims(t.shape, sharding));
    std::vector<BufferState*> shards(num_devices);
    for (size_t d = 0; d < num_devices; ++d) {
      JMP_ASSIGN_OR_RETURN(shards[d], Shard(arguments, d, i, sig.input_dtypes[i], shard_dims));
    }
    const int64_t count = mps::TileCount(sharding);
    if (count == 1) {
      inputs.push_back(shards[0]);
      continue;
    }
    const size_t bytes = static_cast<size_t>(Count(shard_dims)) * ByteSize(sig.input_dtypes[i]);
    for (int64_t tile = 0; tile < count; ++tile) {
      int local = -1;
      for (size_t d = 0; d < num_devices && local < 0; ++d)
        if (sharding.device_tile.at(placement.local_positions[d]) == tile) local = static_cast<int>(d);
      // Whether each process holds the tile (one without devices in the program needs nothing).
      std::vector<bool> holds(static_cast<size_t>(processes), true);
      if (across_processes)
        for (int p : participants) holds.at(static_cast<size_t>(p)) = false;
      int owner = -1;
      for (size_t position = 0; position < positions; ++position) {
        if (sharding.device_tile.at(position) != tile) continue;
        if (owner < 0) owner = placement.process_of[position];
        if (across_processes) holds.at(static_cast<size_t>(placement.process_of[position])) = true;
      }
      if (owner < 0) return Internal("argument " + std::to_string(i) + ": a tile on no device");
      if (local >= 0) {
        BufferState* shard = shards[static_cast<size_t>(local)];
        inputs.push_back(shard);
        if (part || owner != placement.process || !bytes) continue;
        bool others = false;
        for (bool h : holds) others |= !h;
        if (!others) continue;
        JMP_RETURN_IF_ERROR(shard->ready->Await());
        JMP_ASSIGN_OR_RETURN(std::shared_ptr<exec::DeviceMemory> memory, LiveMemory(*shard));
        for (int p = 0; p < processes; ++p)
          if (!holds[static_cast<size_t>(p)]) sends.push_back({p, memory->data(), bytes});
        held.push_back(memory);
        continue;
      }
      if (part) continue;  // another process's tile: its part reads it
      JMP_ASSIGN_OR_RETURN(std::shared_ptr<exec::DeviceMemory> memory, first.executor.Allocate(bytes));
      if (bytes) receives.push_back({owner, memory->data(), bytes});
      held.push_back(memory);
      received.push_back(MakeBuffer(first.counters, sig.input_dtypes[i], shard_dims, std::move(memory)));
      received.back()->ready->Set(Status::Ok());
      inputs.push_back(received.back().get());
    }
  }
  if (across_processes) {
    (part ? exec::Counters().process_part_runs : exec::Counters().argument_exchanges)
        .fetch_add(1, std::memory_order_relaxed);
    JMP_RETURN_IF_ERROR(placement.group->Exchange(program->fingerprint,
                                                  "the arguments of a program over several processes", participants,
                                                  sends, receives, std::move(held)));
  }

  // Each result tile's place among the run's outputs. A process of several computes only the tiles its
  // own devices hold.
  std::shared_ptr<CompiledProgram> run = tiled;
  std::vector<size_t> output_at;
  {
    std::vector<bool> wanted;
    for (size_t j = 0; j < m; ++j) {
      const mps::TileSharding& sharding = sig.output_shardings[j];
      const int64_t count = mps::TileCount(sharding);
      for (int64_t tile = 0; tile < count; ++tile) {
        const bool held = !across_processes || Holds(sharding, placement, placement.process, tile);
        output_at.push_back(std::count(wanted.begin(), wanted.end(), true));
        wanted.push_back(held);
      }
    }
    if (part) {
      run = part;
    } else if (across_processes) {
      JMP_ASSIGN_OR_RETURN(run, TilesKept(first.executor, *program, wanted));
    }
  }
  std::vector<int64_t> keep(inputs.size());
  for (size_t k = 0; k < keep.size(); ++k) keep[k] = static_cast<int64_t>(k);
  std::vector<std::shared_ptr<BufferState>> results;
  std::shared_ptr<EventState> ran;
  JMP_RETURN_IF_ERROR(Execute(first, run, inputs, keep.data(), keep.size(), results, ran));
  JMP_RETURN_IF_ERROR(ran->Await());
  // A donated argument's shards are consumed with the call.
  for (size_t i = 0; i < n; ++i) {
    if (!donate[i]) continue;
    for (size_t d = 0; d < num_devices; ++d) {
      BufferState* b = arguments[d][i];
      std::lock_guard<std::mutex> lock(b->mu);
      if (b->external_refs == 0 && !b->SharedLocked()) b->DeleteLocked();
    }
  }

  // Each device its tile of each result: the run's own buffer for the first device taking it, a copy
  // for any other.
  outputs.assign(num_devices, {});
  done.assign(num_devices, nullptr);
  size_t at = 0;
  for (size_t j = 0; j < m; ++j) {
    const mps::TileSharding& sharding = sig.output_shardings[j];
    const int64_t count = mps::TileCount(sharding);
    std::vector<bool> taken(static_cast<size_t>(count), false);
    for (size_t d = 0; d < num_devices; ++d) {
      const int64_t tile = count == 1 ? 0 : sharding.device_tile.at(placement.local_positions[d]);
      const std::shared_ptr<BufferState>& result = results.at(output_at.at(at + static_cast<size_t>(tile)));
      if (!taken[static_cast<size_t>(tile)]) {
        taken[static_cast<size_t>(tile)] = true;
        outputs[d].push_back(result);
        continue;
      }
      JMP_ASSIGN_OR_RETURN(std::shared_ptr<exec::DeviceMemory> whole, LiveMemory(*result));
      JMP_ASSIGN_OR_RETURN(std::shared_ptr<exec::DeviceMemory> memory, devices[d].executor.Allocate(result->bytes));
      if (result->bytes) std::memcpy(memory->data(), whole->data(), result->bytes);
      auto copy = MakeBuffer(devices[d].counters, result->dtype, result->dims, std::move(memory));
      copy->space = result->space;
      copy->ready->Set(Status::Ok());
      outputs[d].push_back(std::move(copy));
    }
    at += static_cast<size_t>(count);
  }
  for (size_t d = 0; d < num_devices; ++d) done[d] = CompletedEvent(Status::Ok());
  return Status::Ok();
}

}  // namespace jmp::pjrt
