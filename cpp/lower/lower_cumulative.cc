// reduce_window as a prefix scan (JAX's cumsum/cumprod/cummax/cummin/cumlogsumexp, forward and
// reverse): a window spanning the whole axis, padded by n-1 on one side, stride 1. O(n) always:
//   add/multiply/max/min on numbers  MPSGraph's cumulative ops (bools as 0/1 integers, complex sums
//                                    part by part);
//   any other body (logaddexp, complex products)  a log-step scan of the body applied to tensors.
// An init value other than the body's identity is combined in once at the end (see WithInit).
#include <cmath>

#include "lower/lower_elementwise.h"
#include "lower/lower_families.h"
#include "lower/lower_window_common.h"

namespace jmp::mps {

namespace {

// A binary body of plain scalar code (no nested regions), which LowerBlockInline applies to tensors.
bool ElementwiseSafe(const shlo::Block& body) {
  if (body.args.size() != 2) return false;
  for (const shlo::Op& b : body.ops)
    if (!b.regions.empty()) return false;
  return true;
}

// Hillis-Steele inclusive scan of `body` (log2(n) steps of the body applied to whole tensors);
// positions with nothing to combine at a step keep their value. No init value is involved.
StatusOr<int> ScanSteps(LowerContext& cx, const shlo::Block& body, int x, int64_t axis, bool reverse) {
  const Shape shape = cx.ShapeOf(x);
  size_t a = static_cast<size_t>(axis);
  int64_t n = shape[a];
  int position = -1;
  int acc = x;
  for (int64_t step = 1; step < n; step *= 2) {
    if (position < 0) position = cx.Iota(shape, axis);
    // shifted[i] = acc[i - step] (acc[i + step] in reverse), padded where there is none.
    Shape starts(shape.size(), 0), ends = shape;
    Shape lo(shape.size(), 0), hi(shape.size(), 0);
    if (reverse) {
      starts[a] = step;
      hi[a] = step;
    } else {
      ends[a] = n - step;
      lo[a] = step;
    }
    int piece = cx.Slice(acc, starts, ends);
    int shifted = cx.Emit(OpKind::kPad, {piece}, cx.DTypeOf(acc), shape, PadAttrs{lo, hi, 0});
    // The earlier element on the left, as a sequential reduction would combine them.
    std::vector<int> args = reverse ? std::vector<int>{acc, shifted} : std::vector<int>{shifted, acc};
    JMP_ASSIGN_OR_RETURN(std::vector<int> combined, cx.LowerBlockInline(body, args));
    if (combined.size() != 1 || cx.DTypeOf(combined[0]) != cx.DTypeOf(acc) || cx.ShapeOf(combined[0]) != shape)
      return cx.Unsupported("reduce_window body of an unexpected type");
    int has = reverse
                  ? cx.Compare(OpKind::kLessThan, position, cx.Splat(DType::kI32, shape, static_cast<double>(n - step)))
                  : cx.Compare(OpKind::kGreaterThanOrEqualTo, position,
                               cx.Splat(DType::kI32, shape, static_cast<double>(step)));
    acc = cx.Select(has, combined[0], acc);
  }
  return acc;
}

// body(init, scan) unless the init is known to be the identity. The init enters each window once:
// XLA skips the padding elements of a window rather than combining init values for them (StableHLO's
// spec pads with the init; the two agree whenever the init is the identity, as it is in everything
// JAX emits for its cumulative ops), and the CPU backend is what results must equal.
StatusOr<int> WithInit(LowerContext& cx, const shlo::Block& body, int scan, int init, bool init_is_identity) {
  if (init_is_identity) return scan;
  Shape shape = cx.ShapeOf(scan);
  JMP_ASSIGN_OR_RETURN(std::vector<int> out, cx.LowerBlockInline(body, {cx.BroadcastTo(init, shape), scan}));
  return out.at(0);
}

// A constant whose bytes are all zero (+0 in every part): complex constants carry no recorded splat.
bool IsZeroConstant(LowerContext& cx, int v) {
  const Graph& g = cx.graph();
  for (auto it = g.ops.rbegin(); it != g.ops.rend(); ++it) {
    if (it->outputs.size() != 1 || it->outputs[0] != v) continue;
    if (it->kind == OpKind::kReshape || it->kind == OpKind::kBroadcast) {
      v = it->inputs.at(0);
      continue;
    }
    if (it->kind != OpKind::kConstant || it->Attrs<ConstantAttrs>().data.empty()) return false;
    for (uint8_t b : it->Attrs<ConstantAttrs>().data)
      if (b != 0) return false;
    return true;
  }
  return false;
}

int Cumulative(LowerContext& cx, OpKind kind, int x, int64_t axis, bool reverse) {
  return cx.Emit(kind, {x}, cx.DTypeOf(x), cx.ShapeOf(x), CumulativeAttrs{axis, /*exclusive=*/false, reverse});
}

// cummax/cummin of floats: NaN from the first NaN on, as StableHLO's max/min propagate it. MPSGraph
// documents no NaN rule for its cumulative max/min, so the lowering does not rely on one.
int PropagateNaN(LowerContext& cx, int x, int scan, int64_t axis, bool reverse) {
  const Shape shape = cx.ShapeOf(x);
  int nans =
      Cumulative(cx, OpKind::kCumulativeSum, cx.Cast(Predicate(cx, OpKind::kIsNaN, x), DType::kI32), axis, reverse);
  int seen = cx.Compare(OpKind::kGreaterThan, nans, cx.Splat(DType::kI32, shape, 0));
  return cx.Select(seen, cx.Splat(cx.DTypeOf(x), shape, NAN), scan);
}

}  // namespace

StatusOr<bool> TryLowerCumulative(LowerContext& cx) {
  const shlo::Op& op = cx.op();
  if (op.operands.size() != 2 || op.results.size() != 1 || op.regions.size() != 1 || op.regions[0].blocks.size() != 1)
    return false;
  const shlo::Block& body = op.regions[0].blocks[0];
  JMP_ASSIGN_OR_RETURN(int x, cx.In(0));
  JMP_ASSIGN_OR_RETURN(int init, cx.In(1));
  const Shape shape = cx.ShapeOf(x);
  if (cx.OutType(0).shape != shape || !cx.ShapeOf(init).empty()) return false;
  JMP_ASSIGN_OR_RETURN(WindowAttrs w, ReadWindowAttrs(cx, shape.size()));
  int64_t axis = -1;
  bool reverse = false;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (w.strides[d] != 1 || w.base_dilations[d] != 1 || w.window_dilations[d] != 1) return false;
    if (w.dims[d] == 1 && w.pad_low[d] == 0 && w.pad_high[d] == 0) continue;
    if (axis >= 0 || shape[d] < 2 || w.dims[d] != shape[d]) return false;
    if (w.pad_low[d] == shape[d] - 1 && w.pad_high[d] == 0)
      reverse = false;
    else if (w.pad_low[d] == 0 && w.pad_high[d] == shape[d] - 1)
      reverse = true;
    else
      return false;
    axis = static_cast<int64_t>(d);
  }
  if (!ElementwiseSafe(body)) return false;
  if (axis < 0) {
    // Every window is one element (a length-1 axis): body(init, x) elementwise.
    for (size_t d = 0; d < shape.size(); ++d)
      if (w.dims[d] != 1 || w.pad_low[d] != 0 || w.pad_high[d] != 0) return false;
    JMP_ASSIGN_OR_RETURN(std::vector<int> out, cx.LowerBlockInline(body, {cx.BroadcastTo(init, shape), x}));
    cx.Bind(0, out.at(0));
    return true;
  }
  std::string monoid = WindowMonoid(op);
  DType t = cx.DTypeOf(x);
  double init_value;
  bool known_init = cx.KnownSplat(init, &init_value);
  auto bind = [&](StatusOr<int> v) -> StatusOr<bool> {
    if (!v.ok()) return v.status();
    cx.Bind(0, *v);
    return true;
  };

  OpKind kind;
  double identity;
  if (monoid == "stablehlo.add")
    kind = OpKind::kCumulativeSum, identity = 0;
  else if (monoid == "stablehlo.multiply")
    kind = OpKind::kCumulativeProduct, identity = 1;
  else if (monoid == "stablehlo.maximum")
    kind = OpKind::kCumulativeMaximum, identity = LowestValue(t);
  else if (monoid == "stablehlo.minimum")
    kind = OpKind::kCumulativeMinimum, identity = HighestValue(t);
  else
    return bind([&]() -> StatusOr<int> {
      // Any other (associative) body, e.g. cumlogsumexp's logaddexp.
      JMP_ASSIGN_OR_RETURN(int scan, ScanSteps(cx, body, x, axis, reverse));
      return WithInit(cx, body, scan, init, false);
    }());
  bool is_identity = known_init && init_value == identity;

  if (t == DType::kBool) {
    // StableHLO on i1: add and max are or, multiply and min are and: cumulative max/min of 0/1.
    bool any = kind == OpKind::kCumulativeSum || kind == OpKind::kCumulativeMaximum;
    int scan = Cumulative(cx, any ? OpKind::kCumulativeMaximum : OpKind::kCumulativeMinimum, cx.Cast(x, DType::kI32),
                          axis, reverse);
    scan = cx.Cast(scan, DType::kBool);
    return bind(WithInit(cx, body, scan, init, known_init && init_value == (any ? 0 : 1)));
  }
  if (IsComplex(t)) {
    if (kind == OpKind::kCumulativeSum) {
      // Sums part by part (the cumulative ops are not listed for complex types); the init is added once
      // per window element it stands for.
      int re = Cumulative(cx, kind, cx.Emit(OpKind::kRealPart, {x}, RealOf(t), shape), axis, reverse);
      int im = Cumulative(cx, kind, cx.Emit(OpKind::kImaginaryPart, {x}, RealOf(t), shape), axis, reverse);
      int scan = cx.Emit(OpKind::kComplexFromParts, {re, im}, t, shape);
      return bind(WithInit(cx, body, scan, init, IsZeroConstant(cx, init)));
    }
    if (kind != OpKind::kCumulativeProduct) return false;  // max/min of complex values are not defined
    return bind([&]() -> StatusOr<int> {
      JMP_ASSIGN_OR_RETURN(int scan, ScanSteps(cx, body, x, axis, reverse));
      return WithInit(cx, body, scan, init, false);
    }());
  }
  if (!IsFloat(t) && !IsInteger(t)) return false;
  int scan = Cumulative(cx, kind, x, axis, reverse);
  if (IsFloat(t) && (kind == OpKind::kCumulativeMaximum || kind == OpKind::kCumulativeMinimum))
    scan = PropagateNaN(cx, x, scan, axis, reverse);
  return bind(WithInit(cx, body, scan, init, is_identity));
}

}  // namespace jmp::mps
