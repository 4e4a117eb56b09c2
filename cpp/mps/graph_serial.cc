#include "mps/graph_serial.h"

#include <array>
#include <iterator>
#include <string>
#include <type_traits>
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
constexpr uint64_t kNumDTypes = std::size(kAllDTypes);

void WriteType(const TensorType& t, ByteWriter& out) {
  out.U64(static_cast<uint64_t>(t.dtype));
  out.I64s(t.shape);
}

// Each alternative's fields in declaration order after the alternative's index: the format, one list
// that writing and reading both walk. `A` is the alternative (const when writing); `f` takes fields.
template <typename A, typename T>
constexpr bool kIs = std::is_same_v<std::remove_const_t<A>, T>;

template <typename A, typename F>
void Fields(A& a, F&& f) {
  if constexpr (kIs<A, NoAttrs>) {
  } else if constexpr (kIs<A, ConstantAttrs>) {
    f(a.data);
  } else if constexpr (kIs<A, AxisAttrs>) {
    f(a.axis);
  } else if constexpr (kIs<A, AxesAttrs>) {
    f(a.axes);
  } else if constexpr (kIs<A, PermutationAttrs>) {
    f(a.permutation);
  } else if constexpr (kIs<A, SliceAttrs>) {
    f(a.starts, a.ends, a.strides);
  } else if constexpr (kIs<A, PadAttrs>) {
    f(a.low, a.high, a.value);
  } else if constexpr (kIs<A, SortAttrs>) {
    f(a.axis, a.descending);
  } else if constexpr (kIs<A, TopKAttrs>) {
    f(a.k);
  } else if constexpr (kIs<A, CumulativeAttrs>) {
    f(a.axis, a.exclusive, a.reverse);
  } else if constexpr (kIs<A, FFTAttrs>) {
    f(a.axes, a.inverse);
  } else if constexpr (kIs<A, GatherNDAttrs>) {
    f(a.batch_dims);
  } else if constexpr (kIs<A, ScatterAttrs>) {
    f(a.mode, a.axis);
  } else if constexpr (kIs<A, Conv2DAttrs>) {
    f(a.strides, a.dilations, a.pad_low, a.pad_high, a.groups);
  } else if constexpr (kIs<A, Pool4DAttrs>) {
    f(a.window, a.strides, a.pad_low, a.pad_high);
  } else if constexpr (kIs<A, LapackAttrs>) {
    for (const auto& flag : kLapackFlags) f(a.*flag.first);
  } else if constexpr (kIs<A, RngAttrs>) {
    f(a.algorithm);
  } else if constexpr (kIs<A, PythonCallbackAttrs>) {
    f(a.callback_id, a.token_inputs);
  } else if constexpr (kIs<A, AllReduceAttrs>) {
    f(a.combine, a.devices, a.processes);
  } else {
    static_assert(kIs<A, MetalKernelAttrs>, "an OpAttrs alternative without its fields here");
    f(a.source, a.entry, a.grid, a.threadgroup);
  }
}

// The enums' last enumerators, which reading checks against.
constexpr ScatterMode Last(ScatterMode) { return ScatterMode::kSet; }
constexpr RngAlgorithm Last(RngAlgorithm) { return RngAlgorithm::kPhilox; }
constexpr OpKind Last(OpKind) { return kAllOpKinds[std::size(kAllOpKinds) - 1]; }

// How each type of field is written: flags and enums as a u64, sizes and strings with their length first.
struct FieldWriter {
  ByteWriter& out;
  template <typename... T>
  void operator()(const T&... fields) {
    (Put(fields), ...);
  }
  void Put(int64_t v) { out.I64(v); }
  void Put(bool b) { out.U64(b ? 1 : 0); }
  void Put(double v) { out.F64(v); }
  void Put(const std::vector<int64_t>& v) { out.I64s(v); }
  void Put(const std::vector<uint8_t>& v) {
    out.Bytes(std::string_view(reinterpret_cast<const char*>(v.data()), v.size()));
  }
  void Put(const std::string& v) { out.Bytes(v); }
  void Put(const std::array<int64_t, 3>& v) { out.I64s({v.begin(), v.end()}); }
  template <typename E, std::enable_if_t<std::is_enum_v<E>, int> = 0>
  void Put(E e) {
    out.U64(static_cast<uint64_t>(e));
  }
};

// The reverse, checking what a file could get wrong; the first error stops the rest.
struct FieldReader {
  ByteReader& in;
  Status status = Status::Ok();
  template <typename... T>
  void operator()(T&... fields) {
    (Next(fields), ...);
  }
  template <typename T>
  void Next(T& field) {
    if (status.ok()) status = Get(field);
  }
  Status Get(int64_t& v) {
    JMP_ASSIGN_OR_RETURN(v, in.I64());
    return Status::Ok();
  }
  Status Get(bool& b) {
    JMP_ASSIGN_OR_RETURN(uint64_t v, in.U64());
    if (v > 1) return in.Malformed("a flag other than 0 or 1");
    b = v == 1;
    return Status::Ok();
  }
  Status Get(double& v) {
    JMP_ASSIGN_OR_RETURN(v, in.F64());
    return Status::Ok();
  }
  Status Get(std::vector<int64_t>& v) {
    JMP_ASSIGN_OR_RETURN(v, in.I64s());
    return Status::Ok();
  }
  Status Get(std::vector<uint8_t>& v) {
    JMP_ASSIGN_OR_RETURN(std::string_view bytes, in.Bytes());
    v.assign(bytes.begin(), bytes.end());
    return Status::Ok();
  }
  Status Get(std::string& v) {
    JMP_ASSIGN_OR_RETURN(std::string_view bytes, in.Bytes());
    v = std::string(bytes);
    return Status::Ok();
  }
  Status Get(std::array<int64_t, 3>& v) {
    JMP_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, in.I64s());
    if (sizes.size() != 3) return in.Malformed("three sizes expected");
    v = {sizes[0], sizes[1], sizes[2]};
    return Status::Ok();
  }
  template <typename E, std::enable_if_t<std::is_enum_v<E>, int> = 0>
  Status Get(E& e) {
    JMP_ASSIGN_OR_RETURN(uint64_t v, in.U64());
    if (v > static_cast<uint64_t>(Last(E{}))) return in.Malformed("unknown mode " + std::to_string(v));
    e = static_cast<E>(v);
    return Status::Ok();
  }
};

template <size_t I>
StatusOr<OpAttrs> ReadAlternative(ByteReader& in) {
  std::variant_alternative_t<I, OpAttrs> a{};
  FieldReader reader{in};
  Fields(a, reader);
  if (!reader.status.ok()) return reader.status;
  return OpAttrs{std::in_place_index<I>, std::move(a)};
}
template <size_t... I>
constexpr std::array<StatusOr<OpAttrs> (*)(ByteReader&), sizeof...(I)> Readers(std::index_sequence<I...>) {
  return {&ReadAlternative<I>...};
}
constexpr auto kReadAlternative = Readers(std::make_index_sequence<std::variant_size_v<OpAttrs>>());

// The alternative is the writer's; whether it is the op kind's is VerifyGraph's check.
StatusOr<OpAttrs> ReadAttrsAt(ByteReader& in) {
  JMP_ASSIGN_OR_RETURN(uint64_t index, in.U64());
  if (index >= kReadAlternative.size()) return in.Malformed("unknown attributes " + std::to_string(index));
  return kReadAlternative[index](in);
}

void WriteOp(const Op& op, ByteWriter& out) {
  out.U64(static_cast<uint64_t>(op.kind));
  out.Ints(op.inputs);
  out.Ints(op.outputs);
  WriteAttrs(op.attrs, out);
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
  JMP_ASSIGN_OR_RETURN(op.attrs, ReadAttrsAt(in));
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

void WriteAttrs(const OpAttrs& attrs, ByteWriter& out) {
  out.U64(attrs.index());
  std::visit([&](const auto& a) { Fields(a, FieldWriter{out}); }, attrs);
}

StatusOr<OpAttrs> ReadAttrs(ByteReader& in) { return ReadAttrsAt(in); }

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
