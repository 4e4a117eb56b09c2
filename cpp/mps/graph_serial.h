// The MPS op graph as bytes, for serialized executables: a cache hit rebuilds the graph from these
// without reading or lowering the StableHLO module again. Every field of every op is copied as it is,
// its attributes as their alternative's index and then its fields in declaration order (a change to
// an attribute struct changes the format: pjrt/program_serial.cc's header names its version); reading
// checks the structure (op kinds, dtypes, value ids, nesting, flags and modes in range) and then
// VerifyGraph, since the bytes come from a file anyone could have written.
#pragma once

#include "mps/graph.h"
#include "support/byte_stream.h"
#include "support/status.h"

namespace jmp::mps {

void WriteGraph(const Graph& graph, ByteWriter& out);
StatusOr<Graph> ReadGraph(ByteReader& in);

// One op's attributes, the part of an op's bytes each attribute struct defines; reading checks the
// fields' ranges but not whether an op kind takes the alternative (ReadGraph's verification does).
void WriteAttrs(const OpAttrs& attrs, ByteWriter& out);
StatusOr<OpAttrs> ReadAttrs(ByteReader& in);

// Whether the graph (or a subgraph) calls back into Python: such a program names callbacks of this
// process and cannot be loaded by another.
bool HasPythonCallbacks(const Graph& graph);

}  // namespace jmp::mps
