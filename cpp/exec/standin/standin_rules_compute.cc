// The stand-in's type rules for elementwise ops, matrix products, reductions, FFTs, sorts and
// cumulative scans.
#include <cstdint>
#include <string>
#include <utility>

#include "exec/standin/standin_graph.h"
#include "support/dtype.h"

namespace jmp::exec::standin {

namespace {

bool IsComplexType(DataType t) { return t == DataType::kComplexFloat32 || t == DataType::kComplexFloat16; }

bool ReturnsBool(OpKind k) {
  return k == OpKind::kEqual || k == OpKind::kNotEqual || k == OpKind::kLessThan || k == OpKind::kLessThanOrEqualTo ||
         k == OpKind::kGreaterThan || k == OpKind::kGreaterThanOrEqualTo || k == OpKind::kIsFinite ||
         k == OpKind::kIsNaN || k == OpKind::kIsInfinite;
}

DataType RealPartType(DataType t) { return t == DataType::kComplexFloat16 ? DataType::kFloat16 : DataType::kFloat32; }
DataType ComplexType(DataType t) {
  return t == DataType::kFloat16 ? DataType::kComplexFloat16 : DataType::kComplexFloat32;
}

}  // namespace

#define JMP_MPS_UNARY(Name, macos, selector, domain) \
  Tensor* StandinGraph::selector(Tensor* t) { return Unary(#selector, OpKind::k##Name, t); }
#define JMP_MPS_BINARY(Name, macos, primary, secondary, domain) \
  Tensor* StandinGraph::primary(Tensor* a, Tensor* b) { return Binary(#primary, OpKind::k##Name, a, b); }
#include "mps/op_kinds.def"

Tensor* StandinGraph::selectWithPredicateTensor(Tensor* p, Tensor* a, Tensor* b) {
  const std::string call = "selectWithPredicateTensor:truePredicateTensor:falsePredicateTensor:";
  if (!Usable(call, {p, a, b})) return Poison({ShapeOf(a), TypeOf(a)});
  if (a->type.dataType != b->type.dataType)
    return Reject(call, {p, a, b}, "the true and false tensors differ in data type", a->type);
  Shape out;
  if (!BroadcastShapes(p->type.shape, a->type.shape, &out) || !BroadcastShapes(out, b->type.shape, &out))
    return Reject(call, {p, a, b}, "the shapes do not broadcast", a->type);
  auto in = Locals(call, {p, a, b});
  if (!in) return Poison(a->type);
  int pred = BroadcastLocal((*in)[0], p->type, out);
  // A numeric predicate selects where it is nonzero.
  if (p->type.dataType != DataType::kBool) pred = EmitLocal(OpKind::kCast, {pred}, mps::NoAttrs{}, {DType::kBool, out});
  const ShapedType type{out, a->type.dataType};
  const int v =
      EmitLocal(OpKind::kSelect, {pred, BroadcastLocal((*in)[1], a->type, out), BroadcastLocal((*in)[2], b->type, out)},
                mps::NoAttrs{}, MpsType(type));
  return NewTensor(stack_.back(), v, type);
}

Tensor* StandinGraph::clampWithTensor(Tensor* x, Tensor* lo, Tensor* hi) {
  const std::string call = "clampWithTensor:minValueTensor:maxValueTensor:";
  if (!Usable(call, {x, lo, hi})) return Poison({ShapeOf(x), TypeOf(x)});
  if (x->type.dataType != lo->type.dataType || x->type.dataType != hi->type.dataType)
    return Reject(call, {x, lo, hi}, "operands differ in data type", x->type);
  Shape out;
  if (!BroadcastShapes(x->type.shape, lo->type.shape, &out) || !BroadcastShapes(out, hi->type.shape, &out))
    return Reject(call, {x, lo, hi}, "the shapes do not broadcast", x->type);
  return EmitBroadcast(call, OpKind::kClamp, {x, lo, hi}, {out, x->type.dataType});
}

Tensor* StandinGraph::matrixMultiplicationWithPrimaryTensor(Tensor* a, Tensor* b) {
  const std::string call = "matrixMultiplicationWithPrimaryTensor:secondaryTensor:";
  if (!Usable(call, {a, b})) return Poison({ShapeOf(a), TypeOf(a)});
  const Shape &sa = a->type.shape, &sb = b->type.shape;
  if (a->type.dataType != b->type.dataType) return Reject(call, {a, b}, "operands differ in data type", a->type);
  if (sa.size() < 2 || sb.size() < 2) return Unsupport(call, {a, b}, "an operand of rank below 2", a->type);
  const int64_t m = sa[sa.size() - 2], k = sa.back(), k2 = sb[sb.size() - 2], n = sb.back();
  if (k != k2) return Reject(call, {a, b}, "the primary's columns differ from the secondary's rows", a->type);
  Shape batch;
  if (!BroadcastShapes(Shape(sa.begin(), sa.end() - 2), Shape(sb.begin(), sb.end() - 2), &batch))
    return Reject(call, {a, b}, "the batch dimensions do not broadcast", a->type);
  Shape shape_a = batch, shape_b = batch, out = batch;
  shape_a.insert(shape_a.end(), {m, k});
  shape_b.insert(shape_b.end(), {k, n});
  out.insert(out.end(), {m, n});
  const ShapedType type{out, a->type.dataType};
  if (!CheckAccepted("matrixMultiplicationWithPrimaryTensor", call, {a, b})) return Poison(type);
  // macOS 14.0 computes these wrongly (PyTorch's MPS backend avoids them before macOS 14.4).
  constexpr int64_t kMaxDim = 32768, kMaxComplexK = 2048;
  if (m > kMaxDim || n > kMaxDim || k > kMaxDim)
    return Reject(call, {a, b}, "M, N or K above 32768 (wrong results before macOS 14.4)", type);
  if (IsComplexType(a->type.dataType) && k > kMaxComplexK)
    return Reject(call, {a, b}, "complex K above 2048 (wrong results before macOS 14.4)", type);
  auto in = Locals(call, {a, b});
  if (!in) return Poison(type);
  if (!CheckNewType(call, {a, b}, type)) return Poison(type);
  const int v = EmitLocal(OpKind::kMatMul,
                          {BroadcastLocal((*in)[0], a->type, shape_a), BroadcastLocal((*in)[1], b->type, shape_b)},
                          mps::NoAttrs{}, MpsType(type));
  return NewTensor(stack_.back(), v, type);
}

Tensor* StandinGraph::reductionSumWithTensor(Tensor* t, const Shape& axes) {
  return Reduction("reductionSumWithTensor", OpKind::kReductionSum, t, axes);
}

Tensor* StandinGraph::reductionProductWithTensor(Tensor* t, const Shape& axes) {
  return Reduction("reductionProductWithTensor", OpKind::kReductionProduct, t, axes);
}

Tensor* StandinGraph::reductionMaximumPropagateNaNWithTensor(Tensor* t, const Shape& axes) {
  return Reduction("reductionMaximumPropagateNaNWithTensor", OpKind::kReductionMaximum, t, axes);
}

Tensor* StandinGraph::reductionMinimumPropagateNaNWithTensor(Tensor* t, const Shape& axes) {
  return Reduction("reductionMinimumPropagateNaNWithTensor", OpKind::kReductionMinimum, t, axes);
}

Tensor* StandinGraph::reductionAndWithTensor(Tensor* t, const Shape& axes) {
  return Reduction("reductionAndWithTensor", OpKind::kReductionAnd, t, axes);
}

Tensor* StandinGraph::reductionOrWithTensor(Tensor* t, const Shape& axes) {
  return Reduction("reductionOrWithTensor", OpKind::kReductionOr, t, axes);
}

Tensor* StandinGraph::reductionArgMaximumWithTensor(Tensor* t, int64_t axis) {
  return ArgReduction("reductionArgMaximumWithTensor:axis:", OpKind::kReductionArgMaximum, t, axis);
}

Tensor* StandinGraph::reductionArgMinimumWithTensor(Tensor* t, int64_t axis) {
  return ArgReduction("reductionArgMinimumWithTensor:axis:", OpKind::kReductionArgMinimum, t, axis);
}

Tensor* StandinGraph::fastFourierTransformWithTensor(Tensor* t, const Shape& axes, const metal::FFTDescriptor& d) {
  const std::string call = "fastFourierTransformWithTensor:axes:descriptor:";
  if (!Usable(call, {t})) return Poison({ShapeOf(t), TypeOf(t)});
  if (!CheckAccepted("fastFourierTransformWithTensor", call, {t})) return Poison(t->type);
  auto wrapped = WrapAxes(call, t, axes);
  if (!wrapped) return Poison(t->type);
  // The host's FFT is forward unscaled or inverse scaled by 1/N; other descriptors are well formed
  // but not computed here.
  const bool forward = !d.inverse && d.scalingMode == metal::FFTScalingMode::kNone;
  const bool inverse = d.inverse && d.scalingMode == metal::FFTScalingMode::kSize;
  if (!forward && !inverse)
    return Unsupport(call, {t}, "an FFT descriptor other than forward unscaled or inverse scaled by size", t->type);
  return EmitOne(call, OpKind::kFFT, {t}, mps::FFTAttrs{*wrapped, inverse}, t->type);
}

Tensor* StandinGraph::realToHermiteanFFTWithTensor(Tensor* t, const Shape& axes, const metal::FFTDescriptor& d) {
  const std::string call = "realToHermiteanFFTWithTensor:axes:descriptor:";
  if (!Usable(call, {t})) return Poison({ShapeOf(t), TypeOf(t)});
  if (!CheckAccepted("realToHermiteanFFTWithTensor", call, {t})) return Poison(t->type);
  auto wrapped = WrapAxes(call, t, axes);
  if (!wrapped) return Poison(t->type);
  if (wrapped->empty()) return Reject(call, {t}, "no axes", t->type);
  if (d.inverse || d.scalingMode != metal::FFTScalingMode::kNone)
    return Unsupport(call, {t}, "a real-to-Hermitean FFT that is not forward and unscaled", t->type);
  Shape out = t->type.shape;
  int64_t& last = out[static_cast<size_t>(wrapped->back())];
  last = last / 2 + 1;
  return EmitOne(call, OpKind::kRealToHermiteanFFT, {t}, mps::FFTAttrs{*wrapped, false},
                 {out, ComplexType(t->type.dataType)});
}

Tensor* StandinGraph::HermiteanToRealFFTWithTensor(Tensor* t, const Shape& axes, const metal::FFTDescriptor& d) {
  const std::string call = "HermiteanToRealFFTWithTensor:axes:descriptor:";
  if (!Usable(call, {t})) return Poison({ShapeOf(t), TypeOf(t)});
  if (!CheckAccepted("HermiteanToRealFFTWithTensor", call, {t})) return Poison(t->type);
  auto wrapped = WrapAxes(call, t, axes);
  if (!wrapped) return Poison(t->type);
  if (wrapped->empty()) return Reject(call, {t}, "no axes", t->type);
  if (!d.inverse || d.scalingMode != metal::FFTScalingMode::kSize)
    return Unsupport(call, {t}, "a Hermitean-to-real FFT that is not inverse and scaled by size", t->type);
  Shape out = t->type.shape;
  int64_t& last = out[static_cast<size_t>(wrapped->back())];
  last = 2 * (last - 1) + (d.roundToOddHermitean ? 1 : 0);
  return EmitOne(call, OpKind::kHermiteanToRealFFT, {t}, mps::FFTAttrs{*wrapped, true},
                 {out, RealPartType(t->type.dataType)});
}

Tensor* StandinGraph::sortWithTensor(Tensor* t, int64_t axis, bool descending) {
  return Sort("sortWithTensor", OpKind::kSort, t, axis, descending);
}

Tensor* StandinGraph::argSortWithTensor(Tensor* t, int64_t axis, bool descending) {
  return Sort("argSortWithTensor", OpKind::kArgSort, t, axis, descending);
}

Tensors StandinGraph::topKWithSourceTensor(Tensor* t, uint64_t k) {
  const std::string call = "topKWithSourceTensor:k:";
  if (!Usable(call, {t})) return {Poison({ShapeOf(t), TypeOf(t)}), Poison({ShapeOf(t), DataType::kInt32})};
  if (t->type.shape.empty()) return {Reject(call, {t}, "a rank-0 source", t->type), Poison(t->type)};
  Shape out = t->type.shape;
  out.back() = static_cast<int64_t>(k);
  // A broken rule still gives the inferred types, so the caller's own checks do not hide it.
  if (!CheckAccepted("topKWithSourceTensor", call, {t}))
    return {Poison({out, t->type.dataType}), Poison({out, DataType::kInt32})};
  out.back() = t->type.shape.back();
  if (k == 0 || static_cast<int64_t>(k) > out.back())
    return {Reject(call, {t}, "k = " + std::to_string(k) + " outside [1, the last dimension]", t->type),
            Poison(t->type)};
  out.back() = static_cast<int64_t>(k);
  auto in = Locals(call, {t});
  if (!in) return {Poison(t->type), Poison(t->type)};
  return Emit(call, OpKind::kTopK, *in, mps::TopKAttrs{static_cast<int64_t>(k)},
              {{out, t->type.dataType}, {out, DataType::kInt32}});
}

Tensor* StandinGraph::cumulativeSumWithTensor(Tensor* t, int64_t axis, bool exclusive, bool reverse) {
  return Cumulative("cumulativeSumWithTensor", OpKind::kCumulativeSum, t, axis, exclusive, reverse);
}

Tensor* StandinGraph::cumulativeProductWithTensor(Tensor* t, int64_t axis, bool exclusive, bool reverse) {
  return Cumulative("cumulativeProductWithTensor", OpKind::kCumulativeProduct, t, axis, exclusive, reverse);
}

Tensor* StandinGraph::cumulativeMaximumWithTensor(Tensor* t, int64_t axis, bool exclusive, bool reverse) {
  return Cumulative("cumulativeMaximumWithTensor", OpKind::kCumulativeMaximum, t, axis, exclusive, reverse);
}

Tensor* StandinGraph::cumulativeMinimumWithTensor(Tensor* t, int64_t axis, bool exclusive, bool reverse) {
  return Cumulative("cumulativeMinimumWithTensor", OpKind::kCumulativeMinimum, t, axis, exclusive, reverse);
}

Tensor* StandinGraph::Unary(const std::string& selector, OpKind kind, Tensor* t) {
  const std::string call = selector + ":";
  if (!Usable(call, {t})) return Poison({ShapeOf(t), TypeOf(t)});
  DataType out = t->type.dataType;
  if (ReturnsBool(kind)) out = DataType::kBool;
  if (kind == OpKind::kRealPart || kind == OpKind::kImaginaryPart) out = RealPartType(out);
  if (!CheckAccepted(selector, call, {t})) return Poison({t->type.shape, out});
  return EmitOne(call, kind, {t}, mps::NoAttrs{}, {t->type.shape, out});
}

Tensor* StandinGraph::Binary(const std::string& selector, OpKind kind, Tensor* a, Tensor* b) {
  const std::string call = selector + ":secondaryTensor:";
  if (!Usable(call, {a, b})) return Poison({ShapeOf(a), TypeOf(a)});
  Shape out;
  if (!BroadcastShapes(a->type.shape, b->type.shape, &out))
    return Reject(call, {a, b}, "the shapes do not broadcast (NumPy's rule)", a->type);
  DataType dt = a->type.dataType;
  if (ReturnsBool(kind)) dt = DataType::kBool;
  if (kind == OpKind::kComplexFromParts) dt = ComplexType(dt);
  if (!CheckAccepted(selector, call, {a, b})) return Poison({out, dt});
  if (a->type.dataType != b->type.dataType) return Reject(call, {a, b}, "operands differ in data type", {out, dt});
  return EmitBroadcast(call, kind, {a, b}, {out, dt});
}

Tensor* StandinGraph::Reduction(const std::string& selector, OpKind kind, Tensor* t, const Shape& axes) {
  const std::string call = selector + ":axes:";
  if (!Usable(call, {t})) return Poison({ShapeOf(t), TypeOf(t)});
  auto wrapped = WrapAxes(call, t, axes);
  if (!wrapped) return Poison(t->type);
  Shape out = t->type.shape;
  for (int64_t a : *wrapped) out[static_cast<size_t>(a)] = 1;  // MPSGraph keeps reduced axes as 1
  if (!CheckAccepted(selector, call, {t})) return Poison({out, t->type.dataType});
  return EmitOne(call, kind, {t}, mps::AxesAttrs{*wrapped}, {out, t->type.dataType});
}

Tensor* StandinGraph::ArgReduction(const std::string& call, OpKind kind, Tensor* t, int64_t axis) {
  if (!Usable(call, {t})) return Poison({ShapeOf(t), DataType::kInt32});
  const int64_t a = WrapAxis(axis, t->type.shape.size());
  if (a < 0) return Reject(call, {t}, "axis " + std::to_string(axis) + " outside the rank", t->type);
  Shape out = t->type.shape;
  out[static_cast<size_t>(a)] = 1;
  return EmitOne(call, kind, {t}, mps::AxisAttrs{a}, {out, DataType::kInt32});
}

Tensor* StandinGraph::Sort(const std::string& selector, OpKind kind, Tensor* t, int64_t axis, bool descending) {
  const std::string call = selector + ":axis:descending:";
  if (!Usable(call, {t})) return Poison({ShapeOf(t), TypeOf(t)});
  const DataType out = kind == OpKind::kArgSort ? DataType::kInt32 : t->type.dataType;
  if (!CheckAccepted(selector, call, {t})) return Poison({t->type.shape, out});
  const int64_t a = WrapAxis(axis, t->type.shape.size());
  if (a < 0) return Reject(call, {t}, "axis " + std::to_string(axis) + " outside the rank", t->type);
  return EmitOne(call, kind, {t}, mps::SortAttrs{a, descending}, {t->type.shape, out});
}

Tensor* StandinGraph::Cumulative(const std::string& selector, OpKind kind, Tensor* t, int64_t axis, bool exclusive,
                                 bool reverse) {
  const std::string call = selector + ":axis:exclusive:reverse:";
  if (!Usable(call, {t})) return Poison({ShapeOf(t), TypeOf(t)});
  const int64_t a = WrapAxis(axis, t->type.shape.size());
  if (a < 0) return Reject(call, {t}, "axis " + std::to_string(axis) + " outside the rank", t->type);
  return EmitOne(call, kind, {t}, mps::CumulativeAttrs{a, exclusive, reverse}, t->type);
}

}  // namespace jmp::exec::standin
