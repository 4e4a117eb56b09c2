// Building the self-check's one-op programs (check_sweep.cc, check_probes.cc).
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "check/check.h"
#include "mps/op_attrs.h"

namespace jmp::check {

class ProgramBuilder {
 public:
  explicit ProgramBuilder(std::string what) { p_.what = std::move(what); }
  int In(DType dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
    int v = p_.graph.AddValue(dtype, std::move(shape));
    p_.graph.inputs.push_back(v);
    p_.inputs.push_back(std::move(bytes));
    return v;
  }
  // One op; returns its results' value ids.
  std::vector<int> Op(mps::OpKind kind, std::vector<int> inputs, std::vector<mps::TensorType> outputs,
                      const std::function<void(mps::Op&)>& attrs = nullptr) {
    mps::Op op;
    op.kind = kind;
    op.inputs = std::move(inputs);
    for (auto& t : outputs) op.outputs.push_back(p_.graph.AddValue(t.dtype, t.shape));
    if (attrs) attrs(op);
    p_.graph.ops.push_back(std::move(op));
    return p_.graph.ops.back().outputs;
  }
  // One op with one result, which the program returns.
  void Returning(mps::OpKind kind, std::vector<int> inputs, mps::TensorType out,
                 const std::function<void(mps::Op&)>& attrs = nullptr) {
    for (int v : Op(kind, std::move(inputs), {std::move(out)}, attrs)) p_.graph.outputs.push_back(v);
  }
  void Out(int v) { p_.graph.outputs.push_back(v); }
  mps::Graph& graph() { return p_.graph; }
  Program Done(std::vector<Tolerance> tolerance) {
    p_.tolerance = std::move(tolerance);
    return std::move(p_);
  }

 private:
  Program p_;
};

inline Tolerance Exact(bool nan_any = true) {
  Tolerance t;
  t.nan_any = nan_any;
  return t;
}
inline Tolerance Ulps(double bound, double floor = 0) {
  Tolerance t;
  t.kind = Tolerance::kUlp;
  t.bound = bound;
  t.floor = floor;
  return t;
}
inline Tolerance Scaled(double bound, double scale) {
  Tolerance t;
  t.kind = Tolerance::kScaled;
  t.bound = bound;
  t.scale = scale;
  return t;
}

// The elements of `bytes` as doubles (integers exactly up to 2^53) and back.
std::vector<double> Decode(DType dtype, const std::vector<uint8_t>& bytes);

}  // namespace jmp::check
