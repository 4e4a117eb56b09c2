// One process's part of a program over several processes (jax.distributed). The program over tiles
// (tile_signature.h) is the whole program; a process holds only its devices' tiles. Where everything a
// process returns follows from its own tiles and from AllReduce ops (op_kinds.def), it runs only its
// part: the ops its results need, each AllReduce taking the other processes' members over MPI. Then a
// data-parallel step computes each process's batch in that process alone, and a psum moves and adds
// each element once among the processes, as MPI's own all-reduce does, instead of every process
// receiving every argument it lacks and computing the whole program.
#pragma once

#include <vector>

#include "mps/graph.h"
#include "support/status.h"

namespace jmp::mps {

struct ProcessLayout {
  int process = 0;              // the process whose part this is
  std::vector<int> process_of;  // per device position, its process
  std::vector<bool> holds;      // per input of the program over tiles: whether this process holds it
  std::vector<bool> returns;    // per output: whether this process returns it
};

// The part `layout.process` runs: the returned outputs in order, the held inputs in order, and every
// AllReduce with members both here and elsewhere, whether or not a returned output needs it (the other
// processes wait for it), its operands this process's members'. False when a returned output needs a
// value this process cannot compute from what it holds: then the processes exchange arguments.
bool ProcessPart(const Graph& tiles, const ProcessLayout& layout, Graph* part);

}  // namespace jmp::mps
