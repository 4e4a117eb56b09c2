#include "mps/graph_serial.h"

#include <iterator>
#include <string>
#include <utility>

#include "mps/op_attrs.h"
#include "mps/verify.h"

namespace jmp::mps {

namespace {

// While and If nest their bodies; a file could nest without end and exhaust the stack.
constexpr int kMaxDepth = 64;
constexpr uint64_t kNumOpKinds = std::size(kAllOpKinds);
constexpr uint64_t kNumDTypes = static_cast<uint64_t>(DType::kF4E2M1FN) + 1;

void WriteType(const TensorType& t, ByteWriter& out) {
  out.U64(static_cast<uint64_t>(t.dtype));
  out.I64s(t.shape);
}

void WriteOp(const Op& op, ByteWriter& out) {
  out.U64(static_cast<uint64_t>(op.kind));
  out.Ints(op.inputs);
  out.Ints(op.outputs);
  out.I64s(op.axes);
  out.I64s(op.starts);
  out.I64s(op.ends);
  out.I64s(op.strides);
  out.F64(op.scalar);
  out.I64(PackedIntAttr(op));
  out.Bytes(std::string_view(reinterpret_cast<const char*>(op.data.data()), op.data.size()));
  out.U64(op.subgraphs.size());
  for (const Graph& g : op.subgraphs) WriteGraph(g, out);
  out.Bytes(op.location);
}

StatusOr<Graph> Read(ByteReader& in, int depth);

StatusOr<Op> ReadOp(ByteReader& in, int depth) {
  Op op;
  JMP_ASSIGN_OR_RETURN(uint64_t kind, in.U64());
  if (kind >= kNumOpKinds) return in.Malformed("unknown op kind " + std::to_string(kind));
  op.kind = kAllOpKinds[kind];
  JMP_ASSIGN_OR_RETURN(op.inputs, in.Ints());
  JMP_ASSIGN_OR_RETURN(op.outputs, in.Ints());
  JMP_ASSIGN_OR_RETURN(op.axes, in.I64s());
  JMP_ASSIGN_OR_RETURN(op.starts, in.I64s());
  JMP_ASSIGN_OR_RETURN(op.ends, in.I64s());
  JMP_ASSIGN_OR_RETURN(op.strides, in.I64s());
  JMP_ASSIGN_OR_RETURN(op.scalar, in.F64());
  JMP_ASSIGN_OR_RETURN(int64_t packed, in.I64());
  SetPackedIntAttr(op, packed);
  JMP_ASSIGN_OR_RETURN(std::string_view data, in.Bytes());
  op.data.assign(data.begin(), data.end());
  JMP_ASSIGN_OR_RETURN(size_t subgraphs, in.Count(32));
  for (size_t i = 0; i < subgraphs; ++i) {
    JMP_ASSIGN_OR_RETURN(Graph g, Read(in, depth + 1));
    op.subgraphs.push_back(std::move(g));
  }
  JMP_ASSIGN_OR_RETURN(std::string_view location, in.Bytes());
  op.location = std::string(location);
  return op;
}

StatusOr<Graph> Read(ByteReader& in, int depth) {
  if (depth > kMaxDepth) return in.Malformed("subgraphs nested too deeply");
  Graph g;
  JMP_ASSIGN_OR_RETURN(size_t values, in.Count(16));
  g.values.reserve(values);
  for (size_t i = 0; i < values; ++i) {
    TensorType t;
    JMP_ASSIGN_OR_RETURN(uint64_t dtype, in.U64());
    if (dtype >= kNumDTypes) return in.Malformed("unknown element type " + std::to_string(dtype));
    t.dtype = static_cast<DType>(dtype);
    JMP_ASSIGN_OR_RETURN(t.shape, in.I64s());
    for (int64_t d : t.shape)
      if (d < 0) return in.Malformed("a negative dimension");
    g.values.push_back(std::move(t));
  }
  JMP_ASSIGN_OR_RETURN(g.inputs, in.Ints());
  JMP_ASSIGN_OR_RETURN(g.outputs, in.Ints());
  JMP_ASSIGN_OR_RETURN(size_t ops, in.Count(8));
  g.ops.reserve(ops);
  for (size_t i = 0; i < ops; ++i) {
    JMP_ASSIGN_OR_RETURN(Op op, ReadOp(in, depth));
    g.ops.push_back(std::move(op));
  }
  return g;
}

}  // namespace

void WriteGraph(const Graph& graph, ByteWriter& out) {
  out.U64(graph.values.size());
  for (const TensorType& t : graph.values) WriteType(t, out);
  out.Ints(graph.inputs);
  out.Ints(graph.outputs);
  out.U64(graph.ops.size());
  for (const Op& op : graph.ops) WriteOp(op, out);
}

StatusOr<Graph> ReadGraph(ByteReader& in) {
  JMP_ASSIGN_OR_RETURN(Graph g, Read(in, 0));
  Status verified = VerifyGraph(g);
  if (!verified.ok()) return in.Malformed("its op graph fails verification: " + verified.message());
  return g;
}

bool HasPythonCallbacks(const Graph& graph) {
  for (const Op& op : graph.ops) {
    if (op.kind == OpKind::kPythonCallback) return true;
    for (const Graph& g : op.subgraphs)
      if (HasPythonCallbacks(g)) return true;
  }
  return false;
}

}  // namespace jmp::mps
