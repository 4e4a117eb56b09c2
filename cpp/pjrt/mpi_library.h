// MPI, loaded at run time: only a client spanning several processes needs it, so the plugin neither links
// it nor needs it installed otherwise. The library is MPICH's ABI (libmpi.so.12 / libmpi.12.dylib, as the
// `mpich` wheel and mpi4py's MPICH build use), the one this process's mpi4py has loaded when JAX found
// its cluster through mpi4py. Calls are serialised by the caller (ProcessGroup), so MPI needs no more than
// MPI_THREAD_SERIALIZED.
#pragma once

#include <cstddef>
#include <string>

#include "support/status.h"

namespace jmp::pjrt {

class MpiLibrary {
 public:
  // MPICH ABI handles are ints.
  using Request = int;

  // The loaded, initialised library with a communicator of its own (a duplicate of MPI_COMM_WORLD, so no
  // message of another library in the process can match ours). Loaded once per process.
  static StatusOr<MpiLibrary*> Get();

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& path() const { return path_; }

  // Nonblocking point-to-point byte transfers on the plugin's communicator; `bytes` at most kMaxMessage.
  Status Isend(const void* data, size_t bytes, int peer, int tag, Request* request);
  Status Irecv(void* data, size_t bytes, int peer, int tag, Request* request);
  // Whether the request has finished (then it is freed); an error when the transfer failed.
  StatusOr<bool> Test(Request* request);
  // Gives up an unfinished request (after a peer failed to arrive); a receive is cancelled first.
  void Abandon(Request* request, bool receive);

  static constexpr size_t kMaxMessage = size_t{1} << 30;

 private:
  Status Check(int code, const char* call) const;

  struct Functions;
  Functions* fn_ = nullptr;
  std::string path_;
  int comm_ = 0;
  int rank_ = 0, size_ = 1;
};

}  // namespace jmp::pjrt
