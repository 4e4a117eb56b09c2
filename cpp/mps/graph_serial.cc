#include "mps/graph_serial.h"

#include <array>
#include <iterator>
#include <string>
#include <utility>
#include <variant>
#include <vector>

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

void WriteBool(bool b, ByteWriter& out) { out.U64(b ? 1 : 0); }
void WriteInts3(const std::array<int64_t, 3>& v, ByteWriter& out) { out.I64s({v.begin(), v.end()}); }

// Each alternative's fields in declaration order, after the alternative's index.
struct AttrsWriter {
  ByteWriter& out;
  void operator()(const NoAttrs&) {}
  void operator()(const ConstantAttrs& a) {
    out.Bytes(std::string_view(reinterpret_cast<const char*>(a.data.data()), a.data.size()));
  }
  void operator()(const AxisAttrs& a) { out.I64(a.axis); }
  void operator()(const AxesAttrs& a) { out.I64s(a.axes); }
  void operator()(const PermutationAttrs& a) { out.I64s(a.permutation); }
  void operator()(const SliceAttrs& a) {
    out.I64s(a.starts);
    out.I64s(a.ends);
    out.I64s(a.strides);
  }
  void operator()(const PadAttrs& a) {
    out.I64s(a.low);
    out.I64s(a.high);
    out.F64(a.value);
  }
  void operator()(const SortAttrs& a) {
    out.I64(a.axis);
    WriteBool(a.descending, out);
  }
  void operator()(const TopKAttrs& a) { out.I64(a.k); }
  void operator()(const CumulativeAttrs& a) {
    out.I64(a.axis);
    WriteBool(a.exclusive, out);
    WriteBool(a.reverse, out);
  }
  void operator()(const FFTAttrs& a) {
    out.I64s(a.axes);
    WriteBool(a.inverse, out);
  }
  void operator()(const GatherNDAttrs& a) { out.I64(a.batch_dims); }
  void operator()(const ScatterAttrs& a) {
    out.U64(static_cast<uint64_t>(a.mode));
    out.I64(a.axis);
  }
  void operator()(const Conv2DAttrs& a) {
    out.I64s(a.strides);
    out.I64s(a.dilations);
    out.I64s(a.pad_low);
    out.I64s(a.pad_high);
    out.I64(a.groups);
  }
  void operator()(const Pool4DAttrs& a) {
    out.I64s(a.window);
    out.I64s(a.strides);
    out.I64s(a.pad_low);
    out.I64s(a.pad_high);
  }
  void operator()(const LapackAttrs& a) {
    for (const auto& flag : kLapackFlags) WriteBool(a.*flag.first, out);
  }
  void operator()(const RngAttrs& a) { out.U64(static_cast<uint64_t>(a.algorithm)); }
  void operator()(const PythonCallbackAttrs& a) {
    out.I64(a.callback_id);
    out.I64(a.token_inputs);
  }
  void operator()(const MetalKernelAttrs& a) {
    out.Bytes(a.source);
    out.Bytes(a.entry);
    WriteInts3(a.grid, out);
    WriteInts3(a.threadgroup, out);
  }
};

StatusOr<bool> ReadBool(ByteReader& in) {
  JMP_ASSIGN_OR_RETURN(uint64_t b, in.U64());
  if (b > 1) return in.Malformed("a flag other than 0 or 1");
  return b == 1;
}
StatusOr<std::array<int64_t, 3>> ReadInts3(ByteReader& in) {
  JMP_ASSIGN_OR_RETURN(std::vector<int64_t> v, in.I64s());
  if (v.size() != 3) return in.Malformed("three sizes expected");
  return std::array<int64_t, 3>{v[0], v[1], v[2]};
}
// An enum's value, checked against its last enumerator.
template <typename E>
StatusOr<E> ReadEnum(ByteReader& in, E last) {
  JMP_ASSIGN_OR_RETURN(uint64_t v, in.U64());
  if (v > static_cast<uint64_t>(last)) return in.Malformed("unknown mode " + std::to_string(v));
  return static_cast<E>(v);
}

// The alternative is the writer's; whether it is the op kind's is VerifyGraph's check.
StatusOr<OpAttrs> ReadAttrs(ByteReader& in) {
  JMP_ASSIGN_OR_RETURN(uint64_t index, in.U64());
  if (index >= std::variant_size_v<OpAttrs>) return in.Malformed("unknown attributes " + std::to_string(index));
  switch (static_cast<AttrsKind>(index)) {
    case AttrsKind::kNoAttrs: return OpAttrs{NoAttrs{}};
    case AttrsKind::kConstantAttrs: {
      JMP_ASSIGN_OR_RETURN(std::string_view data, in.Bytes());
      return OpAttrs{ConstantAttrs{{data.begin(), data.end()}}};
    }
    case AttrsKind::kAxisAttrs: {
      AxisAttrs a;
      JMP_ASSIGN_OR_RETURN(a.axis, in.I64());
      return OpAttrs{std::move(a)};
    }
    case AttrsKind::kAxesAttrs: {
      AxesAttrs a;
      JMP_ASSIGN_OR_RETURN(a.axes, in.I64s());
      return OpAttrs{std::move(a)};
    }
    case AttrsKind::kPermutationAttrs: {
      PermutationAttrs a;
      JMP_ASSIGN_OR_RETURN(a.permutation, in.I64s());
      return OpAttrs{std::move(a)};
    }
    case AttrsKind::kSliceAttrs: {
      SliceAttrs a;
      JMP_ASSIGN_OR_RETURN(a.starts, in.I64s());
      JMP_ASSIGN_OR_RETURN(a.ends, in.I64s());
      JMP_ASSIGN_OR_RETURN(a.strides, in.I64s());
      return OpAttrs{std::move(a)};
    }
    case AttrsKind::kPadAttrs: {
      PadAttrs a;
      JMP_ASSIGN_OR_RETURN(a.low, in.I64s());
      JMP_ASSIGN_OR_RETURN(a.high, in.I64s());
      JMP_ASSIGN_OR_RETURN(a.value, in.F64());
      return OpAttrs{std::move(a)};
    }
    case AttrsKind::kSortAttrs: {
      SortAttrs a;
      JMP_ASSIGN_OR_RETURN(a.axis, in.I64());
      JMP_ASSIGN_OR_RETURN(a.descending, ReadBool(in));
      return OpAttrs{a};
    }
    case AttrsKind::kTopKAttrs: {
      TopKAttrs a;
      JMP_ASSIGN_OR_RETURN(a.k, in.I64());
      return OpAttrs{a};
    }
    case AttrsKind::kCumulativeAttrs: {
      CumulativeAttrs a;
      JMP_ASSIGN_OR_RETURN(a.axis, in.I64());
      JMP_ASSIGN_OR_RETURN(a.exclusive, ReadBool(in));
      JMP_ASSIGN_OR_RETURN(a.reverse, ReadBool(in));
      return OpAttrs{a};
    }
    case AttrsKind::kFFTAttrs: {
      FFTAttrs a;
      JMP_ASSIGN_OR_RETURN(a.axes, in.I64s());
      JMP_ASSIGN_OR_RETURN(a.inverse, ReadBool(in));
      return OpAttrs{std::move(a)};
    }
    case AttrsKind::kGatherNDAttrs: {
      GatherNDAttrs a;
      JMP_ASSIGN_OR_RETURN(a.batch_dims, in.I64());
      return OpAttrs{a};
    }
    case AttrsKind::kScatterAttrs: {
      ScatterAttrs a;
      JMP_ASSIGN_OR_RETURN(a.mode, ReadEnum(in, ScatterMode::kSet));
      JMP_ASSIGN_OR_RETURN(a.axis, in.I64());
      return OpAttrs{a};
    }
    case AttrsKind::kConv2DAttrs: {
      Conv2DAttrs a;
      JMP_ASSIGN_OR_RETURN(a.strides, in.I64s());
      JMP_ASSIGN_OR_RETURN(a.dilations, in.I64s());
      JMP_ASSIGN_OR_RETURN(a.pad_low, in.I64s());
      JMP_ASSIGN_OR_RETURN(a.pad_high, in.I64s());
      JMP_ASSIGN_OR_RETURN(a.groups, in.I64());
      return OpAttrs{std::move(a)};
    }
    case AttrsKind::kPool4DAttrs: {
      Pool4DAttrs a;
      JMP_ASSIGN_OR_RETURN(a.window, in.I64s());
      JMP_ASSIGN_OR_RETURN(a.strides, in.I64s());
      JMP_ASSIGN_OR_RETURN(a.pad_low, in.I64s());
      JMP_ASSIGN_OR_RETURN(a.pad_high, in.I64s());
      return OpAttrs{std::move(a)};
    }
    case AttrsKind::kLapackAttrs: {
      LapackAttrs a;
      for (const auto& flag : kLapackFlags) {
        JMP_ASSIGN_OR_RETURN(a.*flag.first, ReadBool(in));
      }
      return OpAttrs{a};
    }
    case AttrsKind::kRngAttrs: {
      RngAttrs a;
      JMP_ASSIGN_OR_RETURN(a.algorithm, ReadEnum(in, RngAlgorithm::kPhilox));
      return OpAttrs{a};
    }
    case AttrsKind::kPythonCallbackAttrs: {
      PythonCallbackAttrs a;
      JMP_ASSIGN_OR_RETURN(a.callback_id, in.I64());
      JMP_ASSIGN_OR_RETURN(a.token_inputs, in.I64());
      return OpAttrs{a};
    }
    case AttrsKind::kMetalKernelAttrs: {
      MetalKernelAttrs a;
      JMP_ASSIGN_OR_RETURN(std::string_view source, in.Bytes());
      JMP_ASSIGN_OR_RETURN(std::string_view entry, in.Bytes());
      a.source = std::string(source);
      a.entry = std::string(entry);
      JMP_ASSIGN_OR_RETURN(a.grid, ReadInts3(in));
      JMP_ASSIGN_OR_RETURN(a.threadgroup, ReadInts3(in));
      return OpAttrs{std::move(a)};
    }
  }
  return in.Malformed("unknown attributes");
}

void WriteOp(const Op& op, ByteWriter& out) {
  out.U64(static_cast<uint64_t>(op.kind));
  out.Ints(op.inputs);
  out.Ints(op.outputs);
  out.U64(op.attrs.index());
  std::visit(AttrsWriter{out}, op.attrs);
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
  JMP_ASSIGN_OR_RETURN(op.attrs, ReadAttrs(in));
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
