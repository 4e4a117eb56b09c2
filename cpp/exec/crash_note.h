// A process that dies inside the Metal side leaves a note, so that the crash happens once. MPSGraph
// stops the process with a failed assertion (SIGABRT) for much of what it rejects, and a GPU fault can
// take it down; no error comes back to return. So while the Metal side compiles or encodes a segment,
// the segment's ops are held here (text formatted at compile time, published with one atomic store), and
// a handler for SIGABRT, SIGSEGV and SIGBUS appends them, one "Op:dtype" a line, to the file
// JAX_METAL_CRASH_NOTE names, then lets the signal take its course (the handler before ours, or the
// default action). jax_metal_plugin/_capabilities.py names that file (keyed by plugin build and OS
// build), and in the next process warns and routes the noted ops to the host executor.
#pragma once

#include <memory>
#include <string>

#include "exec/executor.h"
#include "mps/graph.h"

namespace jmp::exec {

// `device` with its Compile, Load, Run and Start holding the graph's ops for the note; `device` itself
// when JAX_METAL_CRASH_NOTE is unset. The first call with it set installs the signal handlers.
std::unique_ptr<Executor> WithCrashNotes(std::unique_ptr<Executor> device);

// The note's text for a graph: each (op kind, dtype) it holds, subgraphs too, as "Op:dtype\n", sorted.
std::string CrashNoteText(const mps::Graph& graph);

}  // namespace jmp::exec
