// The self-check's data-movement cases: constants, iotas, casts, shape ops, gathers and scatters,
// sorting and If. Every one is exact (bit for bit; sorting treats -0 and +0 as the equal keys they are).
#include <algorithm>
#include <numeric>

#include "check/check_builder.h"
#include "check/check_cases.h"

namespace jmp::check {

namespace {

using K = mps::OpKind;

std::vector<int64_t> Permuted(const std::vector<int64_t>& shape, const std::vector<int64_t>& perm) {
  std::vector<int64_t> out;
  for (int64_t p : perm) out.push_back(shape[static_cast<size_t>(p)]);
  return out;
}

std::vector<uint8_t> Indices(const std::vector<int32_t>& values) {
  std::vector<double> d(values.begin(), values.end());
  return Encode(DType::kI32, d);
}

// Int32 indices into a dimension of `size`, `n` of them, covering both ends.
std::vector<int32_t> IndexRun(int64_t n, int64_t size, int32_t salt) {
  std::vector<int32_t> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    out[static_cast<size_t>(i)] = static_cast<int32_t>(i == 0 ? size - 1 : (i * 7 + salt) % size);
  return out;
}

}  // namespace

bool BuildDataMovement(K k, DType d, bool quick, Case& c) {
  const uint32_t seed = static_cast<uint32_t>(k) * 977 + static_cast<uint32_t>(d);
  auto data = [&](const std::vector<int64_t>& shape, uint32_t salt = 0) {
    return Fill(d, CountOf(shape), Range::kEdge, seed + salt);
  };
  const Tolerance bits = Exact(false);  // data movement keeps NaN payloads too
  auto add = [&](ProgramBuilder& b, std::vector<Tolerance> t) { c.programs.push_back(b.Done(std::move(t))); };
  auto unary = [&](const std::string& what, std::vector<int64_t> in, std::vector<int64_t> out,
                   const std::function<void(mps::Op&)>& attrs, DType out_type) {
    ProgramBuilder b(what);
    b.Returning(k, {b.In(d, in, data(in))}, {out_type, std::move(out)}, attrs);
    add(b, {bits});
  };
  if (k == K::kConstant) {
    for (std::vector<int64_t> shape : {std::vector<int64_t>{4, 6}, {}, {0, 3}}) {
      ProgramBuilder b("constant of " + std::to_string(CountOf(shape)) + " edge values");
      b.Returning(K::kConstant, {}, {d, shape}, [&](mps::Op& op) { op.attrs = mps::ConstantAttrs{data(shape)}; });
      add(b, {bits});
    }
    return true;
  }
  if (k == K::kCoordinateAlongAxis) {
    for (int64_t axis = 0; axis < 3; ++axis) {
      ProgramBuilder b("axis " + std::to_string(axis) + " of [3,4,5]");
      b.Returning(K::kCoordinateAlongAxis, {}, {d, {3, 4, 5}}, [&](mps::Op& op) { op.attrs = mps::AxisAttrs{axis}; });
      add(b, {bits});
    }
    return true;
  }
  if (k == K::kCast) {
    for (DType to : MetalDTypes(K::kCast)) {
      ProgramBuilder b(std::string("to ") + std::string(DTypeName(to)) + ", edge values");
      const int64_t n = 24 + 40;
      b.Returning(K::kCast, {b.In(d, {n}, data({n}))}, {to, {n}});
      add(b, {Exact()});
    }
    unary("rank 0 to float32", {}, {}, nullptr, DType::kF32);
    if (!quick) unary("[70000] to int32", {70000}, {70000}, nullptr, DType::kI32);
    return true;
  }
  if (k == K::kReinterpretCast) {
    for (DType to : MetalDTypes(K::kReinterpretCast)) {
      if (to == d || (ByteSize(to) != ByteSize(d) && to != DType::kU8)) continue;  // same width, or bytes
      const int64_t last = 6 * static_cast<int64_t>(ByteSize(d)) / static_cast<int64_t>(ByteSize(to));
      ProgramBuilder b(std::string("to ") + std::string(DTypeName(to)));
      b.Returning(k, {b.In(d, {4, 6}, data({4, 6}))}, {to, {4, last}});
      add(b, {bits});
    }
    return true;
  }
  if (k == K::kReshape) {
    unary("[4,6] to [2,3,4]", {4, 6}, {2, 3, 4}, nullptr, d);
    unary("rank 0 to [1,1]", {}, {1, 1}, nullptr, d);
    unary("[0,3] to [3,0]", {0, 3}, {3, 0}, nullptr, d);
    return true;
  }
  if (k == K::kTranspose) {
    std::vector<int64_t> perm = {0, 1, 2};
    do {
      unary(
          "[2,3,4] permuted", {2, 3, 4}, Permuted({2, 3, 4}, perm),
          [&](mps::Op& op) { op.attrs = mps::PermutationAttrs{perm}; }, d);
    } while (std::next_permutation(perm.begin(), perm.end()));
    unary("[0,3] transposed", {0, 3}, {3, 0}, [](mps::Op& op) { op.attrs = mps::PermutationAttrs{{1, 0}}; }, d);
    return true;
  }
  if (k == K::kBroadcast) {
    unary("[1,3,1] to [2,3,4]", {1, 3, 1}, {2, 3, 4}, nullptr, d);
    unary("[1] to [5]", {1}, {5}, nullptr, d);
    unary("[1,1] to [0,2]", {1, 1}, {0, 2}, nullptr, d);
    return true;
  }
  if (k == K::kSlice) {
    unary("[5,6] strided", {5, 6}, {2, 2}, [](mps::Op& op) { op.attrs = mps::SliceAttrs{{1, 0}, {5, 6}, {2, 3}}; }, d);
    unary("[5,6] empty", {5, 6}, {0, 6}, [](mps::Op& op) { op.attrs = mps::SliceAttrs{{2, 0}, {2, 6}, {1, 1}}; }, d);
    if (!quick)
      unary(
          "[70000] from 65530", {70000}, {4470}, [](mps::Op& op) { op.attrs = mps::SliceAttrs{{65530}, {70000}, {1}}; },
          d);
    return true;
  }
  if (k == K::kConcat) {
    for (int64_t axis = 0; axis < 3; ++axis) {
      ProgramBuilder b("axis " + std::to_string(axis) + " of [2,3,4] and an empty one");
      std::vector<int64_t> empty = {2, 3, 4}, out = {2, 3, 4};
      empty[static_cast<size_t>(axis)] = 0;
      out[static_cast<size_t>(axis)] *= 2;
      int x = b.In(d, {2, 3, 4}, data({2, 3, 4})), y = b.In(d, {2, 3, 4}, data({2, 3, 4}, 1));
      int e = b.In(d, empty, {});
      b.Returning(k, {x, e, y}, {d, out}, [&](mps::Op& op) { op.attrs = mps::AxisAttrs{axis}; });
      add(b, {bits});
    }
    return true;
  }
  if (k == K::kPad) {
    unary(
        "[3,4] padded", {3, 4}, {6, 7},
        [&](mps::Op& op) {
          op.attrs = mps::PadAttrs{{1, 0}, {2, 3}, d == DType::kBool ? 1 : IsFloat(d) || IsComplex(d) ? 1.5 : 7};
        },
        d);
    unary("[0,2] padded", {0, 2}, {1, 2}, [](mps::Op& op) { op.attrs = mps::PadAttrs{{1, 0}, {0, 0}, 0}; }, d);
    return true;
  }
  if (k == K::kReverse) {
    for (std::vector<int64_t> axes : {std::vector<int64_t>{0}, {1}, {2}, {0, 2}})
      unary("[3,4,5] reversed", {3, 4, 5}, {3, 4, 5}, [&](mps::Op& op) { op.attrs = mps::AxesAttrs{axes}; }, d);
    return true;
  }
  if (k == K::kGatherAlongAxis) {
    for (int64_t axis = 0; axis < 2; ++axis) {
      ProgramBuilder b("axis " + std::to_string(axis) + " of [3,4]");
      int x = b.In(d, {3, 4}, data({3, 4}));
      int i = b.In(DType::kI32, {3, 4}, Indices(IndexRun(12, axis == 0 ? 3 : 4, 1)));
      b.Returning(k, {x, i}, {d, {3, 4}}, [&](mps::Op& op) { op.attrs = mps::AxisAttrs{axis}; });
      add(b, {bits});
    }
    return true;
  }
  if (k == K::kGatherND) {
    auto gather_rows = [](mps::Op& op) { op.attrs = mps::GatherNDAttrs{/*batch_dims=*/0}; };
    ProgramBuilder b("rows of [4,5]");
    int x = b.In(d, {4, 5}, data({4, 5}));
    b.Returning(k, {x, b.In(DType::kI32, {3, 1}, Indices({3, 0, 2}))}, {d, {3, 5}}, gather_rows);
    add(b, {bits});
    ProgramBuilder e("elements of [4,5]");
    int y = e.In(d, {4, 5}, data({4, 5}));
    e.Returning(k, {y, e.In(DType::kI32, {3, 2}, Indices({3, 4, 0, 0, 1, 2}))}, {d, {3}}, gather_rows);
    add(e, {bits});
    return true;
  }
  if (k == K::kScatterND || k == K::kScatterAlongAxis) {
    std::vector<mps::ScatterMode> modes = {mps::ScatterMode::kSet};
    if (d != DType::kBool) modes.push_back(mps::ScatterMode::kAdd);
    if (d != DType::kBool && !IsComplex(d)) modes.push_back(mps::ScatterMode::kMax);
    for (mps::ScatterMode mode : modes) {
      ProgramBuilder b("mode " + std::to_string(static_cast<int>(mode)));
      const bool nd = k == K::kScatterND;
      int x = b.In(d, {4, 5}, data({4, 5}));
      const std::vector<int64_t> updates = nd ? std::vector<int64_t>{2, 5} : std::vector<int64_t>{4, 2};
      int u = b.In(d, updates, data(updates, 3));
      int i = nd ? b.In(DType::kI32, {2, 1}, Indices({3, 1}))
                 : b.In(DType::kI32, {4, 2}, Indices({4, 0, 1, 2, 3, 4, 0, 2}));
      b.Returning(k, {x, u, i}, {d, {4, 5}}, [&](mps::Op& op) { op.attrs = mps::ScatterAttrs{mode, 1}; });
      add(b, {IsFloat(d) || IsComplex(d) ? ElementwiseTolerance(K::kAdd, d) : bits});
    }
    return true;
  }
  if (k == K::kSort || k == K::kArgSort) {
    // NaN-free floats (the row's assumption: the lowering sorts floats with NaN otherwise).
    const Range keys = IsFloat(d) ? Range::kFinite : Range::kEdge;
    const DType out = k == K::kSort ? d : DType::kI32;
    for (int64_t axis = 0; axis < 2; ++axis)
      for (bool descending : {false, true}) {
        ProgramBuilder b(std::string(descending ? "descending" : "ascending") + ", axis " + std::to_string(axis) +
                         " of [6,20]");
        b.Returning(k, {b.In(d, {6, 20}, Fill(d, 120, keys, seed))}, {out, {6, 20}},
                    [&](mps::Op& op) { op.attrs = mps::SortAttrs{axis, descending}; });
        add(b, {Ulps(0)});
      }
    if (!quick) {
      ProgramBuilder b("[70000]");
      b.Returning(k, {b.In(d, {70000}, Fill(d, 70000, keys, seed))}, {out, {70000}},
                  [&](mps::Op& op) { op.attrs = mps::SortAttrs{0, false}; });
      add(b, {Ulps(0)});
    }
    return true;
  }
  if (k == K::kTopK) {
    const Range keys = IsFloat(d) ? Range::kFinite : Range::kEdge;
    ProgramBuilder b("k=4 of [3,10]");
    auto outs = b.Op(k, {b.In(d, {3, 10}, Fill(d, 30, keys, seed))}, {{d, {3, 4}}, {DType::kI32, {3, 4}}},
                     [](mps::Op& op) { op.attrs = mps::TopKAttrs{4}; });
    b.Out(outs[0]);
    b.Out(outs[1]);
    add(b, {Ulps(0), Exact()});
    return true;
  }
  if (k == K::kIf) {
    for (bool taken : {true, false}) {
      ProgramBuilder b(taken ? "then" : "else");
      int p = b.In(DType::kBool, {}, {static_cast<uint8_t>(taken)});
      int x = b.In(d, {6}, data({6}));
      mps::Graph then_g, else_g;
      for (mps::Graph* g : {&then_g, &else_g}) {
        int in = g->AddValue(d, {6});
        g->inputs = {in};
        mps::Op op;
        op.kind = g == &then_g ? K::kIdentity : K::kReverse;
        op.inputs = {in};
        op.outputs = {g->AddValue(d, {6})};
        if (g == &else_g) op.attrs = mps::AxesAttrs{{0}};
        g->ops.push_back(op);
        g->outputs = op.outputs;
      }
      b.Returning(k, {p, x}, {d, {6}}, [&](mps::Op& op) { op.subgraphs = {then_g, else_g}; });
      add(b, {bits});
    }
    return true;
  }
  return false;  // the other families' kinds
}

}  // namespace jmp::check
