// The processes of one JAX program run across processes (jax.distributed): who they are, how many
// devices each brings, and the one way data moves between them, MPI point-to-point transfers with a
// deadline. A process that never arrives, or died, is named in an error once nothing has come for
// JAX_METAL_PEER_TIMEOUT seconds instead of hanging every other process; after that the group refuses further
// transfers, since MPI's state with a vanished peer is undefined.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "exec/process_collectives.h"
#include "pjrt/mpi_library.h"
#include "support/status.h"

namespace jmp::pjrt {

// The key-value store PJRT's client creation hands over (JAX's coordination service).
struct KeyValueStore {
  std::function<Status(const std::string& key, const std::string& value)> put;
  std::function<StatusOr<std::string>(const std::string& key, int timeout_ms)> get;
};

// One transfer with one other process: `data` stays valid until the exchange ends (or for ever, after a
// failed one: the caller hands its owner to the group).
struct Transfer {
  int process;
  void* data;
  size_t bytes;
};

class ProcessGroup {
 public:
  // Joins the group of `count` processes as process `process`, announcing `local_devices` through the
  // store and learning every other process's devices and MPI rank.
  static StatusOr<std::unique_ptr<ProcessGroup>> Join(int process, int count, int local_devices,
                                                      const KeyValueStore& store);

  int process() const { return process_; }
  int count() const { return static_cast<int>(devices_.size()); }
  // Devices of each process, by process index.
  const std::vector<int>& devices() const { return devices_; }

  // Every process of `participants` (the processes with devices in the program, this one among them)
  // runs its matching exchange for the same run of the same program (`fingerprint`; a mismatch is an
  // error in each of them before any data moves). The messages between
  // two processes are matched in the order both list them. `what` names the exchange in errors. `keep`
  // is kept alive for ever if the exchange fails (MPI may still touch the memory of abandoned transfers).
  Status Exchange(const std::string& fingerprint, const std::string& what, const std::vector<int>& participants,
                  const std::vector<Transfer>& sends, const std::vector<Transfer>& receives,
                  std::vector<std::shared_ptr<void>> keep = {});

  // One all-reduce of a process's part of a program (exec/process_collectives.h), between the processes
  // holding its members: each folds its share of the elements from every member, in group order, and
  // sends the others its folded share, as MPI's reduce-scatter then all-gather would; every process ends
  // with the same bits. The group installs this as the executors' reducer when it joins.
  Status AllReduce(const exec::ProcessReduce& reduce);

  // What JAX's coordination service reports of a process: an exchange waiting for a process that is
  // gone fails at once, naming it, rather than at the deadline.
  void SetGone(int process, const std::string& why);

  // Seconds a process waits for another (JAX_METAL_PEER_TIMEOUT, default 300).
  static StatusOr<double> Timeout();

 private:
  ProcessGroup() = default;

 public:
  ~ProcessGroup();

 private:
  MpiLibrary* mpi_ = nullptr;
  int process_ = 0;
  std::vector<int> devices_;
  std::vector<int> ranks_;  // MPI rank of each process
  double timeout_s_ = 300;
  std::mutex mu_;                              // one exchange at a time, in the same order in every process
  std::map<std::vector<int>, uint64_t> runs_;  // by set of participants: their runs together
  Status broken_;
  std::vector<std::shared_ptr<void>> abandoned_;
  std::mutex gone_mu_;             // not mu_: the coordination service reports while an exchange waits
  std::vector<std::string> gone_;  // by process: why it is gone, empty while it is not

  // Posts and completes the transfers by the deadline (mu_ held).
  Status Transfer(const std::string& what, int tag, const std::vector<jmp::pjrt::Transfer>& sends,
                  const std::vector<jmp::pjrt::Transfer>& receives, std::vector<std::shared_ptr<void>>& keep);
};

}  // namespace jmp::pjrt
