// Collectives between the processes of a program over several processes (jax.distributed), as the
// AllReduce op (op_kinds.def) runs them inside one process's part of the program: the host kernel
// does the arithmetic, and the process group the runtime joined (pjrt/process_group.h) moves the
// data over MPI. The executors know nothing of MPI or of the group; the group installs itself here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "support/status.h"

namespace jmp::exec {

// One all-reduce as one process sees it. Members are in group order; `processes[k]` holds member k,
// and `operands` are this process's members' operands, in group order. Every process folds, for its
// share of the elements, all members in group order with `combine`, then each gets the others'
// shares: `out` ends as the whole fold, the same in every process.
struct ProcessReduce {
  std::vector<int> processes;
  std::vector<const uint8_t*> operands;
  uint8_t* out = nullptr;
  int64_t elements = 0;
  size_t element_bytes = 0;
  // acc[0..count) = acc o x elementwise; both start at the same element of their operands.
  std::function<Status(uint8_t* acc, const uint8_t* x, int64_t count)> combine;
};

using ProcessReducer = std::function<Status(const ProcessReduce&)>;

// The group installs its reducer once it has joined, and removes it (null) when it goes.
void SetProcessReducer(ProcessReducer reducer);
// Runs `reduce` through the installed group; an error when this process joined none.
Status ReduceAcrossProcesses(const ProcessReduce& reduce);

}  // namespace jmp::exec
