// Hand-built MPS op graphs run on the host executor, for unit tests of the host kernels' semantics
// (the op table's ASSUMPTION rows) and of the executor's plan, without a JAX program in between.
#pragma once

#include <cstring>
#include <functional>
#include <vector>

#include "exec/executor.h"
#include "mps/graph.h"

namespace jmp::unit {

template <typename T>
std::vector<uint8_t> Bytes(const std::vector<T>& values) {
  std::vector<uint8_t> out(values.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

template <typename T>
std::vector<T> Values(const std::vector<uint8_t>& bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

class GraphBuilder {
 public:
  int Input(DType dtype, std::vector<int64_t> shape) {
    int v = graph_.AddValue(dtype, std::move(shape));
    graph_.inputs.push_back(v);
    return v;
  }
  // One op with one result; `attrs` sets the op's attributes before it joins the graph.
  int Apply(mps::OpKind kind, std::vector<int> inputs, DType dtype, std::vector<int64_t> shape,
            const std::function<void(mps::Op&)>& attrs = nullptr) {
    mps::Op op;
    op.kind = kind;
    op.inputs = std::move(inputs);
    op.outputs = {graph_.AddValue(dtype, std::move(shape))};
    if (attrs) attrs(op);
    graph_.ops.push_back(std::move(op));
    return graph_.ops.back().outputs[0];
  }
  void Output(int value) { graph_.outputs.push_back(value); }
  const mps::Graph& graph() const { return graph_; }
  mps::Graph& mutable_graph() { return graph_; }

 private:
  mps::Graph graph_;
};

// Runs a compiled executable once on these input bytes, in memory from `executor`.
StatusOr<std::vector<std::vector<uint8_t>>> RunExecutable(exec::Executor& executor, exec::Executable& executable,
                                                          const mps::Graph& graph,
                                                          const std::vector<std::vector<uint8_t>>& inputs);
// How many of the graph's own ops (not its subgraphs') are of this kind.
inline int CountOps(const mps::Graph& g, mps::OpKind kind) {
  int n = 0;
  for (const mps::Op& op : g.ops) n += op.kind == kind;
  return n;
}

// Compiles the graph on a fresh host executor and runs it once on these input bytes.
StatusOr<std::vector<std::vector<uint8_t>>> RunOnHost(const mps::Graph& graph,
                                                      const std::vector<std::vector<uint8_t>>& inputs);

// out = kind(x) elementwise, on the host.
template <typename Out, typename In>
StatusOr<std::vector<Out>> Unary(mps::OpKind kind, DType in, DType out, const std::vector<In>& x) {
  GraphBuilder b;
  int64_t n = static_cast<int64_t>(x.size());
  b.Output(b.Apply(kind, {b.Input(in, {n})}, out, {n}));
  auto r = RunOnHost(b.graph(), {Bytes(x)});
  if (!r.ok()) return r.status();
  return Values<Out>(r.value()[0]);
}

// out = kind(x, y) elementwise, on the host.
template <typename Out, typename In>
StatusOr<std::vector<Out>> Binary(mps::OpKind kind, DType in, DType out, const std::vector<In>& x,
                                  const std::vector<In>& y) {
  GraphBuilder b;
  int64_t n = static_cast<int64_t>(x.size());
  b.Output(b.Apply(kind, {b.Input(in, {n}), b.Input(in, {n})}, out, {n}));
  auto r = RunOnHost(b.graph(), {Bytes(x), Bytes(y)});
  if (!r.ok()) return r.status();
  return Values<Out>(r.value()[0]);
}

}  // namespace jmp::unit
