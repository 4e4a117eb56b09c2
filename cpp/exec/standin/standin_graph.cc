// The stand-in's MPSGraph: each call is recorded as ops of an mps::Graph built from the call's own
// arguments and descriptors (never from our op attributes), its result type inferred by the rule of
// its header, and checked against what the header requires. The first broken rule is kept and
// returned by compileWithDevice; later calls still return tensors, so the caller runs on to compile.
#include <algorithm>
#include <cstring>
#include <deque>
#include <optional>
#include <set>
#include <utility>

#include "exec/standin/standin_dtypes.h"
#include "exec/standin/standin_internal.h"
#include "support/dtype.h"

namespace jmp::exec::metal {

// The graph or one block of it. A block's values are local to it: an if block reads outer tensors
// through captures (they become the If op's operands); a while block reads only its arguments.
struct Scope {
  mps::Graph graph;
  Scope* parent = nullptr;
  bool captures_allowed = false;
  bool open = true;
  std::vector<std::pair<int, int>> captures;  // (the parent's value, this scope's value)
};

}  // namespace jmp::exec::metal

namespace jmp::exec::standin {

namespace {

using metal::Scope;
using metal::Tensor;
using metal::Tensors;
using mps::OpKind;

// What the MPS graph holds for an MPSGraph type (its dtype is checked where the tensor is made).
mps::TensorType MpsType(const ShapedType& t) {
  auto d = HostDType(t.dataType);
  return mps::TensorType{d.ok() ? *d : DType::kF32, t.shape};
}

bool IsComplexType(DataType t) { return t == DataType::kComplexFloat32 || t == DataType::kComplexFloat16; }

// Wraps a possibly negative axis into [0, rank); -1 when outside.
int64_t WrapAxis(int64_t axis, size_t rank) {
  const int64_t r = static_cast<int64_t>(rank);
  if (axis < 0) axis += r;
  return axis >= 0 && axis < r ? axis : -1;
}

// NumPy's broadcast of two shapes (right-aligned, each dimension equal or 1); false when they clash.
bool BroadcastShapes(const Shape& a, const Shape& b, Shape* out) {
  const size_t rank = std::max(a.size(), b.size());
  Shape r(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t x = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t y = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (x != y && x != 1 && y != 1) return false;
    r[i] = x == 1 ? y : x;
  }
  *out = std::move(r);
  return true;
}

bool ReturnsBool(OpKind k) {
  return k == OpKind::kEqual || k == OpKind::kNotEqual || k == OpKind::kLessThan || k == OpKind::kLessThanOrEqualTo ||
         k == OpKind::kGreaterThan || k == OpKind::kGreaterThanOrEqualTo || k == OpKind::kIsFinite ||
         k == OpKind::kIsNaN || k == OpKind::kIsInfinite;
}

DataType RealPartType(DataType t) { return t == DataType::kComplexFloat16 ? DataType::kFloat16 : DataType::kFloat32; }
DataType ComplexType(DataType t) {
  return t == DataType::kFloat16 ? DataType::kComplexFloat16 : DataType::kComplexFloat32;
}

std::string Join(const Shape& v) { return ShapeString(v); }

class StandinGraph : public metal::Graph {
 public:
  StandinGraph() {
    scopes_.push_back(std::make_unique<Scope>());
    stack_.push_back(scopes_.back().get());
  }

  Shape shapeOf(Tensor* t) override { return t ? t->type.shape : Shape{}; }
  DataType dataTypeOf(Tensor* t) override { return t ? t->type.dataType : DataType::kInvalid; }

  Tensor* placeholderWithShape(const Shape& shape, DataType dt) override {
    const std::string call = "placeholderWithShape:dataType:";
    if (stack_.size() != 1) return Reject(call, {}, "a placeholder made inside a control-flow block", {shape, dt});
    if (!CheckNewType(call, {}, {shape, dt})) return Poison({shape, dt});
    Scope* s = stack_.back();
    Tensor* t = NewTensor(s, s->graph.AddValue(MpsType({shape, dt}).dtype, shape), {shape, dt});
    t->placeholder = true;
    return t;
  }

  Tensor* constantWithData(const void* data, size_t length, const Shape& shape, DataType dt) override {
    const std::string call = "constantWithData:shape:dataType:";
    if (!CheckNewType(call, {}, {shape, dt})) return Poison({shape, dt});
    const size_t want = static_cast<size_t>(ElementCount(shape)) * ElementBytes(dt);
    if (length != want)
      return Reject(call, {},
                    "the data holds " + std::to_string(length) + " bytes, " + TypeString({shape, dt}) + " needs " +
                        std::to_string(want),
                    {shape, dt});
    mps::ConstantAttrs attrs;
    const auto* p = static_cast<const uint8_t*>(data);
    attrs.data.assign(p, p + length);
    return EmitOne(call, OpKind::kConstant, {}, std::move(attrs), {shape, dt});
  }

  Tensor* constantWithScalar(double scalar, const Shape& shape, DataType dt) override {
    const std::string call = "constantWithScalar:shape:dataType:";
    if (!CheckNewType(call, {}, {shape, dt})) return Poison({shape, dt});
    // The scalar as a double of the result's rank, converted and broadcast as MPSGraph converts it.
    mps::ConstantAttrs attrs;
    attrs.data.resize(sizeof(double));
    std::memcpy(attrs.data.data(), &scalar, sizeof(double));
    Scope* s = stack_.back();
    const Shape ones(shape.size(), 1);
    const int c = EmitLocal(OpKind::kConstant, {}, std::move(attrs), {DType::kF64, ones});
    const int cast = EmitLocal(OpKind::kCast, {c}, mps::NoAttrs{}, MpsType({ones, dt}));
    const int value =
        shape == ones ? cast : EmitLocal(OpKind::kBroadcast, {cast}, mps::NoAttrs{}, MpsType({shape, dt}));
    return NewTensor(s, value, {shape, dt});
  }

  Tensor* coordinateAlongAxis(int64_t axis, const Shape& shape) override {
    const std::string call = "coordinateAlongAxis:withShape:";
    const ShapedType out{shape, DataType::kInt32};
    if (!CheckNewType(call, {}, out)) return Poison(out);
    const int64_t a = WrapAxis(axis, shape.size());
    if (a < 0) return Reject(call, {}, "axis " + std::to_string(axis) + " outside shape " + Join(shape), out);
    return EmitOne(call, OpKind::kCoordinateAlongAxis, {}, mps::AxisAttrs{a}, out);
  }

  Tensor* castTensor(Tensor* t, DataType to) override {
    const std::string call = "castTensor:toType:";
    if (!Usable(call, {t})) return Poison({ShapeOf(t), to});
    const ShapedType out{t->type.shape, to};
    if (!CheckNewType(call, {t}, out)) return Poison(out);
    return EmitOne(call, OpKind::kCast, {t}, mps::NoAttrs{}, out);
  }

  Tensor* reinterpretCastTensor(Tensor* t, DataType to) override {
    const std::string call = "reinterpretCastTensor:toType:";
    if (!Usable(call, {t})) return Poison({ShapeOf(t), to});
    const size_t from_bytes = ElementBytes(t->type.dataType), to_bytes = ElementBytes(to);
    ShapedType out{t->type.shape, to};
    if (from_bytes == 0 || to_bytes == 0) return Reject(call, {t}, "a type without a size", out);
    if (from_bytes != to_bytes) {
      if (out.shape.empty()) return Unsupport(call, {t}, "a rank-0 reinterpretation between sizes", out);
      int64_t& last = out.shape.back();
      if (from_bytes > to_bytes) {
        last *= static_cast<int64_t>(from_bytes / to_bytes);
      } else if (last * static_cast<int64_t>(from_bytes) % static_cast<int64_t>(to_bytes) != 0) {
        return Reject(call, {t}, "the last dimension's bytes are not a multiple of " + DataTypeName(to) + "'s", out);
      } else {
        last = last * static_cast<int64_t>(from_bytes) / static_cast<int64_t>(to_bytes);
      }
    }
    if (!CheckNewType(call, {t}, out)) return Poison(out);
    return EmitOne(call, OpKind::kReinterpretCast, {t}, mps::NoAttrs{}, out);
  }

  Tensor* reshapeTensor(Tensor* t, const Shape& shape) override {
    const std::string call = "reshapeTensor:withShape:";
    if (!Usable(call, {t})) return Poison({shape, TypeOf(t)});
    Shape out = shape;
    const int64_t n = ElementCount(t->type.shape);
    int64_t known = 1, inferred = -1;
    for (size_t i = 0; i < out.size(); ++i) {
      if (out[i] == -1 && inferred < 0) {
        inferred = static_cast<int64_t>(i);
      } else if (out[i] <= 0) {
        return Reject(call, {t}, "shape " + Join(shape) + " has a dimension that is neither positive nor one -1",
                      {shape, t->type.dataType});
      } else {
        known *= out[i];
      }
    }
    if (inferred >= 0 && n % known == 0) out[static_cast<size_t>(inferred)] = n / known;
    if (ElementCount(out) != n)
      return Reject(call, {t}, "shape " + Join(shape) + " holds another number of elements", {shape, t->type.dataType});
    return EmitOne(call, OpKind::kReshape, {t}, mps::NoAttrs{}, {out, t->type.dataType});
  }

  Tensor* transposeTensor(Tensor* t, const Shape& permutation) override {
    const std::string call = "transposeTensor:permutation:";
    if (!Usable(call, {t})) return Poison({ShapeOf(t), TypeOf(t)});
    const size_t rank = t->type.shape.size();
    std::vector<bool> seen(rank, false);
    Shape out;
    bool ok = permutation.size() == rank;
    for (int64_t p : permutation) {
      if (!ok || p < 0 || p >= static_cast<int64_t>(rank) || seen[static_cast<size_t>(p)]) {
        ok = false;
        break;
      }
      seen[static_cast<size_t>(p)] = true;
      out.push_back(t->type.shape[static_cast<size_t>(p)]);
    }
    if (!ok) return Reject(call, {t}, "permutation " + Join(permutation) + " is not one of the rank", t->type);
    return EmitOne(call, OpKind::kTranspose, {t}, mps::PermutationAttrs{permutation}, {out, t->type.dataType});
  }

  Tensor* broadcastTensor(Tensor* t, const Shape& shape) override {
    const std::string call = "broadcastTensor:toShape:";
    if (!Usable(call, {t})) return Poison({shape, TypeOf(t)});
    Shape out;
    if (!BroadcastShapes(t->type.shape, shape, &out))
      return Reject(call, {t}, "shape " + Join(shape) + " does not broadcast with it", {shape, t->type.dataType});
    const ShapedType type{out, t->type.dataType};
    if (!CheckNewType(call, {t}, type)) return Poison(type);
    auto in = Locals(call, {t});
    if (!in) return Poison(type);
    return NewTensor(stack_.back(), BroadcastLocal((*in)[0], t->type, out), type);
  }

  Tensor* sliceTensor(Tensor* t, const Shape& starts, const Shape& ends, const Shape& strides) override {
    const std::string call = "sliceTensor:starts:ends:strides:";
    if (!Usable(call, {t})) return Poison({ShapeOf(t), TypeOf(t)});
    const size_t rank = t->type.shape.size();
    if (starts.size() != rank || ends.size() != rank || strides.size() != rank)
      return Reject(call, {t}, "starts, ends and strides need one entry per dimension", t->type);
    mps::SliceAttrs a;
    Shape out;
    for (size_t i = 0; i < rank; ++i) {
      const int64_t d = t->type.shape[i];
      if (strides[i] <= 0) return Unsupport(call, {t}, "a stride that is not positive", t->type);
      int64_t s = starts[i] < 0 ? starts[i] + d : starts[i], e = ends[i] < 0 ? ends[i] + d : ends[i];
      s = std::clamp<int64_t>(s, 0, d);
      e = std::clamp<int64_t>(e, 0, d);
      if (e < s) e = s;
      a.starts.push_back(s);
      a.ends.push_back(e);
      a.strides.push_back(strides[i]);
      out.push_back((e - s + strides[i] - 1) / strides[i]);
    }
    return EmitOne(call, OpKind::kSlice, {t}, std::move(a), {out, t->type.dataType});
  }

  Tensor* concatTensors(const Tensors& tensors, int64_t dimension) override {
    const std::string call = "concatTensors:dimension:";
    if (tensors.empty()) return Reject(call, {}, "no tensors", {{1}, DataType::kFloat32});
    if (!Usable(call, tensors)) return Poison({ShapeOf(tensors[0]), TypeOf(tensors[0])});
    const ShapedType& first = tensors[0]->type;
    const int64_t axis = WrapAxis(dimension, first.shape.size());
    if (axis < 0) return Reject(call, tensors, "dimension " + std::to_string(dimension) + " outside the rank", first);
    Shape out = first.shape;
    out[static_cast<size_t>(axis)] = 0;
    for (Tensor* t : tensors) {
      bool same = t->type.dataType == first.dataType && t->type.shape.size() == first.shape.size();
      for (size_t i = 0; same && i < out.size(); ++i)
        same = static_cast<int64_t>(i) == axis || t->type.shape[i] == first.shape[i];
      if (!same) return Reject(call, tensors, "tensors differ in type or outside the dimension", first);
      out[static_cast<size_t>(axis)] += t->type.shape[static_cast<size_t>(axis)];
    }
    return EmitOne(call, OpKind::kConcat, tensors, mps::AxisAttrs{axis}, {out, first.dataType});
  }

  Tensor* padTensor(Tensor* t, metal::PaddingMode mode, const Shape& left, const Shape& right, double value) override {
    const std::string call = "padTensor:withPaddingMode:leftPadding:rightPadding:constantValue:";
    if (!Usable(call, {t})) return Poison({ShapeOf(t), TypeOf(t)});
    const size_t rank = t->type.shape.size();
    if (mode != metal::PaddingMode::kConstant)
      return Unsupport(call, {t}, "a padding mode other than constant", t->type);
    if (left.size() != rank || right.size() != rank)
      return Reject(call, {t}, "leftPadding and rightPadding need one entry per dimension", t->type);
    Shape out;
    for (size_t i = 0; i < rank; ++i) {
      if (left[i] < 0 || right[i] < 0) return Unsupport(call, {t}, "negative padding", t->type);
      out.push_back(t->type.shape[i] + left[i] + right[i]);
    }
    return EmitOne(call, OpKind::kPad, {t}, mps::PadAttrs{left, right, value}, {out, t->type.dataType});
  }

  Tensor* reverseTensor(Tensor* t, const Shape& axes) override {
    const std::string call = "reverseTensor:axes:";
    if (!Usable(call, {t})) return Poison({ShapeOf(t), TypeOf(t)});
    auto wrapped = WrapAxes(call, t, axes);
    if (!wrapped) return Poison(t->type);
    if (wrapped->size() != axes.size()) return Reject(call, {t}, "axes " + Join(axes) + " are not unique", t->type);
    return EmitOne(call, OpKind::kReverse, {t}, mps::AxesAttrs{*wrapped}, t->type);
  }

#define JMP_MPS_UNARY(Name, macos, selector, domain) \
  Tensor* selector(Tensor* t) override { return Unary(#selector, OpKind::k##Name, t); }
#define JMP_MPS_BINARY(Name, macos, primary, secondary, domain) \
  Tensor* primary(Tensor* a, Tensor* b) override { return Binary(#primary, OpKind::k##Name, a, b); }
#include "mps/op_kinds.def"

  Tensor* selectWithPredicateTensor(Tensor* p, Tensor* a, Tensor* b) override {
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
    if (p->type.dataType != DataType::kBool)
      pred = EmitLocal(OpKind::kCast, {pred}, mps::NoAttrs{}, {DType::kBool, out});
    const ShapedType type{out, a->type.dataType};
    const int v = EmitLocal(OpKind::kSelect,
                            {pred, BroadcastLocal((*in)[1], a->type, out), BroadcastLocal((*in)[2], b->type, out)},
                            mps::NoAttrs{}, MpsType(type));
    return NewTensor(stack_.back(), v, type);
  }

  Tensor* clampWithTensor(Tensor* x, Tensor* lo, Tensor* hi) override {
    const std::string call = "clampWithTensor:minValueTensor:maxValueTensor:";
    if (!Usable(call, {x, lo, hi})) return Poison({ShapeOf(x), TypeOf(x)});
    if (x->type.dataType != lo->type.dataType || x->type.dataType != hi->type.dataType)
      return Reject(call, {x, lo, hi}, "operands differ in data type", x->type);
    Shape out;
    if (!BroadcastShapes(x->type.shape, lo->type.shape, &out) || !BroadcastShapes(out, hi->type.shape, &out))
      return Reject(call, {x, lo, hi}, "the shapes do not broadcast", x->type);
    return EmitBroadcast(call, OpKind::kClamp, {x, lo, hi}, {out, x->type.dataType});
  }

  Tensor* matrixMultiplicationWithPrimaryTensor(Tensor* a, Tensor* b) override {
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

  Tensor* reductionSumWithTensor(Tensor* t, const Shape& axes) override {
    return Reduction("reductionSumWithTensor", OpKind::kReductionSum, t, axes);
  }
  Tensor* reductionProductWithTensor(Tensor* t, const Shape& axes) override {
    return Reduction("reductionProductWithTensor", OpKind::kReductionProduct, t, axes);
  }
  Tensor* reductionMaximumPropagateNaNWithTensor(Tensor* t, const Shape& axes) override {
    return Reduction("reductionMaximumPropagateNaNWithTensor", OpKind::kReductionMaximum, t, axes);
  }
  Tensor* reductionMinimumPropagateNaNWithTensor(Tensor* t, const Shape& axes) override {
    return Reduction("reductionMinimumPropagateNaNWithTensor", OpKind::kReductionMinimum, t, axes);
  }
  Tensor* reductionAndWithTensor(Tensor* t, const Shape& axes) override {
    return Reduction("reductionAndWithTensor", OpKind::kReductionAnd, t, axes);
  }
  Tensor* reductionOrWithTensor(Tensor* t, const Shape& axes) override {
    return Reduction("reductionOrWithTensor", OpKind::kReductionOr, t, axes);
  }
  Tensor* reductionArgMaximumWithTensor(Tensor* t, int64_t axis) override {
    return ArgReduction("reductionArgMaximumWithTensor:axis:", OpKind::kReductionArgMaximum, t, axis);
  }
  Tensor* reductionArgMinimumWithTensor(Tensor* t, int64_t axis) override {
    return ArgReduction("reductionArgMinimumWithTensor:axis:", OpKind::kReductionArgMinimum, t, axis);
  }

  Tensor* fastFourierTransformWithTensor(Tensor* t, const Shape& axes, const metal::FFTDescriptor& d) override {
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

  Tensor* realToHermiteanFFTWithTensor(Tensor* t, const Shape& axes, const metal::FFTDescriptor& d) override {
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

  Tensor* HermiteanToRealFFTWithTensor(Tensor* t, const Shape& axes, const metal::FFTDescriptor& d) override {
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

  Tensor* sortWithTensor(Tensor* t, int64_t axis, bool descending) override {
    return Sort("sortWithTensor", OpKind::kSort, t, axis, descending);
  }
  Tensor* argSortWithTensor(Tensor* t, int64_t axis, bool descending) override {
    return Sort("argSortWithTensor", OpKind::kArgSort, t, axis, descending);
  }

  Tensors topKWithSourceTensor(Tensor* t, uint64_t k) override {
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

  Tensor* cumulativeSumWithTensor(Tensor* t, int64_t axis, bool exclusive, bool reverse) override {
    return Cumulative("cumulativeSumWithTensor", OpKind::kCumulativeSum, t, axis, exclusive, reverse);
  }
  Tensor* cumulativeProductWithTensor(Tensor* t, int64_t axis, bool exclusive, bool reverse) override {
    return Cumulative("cumulativeProductWithTensor", OpKind::kCumulativeProduct, t, axis, exclusive, reverse);
  }
  Tensor* cumulativeMaximumWithTensor(Tensor* t, int64_t axis, bool exclusive, bool reverse) override {
    return Cumulative("cumulativeMaximumWithTensor", OpKind::kCumulativeMaximum, t, axis, exclusive, reverse);
  }
  Tensor* cumulativeMinimumWithTensor(Tensor* t, int64_t axis, bool exclusive, bool reverse) override {
    return Cumulative("cumulativeMinimumWithTensor", OpKind::kCumulativeMinimum, t, axis, exclusive, reverse);
  }

  Tensor* gatherAlongAxis(int64_t axis, Tensor* updates, Tensor* indices) override {
    const std::string call = "gatherAlongAxis:withUpdatesTensor:indicesTensor:";
    if (!Usable(call, {updates, indices})) return Poison({ShapeOf(indices), TypeOf(updates)});
    const ShapedType out{indices->type.shape, updates->type.dataType};
    if (!CheckIndices(call, {updates, indices}, indices, AlongAxisIndexTypes())) return Poison(out);
    const int64_t a = WrapAxis(axis, updates->type.shape.size());
    if (a < 0 || !SameExceptAxis(updates->type.shape, indices->type.shape, a))
      return Reject(call, {updates, indices},
                    "axis " + std::to_string(axis) + ": updates and indices must match in rank and except at axis",
                    out);
    auto in = Locals(call, {updates, indices});
    if (!in) return Poison(out);
    return Emit(call, OpKind::kGatherAlongAxis, {(*in)[0], Int32Indices((*in)[1], indices->type)}, mps::AxisAttrs{a},
                {out})[0];
  }

  Tensor* gatherNDWithUpdatesTensor(Tensor* updates, Tensor* indices, uint64_t batch) override {
    const std::string call = "gatherNDWithUpdatesTensor:indicesTensor:batchDimensions:";
    if (!Usable(call, {updates, indices})) return Poison({ShapeOf(updates), TypeOf(updates)});
    const Shape &us = updates->type.shape, &is = indices->type.shape;
    const ShapedType fallback = updates->type;
    if (!CheckIndices(call, {updates, indices}, indices, NDIndexTypes())) return Poison(fallback);
    const int64_t B = static_cast<int64_t>(batch);
    const int64_t U = static_cast<int64_t>(us.size()) - B, Q = static_cast<int64_t>(is.size()) - B;
    if (U <= 0 || Q <= 0)
      return Reject(call, {updates, indices}, "U > 0 and Q > 0 (U = updates.rank - B, Q = indices.rank - B)", fallback);
    const int64_t K = is.back();
    if (K > U) return Reject(call, {updates, indices}, "K <= U (K = indices.shape[-1])", fallback);
    for (int64_t i = 0; i < B; ++i)
      if (us[static_cast<size_t>(i)] != is[static_cast<size_t>(i)])
        return Reject(call, {updates, indices}, "batch dimensions of updates and indices differ", fallback);
    Shape out(is.begin(), is.end() - 1);
    out.insert(out.end(), us.begin() + B + K, us.end());
    const int64_t P = static_cast<int64_t>(out.size()) - B;
    if (P <= 0) return Reject(call, {updates, indices}, "P > 0 (P = result rank - B; here P = 0)", fallback);
    return EmitOne(call, OpKind::kGatherND, {updates, indices}, mps::GatherNDAttrs{B}, {out, updates->type.dataType});
  }

  Tensor* scatterNDWithDataTensor(Tensor* data, Tensor* updates, Tensor* indices, uint64_t batch,
                                  metal::ScatterMode mode) override {
    const std::string call = "scatterNDWithDataTensor:updatesTensor:indicesTensor:batchDimensions:mode:";
    if (!Usable(call, {data, updates, indices})) return Poison({ShapeOf(data), TypeOf(data)});
    const Tensors ops{data, updates, indices};
    const Shape &ds = data->type.shape, &us = updates->type.shape, &is = indices->type.shape;
    if (!CheckIndices(call, ops, indices, NDIndexTypes())) return Poison(data->type);
    if (updates->type.dataType != data->type.dataType)
      return Reject(call, ops, "updates and data differ in data type", data->type);
    if (batch != 0) return Unsupport(call, ops, "batchDimensions other than 0", data->type);
    auto m = ScatterModeOf(mode);
    if (!m) return Reject(call, ops, "an unknown scatter mode", data->type);
    if (is.empty()) return Reject(call, ops, "rank-0 indices", data->type);
    const int64_t P = static_cast<int64_t>(ds.size()), U = static_cast<int64_t>(us.size());
    const int64_t Q = static_cast<int64_t>(is.size()), K = is.back();
    if (K > P) return Reject(call, ops, "K <= P (K = indices.shape[-1], P = data rank)", data->type);
    if (U != (P - K) + Q - 1)
      return Reject(call, ops,
                    "U = (P-K) + Q-1 (U = " + std::to_string(U) + ", P = " + std::to_string(P) +
                        ", K = " + std::to_string(K) + ", Q = " + std::to_string(Q) + ")",
                    data->type);
    bool shapes = true;
    for (int64_t i = 0; i < Q - 1; ++i) shapes = shapes && is[static_cast<size_t>(i)] == us[static_cast<size_t>(i)];
    for (int64_t i = Q - 1; i < U; ++i)
      shapes = shapes && us[static_cast<size_t>(i)] == ds[static_cast<size_t>(K + i - (Q - 1))];
    if (!shapes)
      return Reject(call, ops, "indices.shape[0:Q-1] = updates.shape[0:Q-1] and updates.shape[Q-1:U] = data.shape[K:P]",
                    data->type);
    return EmitOne(call, OpKind::kScatterND, ops, mps::ScatterAttrs{*m, 0}, data->type);
  }

  Tensor* scatterAlongAxis(int64_t axis, Tensor* data, Tensor* updates, Tensor* indices,
                           metal::ScatterMode mode) override {
    const std::string call = "scatterAlongAxis:withDataTensor:updatesTensor:indicesTensor:mode:";
    if (!Usable(call, {data, updates, indices})) return Poison({ShapeOf(data), TypeOf(data)});
    const Tensors ops{data, updates, indices};
    if (!CheckIndices(call, ops, indices, AlongAxisIndexTypes())) return Poison(data->type);
    if (updates->type.dataType != data->type.dataType)
      return Reject(call, ops, "updates and data differ in data type", data->type);
    auto m = ScatterModeOf(mode);
    if (!m) return Reject(call, ops, "an unknown scatter mode", data->type);
    const int64_t a = WrapAxis(axis, data->type.shape.size());
    if (updates->type.shape != indices->type.shape || a < 0 ||
        !SameExceptAxis(data->type.shape, updates->type.shape, a))
      return Reject(
          call, ops,
          "axis " + std::to_string(axis) + ": updates and indices must have one shape, data the same except at axis",
          data->type);
    auto in = Locals(call, ops);
    if (!in) return Poison(data->type);
    return Emit(call, OpKind::kScatterAlongAxis, {(*in)[0], (*in)[1], Int32Indices((*in)[2], indices->type)},
                mps::ScatterAttrs{*m, a}, {data->type})[0];
  }

  Tensor* convolution2DWithSourceTensor(Tensor* x, Tensor* w, const metal::Convolution2DOpDescriptor& d) override {
    const std::string call = "convolution2DWithSourceTensor:weightsTensor:descriptor:";
    if (!Usable(call, {x, w})) return Poison({ShapeOf(x), TypeOf(x)});
    if (!CheckAccepted("convolution2DWithSourceTensor", call, {x, w})) return Poison(x->type);
    if (x->type.dataType != w->type.dataType)
      return Reject(call, {x, w}, "source and weights differ in data type", x->type);
    if (d.dataLayout != metal::TensorNamedDataLayout::kNHWC || d.weightsLayout != metal::TensorNamedDataLayout::kHWIO)
      return Unsupport(call, {x, w}, "layouts other than NHWC source and HWIO weights", x->type);
    if (d.paddingStyle != metal::PaddingStyle::kExplicit) return Unsupport(call, {x, w}, "implicit padding", x->type);
    const Shape &xs = x->type.shape, &ws = w->type.shape;
    if (xs.size() != 4 || ws.size() != 4) return Reject(call, {x, w}, "source and weights must have rank 4", x->type);
    if (d.groups == 0 || d.strideInX == 0 || d.strideInY == 0 || d.dilationRateInX == 0 || d.dilationRateInY == 0)
      return Reject(call, {x, w}, "a zero stride, dilation rate or group count", x->type);
    const auto g = static_cast<int64_t>(d.groups);
    if (xs[3] != ws[2] * g || ws[3] % g != 0)
      return Reject(
          call, {x, w},
          "source channels must be weights' I times groups (" + std::to_string(g) + ") and O a multiple of groups",
          x->type);
    auto extent = [](int64_t in, uint64_t lo, uint64_t hi, int64_t k, uint64_t dil, uint64_t stride) {
      const int64_t span = static_cast<int64_t>(dil) * (k - 1) + 1;
      const int64_t padded = in + static_cast<int64_t>(lo + hi);
      return padded < span ? int64_t{0} : (padded - span) / static_cast<int64_t>(stride) + 1;
    };
    const Shape out{xs[0], extent(xs[1], d.paddingTop, d.paddingBottom, ws[0], d.dilationRateInY, d.strideInY),
                    extent(xs[2], d.paddingLeft, d.paddingRight, ws[1], d.dilationRateInX, d.strideInX), ws[3]};
    mps::Conv2DAttrs a;
    a.strides = {static_cast<int64_t>(d.strideInY), static_cast<int64_t>(d.strideInX)};
    a.dilations = {static_cast<int64_t>(d.dilationRateInY), static_cast<int64_t>(d.dilationRateInX)};
    a.pad_low = {static_cast<int64_t>(d.paddingTop), static_cast<int64_t>(d.paddingLeft)};
    a.pad_high = {static_cast<int64_t>(d.paddingBottom), static_cast<int64_t>(d.paddingRight)};
    a.groups = g;
    return EmitOne(call, OpKind::kConv2D, {x, w}, std::move(a), {out, x->type.dataType});
  }

  Tensor* maxPooling4DWithSourceTensor(Tensor* t, const metal::Pooling4DOpDescriptor& d) override {
    return Pool("maxPooling4DWithSourceTensor", OpKind::kMaxPool4D, {t}, d);
  }
  Tensor* avgPooling4DWithSourceTensor(Tensor* t, const metal::Pooling4DOpDescriptor& d) override {
    return Pool("avgPooling4DWithSourceTensor", OpKind::kAvgPool4D, {t}, d);
  }
  Tensor* maxPooling4DGradientWithGradientTensor(Tensor* gradient, Tensor* source,
                                                 const metal::Pooling4DOpDescriptor& d) override {
    return Pool("maxPooling4DGradientWithGradientTensor", OpKind::kMaxPool4DGradient, {gradient, source}, d);
  }

  Tensors whileWithInitialInputs(const Tensors& initial, const WhileBeforeBlock& before,
                                 const WhileAfterBlock& after) override;
  Tensors ifWithPredicateTensor(Tensor* predicate, const IfBlock& thenBlock, const IfBlock& elseBlock) override;

  StatusOr<std::unique_ptr<metal::GraphExecutable>> compileWithDevice(
      metal::Device&, const std::vector<std::pair<Tensor*, ShapedType>>& feeds, const Tensors& targets) override;

 private:
  static Shape ShapeOf(const Tensor* t) { return t ? t->type.shape : Shape{1}; }
  static DataType TypeOf(const Tensor* t) { return t ? t->type.dataType : DataType::kFloat32; }

  Tensor* NewTensor(Scope* scope, int value, const ShapedType& type) {
    tensors_.push_back(std::make_unique<Tensor>());
    Tensor* t = tensors_.back().get();
    t->scope = scope;
    t->value = value;
    t->type = type;
    return t;
  }

  // A tensor for a call that broke a rule: a value nothing computes, never compiled (compile fails).
  Tensor* Poison(const ShapedType& type) {
    Scope* s = stack_.back();
    Tensor* t = NewTensor(s, s->graph.AddValue(MpsType(type).dtype, type.shape), type);
    t->poisoned = true;
    return t;
  }

  std::string Describe(const std::string& call, const Tensors& operands) const {
    std::string s = call + " on (";
    for (size_t i = 0; i < operands.size(); ++i)
      s += (i ? ", " : "") + (operands[i] ? TypeString(operands[i]->type) : std::string("nil"));
    return s + ")";
  }

  void Record(Status s) {
    if (first_error_.ok()) first_error_ = std::move(s);
  }

  Tensor* Reject(const std::string& call, const Tensors& operands, const std::string& rule, const ShapedType& type) {
    Record(Violation(Describe(call, operands) + ": " + rule));
    return Poison(type);
  }
  Tensor* Unsupport(const std::string& call, const Tensors& operands, const std::string& what, const ShapedType& type) {
    Record(Unsupported(Describe(call, operands) + ": " + what));
    return Poison(type);
  }

  // Operands that exist, belong to an open scope of this graph, and were not made by a broken call.
  bool Usable(const std::string& call, const Tensors& operands) {
    for (Tensor* t : operands) {
      if (!t) {
        Record(Violation(Describe(call, operands) + ": a nil tensor"));
        return false;
      }
      if (t->poisoned) return false;
      if (!owned_.count(t->scope) && !OwnsScope(t->scope)) {
        Record(Violation(Describe(call, operands) + ": a tensor of another graph"));
        return false;
      }
      if (!t->scope->open) {
        Record(Violation(Describe(call, operands) + ": a tensor of a block that has returned"));
        return false;
      }
    }
    return true;
  }
  bool OwnsScope(const Scope* s) {
    for (const auto& p : scopes_)
      if (p.get() == s) {
        owned_.insert(s);
        return true;
      }
    return false;
  }

  // A type a call makes: a known data type, and no zero-element or negative dimension.
  bool CheckNewType(const std::string& call, const Tensors& operands, const ShapedType& type) {
    auto d = HostDType(type.dataType);
    if (!d.ok()) {
      Record(Status(d.status().code(), d.status().message() + " (" + Describe(call, operands) + ")"));
      return false;
    }
    const int64_t n = ElementCount(type.shape);
    if (n <= 0) {
      Record(Violation(Describe(call, operands) + ": a " + (n == 0 ? "zero-element" : "negative-dimension") +
                       " tensor " + TypeString(type) + " (MPSGraph never takes or makes one)"));
      return false;
    }
    return true;
  }

  bool CheckAccepted(const std::string& selector, const std::string& call, const Tensors& operands) {
    const AcceptedTypes* row = AcceptedTypesOf(selector);
    if (!row) return true;
    for (Tensor* t : operands)
      if (std::find(row->types.begin(), row->types.end(), t->type.dataType) == row->types.end()) {
        std::string list;
        for (DataType a : row->types) list += (list.empty() ? "" : ", ") + DataTypeName(a);
        Record(Violation(Describe(call, operands) + ": data type " + DataTypeName(t->type.dataType) +
                         " is not one of " + list + " (" + std::string(row->source) + ")"));
        return false;
      }
    return true;
  }

  bool CheckIndices(const std::string& call, const Tensors& operands, Tensor* indices, const AcceptedTypes& accepted) {
    if (std::find(accepted.types.begin(), accepted.types.end(), indices->type.dataType) != accepted.types.end())
      return true;
    Record(Violation(Describe(call, operands) + ": indices of data type " + DataTypeName(indices->type.dataType) +
                     " (" + std::string(accepted.source) + ")"));
    return false;
  }

  static bool SameExceptAxis(const Shape& a, const Shape& b, int64_t axis) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (static_cast<int64_t>(i) != axis && a[i] != b[i]) return false;
    return true;
  }

  static std::optional<mps::ScatterMode> ScatterModeOf(metal::ScatterMode m) {
    const auto v = static_cast<int64_t>(m);
    if (v < 0 || v > static_cast<int64_t>(metal::ScatterMode::kSet)) return std::nullopt;
    return static_cast<mps::ScatterMode>(v);  // both enums follow MPSGraphScatterMode's order
  }

  std::optional<std::vector<int64_t>> WrapAxes(const std::string& call, Tensor* t, const Shape& axes) {
    std::set<int64_t> wrapped;
    for (int64_t a : axes) {
      const int64_t w = WrapAxis(a, t->type.shape.size());
      if (w < 0) {
        Record(Violation(Describe(call, {t}) + ": axis " + std::to_string(a) + " outside the rank"));
        return std::nullopt;
      }
      wrapped.insert(w);
    }
    return std::vector<int64_t>(wrapped.begin(), wrapped.end());
  }

  // The value of `t` in the current scope, captured through the enclosing if blocks when it is an
  // outer tensor.
  StatusOr<int> Capture(Scope* s, Tensor* t) {
    if (t->scope == s) return t->value;
    if (!s->parent) return Violation("a tensor of a block used outside it");
    if (!s->captures_allowed)
      return Unsupported("a while block reads a tensor made outside it (only its arguments are supported)");
    JMP_ASSIGN_OR_RETURN(int outer, Capture(s->parent, t));
    for (const auto& [o, local] : s->captures)
      if (o == outer) return local;
    const int local = s->graph.AddValue(MpsType(t->type).dtype, t->type.shape);
    s->captures.emplace_back(outer, local);
    return local;
  }

  std::optional<std::vector<int>> Locals(const std::string& call, const Tensors& operands) {
    std::vector<int> ids;
    for (Tensor* t : operands) {
      auto v = Capture(stack_.back(), t);
      if (!v.ok()) {
        Record(Status(v.status().code(), v.status().message() + " (" + Describe(call, operands) + ")"));
        return std::nullopt;
      }
      ids.push_back(*v);
    }
    return ids;
  }

  int EmitLocal(OpKind kind, std::vector<int> inputs, mps::OpAttrs attrs, const mps::TensorType& out) {
    mps::Graph& g = stack_.back()->graph;
    const int v = g.AddValue(out.dtype, out.shape);
    mps::Op op{kind, std::move(inputs), {v}, std::move(attrs), {}, "stand-in"};
    g.ops.push_back(std::move(op));
    return v;
  }

  // NumPy's broadcast made explicit, as the host's ops take operands of one shape.
  int BroadcastLocal(int value, const ShapedType& from, const Shape& to) {
    if (from.shape == to) return value;
    const DType d = MpsType(from).dtype;
    if (from.shape.size() < to.size()) {
      Shape padded(to.size() - from.shape.size(), 1);
      padded.insert(padded.end(), from.shape.begin(), from.shape.end());
      value = EmitLocal(OpKind::kReshape, {value}, mps::NoAttrs{}, {d, padded});
      if (padded == to) return value;
    }
    return EmitLocal(OpKind::kBroadcast, {value}, mps::NoAttrs{}, {d, to});
  }

  int Int32Indices(int value, const ShapedType& type) {
    if (type.dataType == DataType::kInt32) return value;
    return EmitLocal(OpKind::kCast, {value}, mps::NoAttrs{}, {DType::kI32, type.shape});
  }

  Tensors Emit(const std::string& call, OpKind kind, const std::vector<int>& inputs, mps::OpAttrs attrs,
               const std::vector<ShapedType>& outs) {
    for (const ShapedType& o : outs)
      if (!CheckNewType(call, {}, o)) {
        Tensors r;
        for (const ShapedType& p : outs) r.push_back(Poison(p));
        return r;
      }
    mps::Graph& g = stack_.back()->graph;
    mps::Op op{kind, inputs, {}, std::move(attrs), {}, "stand-in"};
    Tensors r;
    for (const ShapedType& o : outs) {
      op.outputs.push_back(g.AddValue(MpsType(o).dtype, o.shape));
      r.push_back(NewTensor(stack_.back(), op.outputs.back(), o));
    }
    g.ops.push_back(std::move(op));
    return r;
  }

  Tensor* EmitOne(const std::string& call, OpKind kind, const Tensors& operands, mps::OpAttrs attrs,
                  const ShapedType& out) {
    auto in = Locals(call, operands);
    if (!in) return Poison(out);
    return Emit(call, kind, *in, std::move(attrs), {out})[0];
  }

  Tensor* EmitBroadcast(const std::string& call, OpKind kind, const Tensors& operands, const ShapedType& out) {
    if (!CheckNewType(call, operands, out)) return Poison(out);
    auto in = Locals(call, operands);
    if (!in) return Poison(out);
    std::vector<int> ids;
    for (size_t i = 0; i < operands.size(); ++i) ids.push_back(BroadcastLocal((*in)[i], operands[i]->type, out.shape));
    return Emit(call, kind, ids, mps::NoAttrs{}, {out})[0];
  }

  Tensor* Unary(const std::string& selector, OpKind kind, Tensor* t) {
    const std::string call = selector + ":";
    if (!Usable(call, {t})) return Poison({ShapeOf(t), TypeOf(t)});
    DataType out = t->type.dataType;
    if (ReturnsBool(kind)) out = DataType::kBool;
    if (kind == OpKind::kRealPart || kind == OpKind::kImaginaryPart) out = RealPartType(out);
    if (!CheckAccepted(selector, call, {t})) return Poison({t->type.shape, out});
    return EmitOne(call, kind, {t}, mps::NoAttrs{}, {t->type.shape, out});
  }

  Tensor* Binary(const std::string& selector, OpKind kind, Tensor* a, Tensor* b) {
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

  Tensor* Reduction(const std::string& selector, OpKind kind, Tensor* t, const Shape& axes) {
    const std::string call = selector + ":axes:";
    if (!Usable(call, {t})) return Poison({ShapeOf(t), TypeOf(t)});
    auto wrapped = WrapAxes(call, t, axes);
    if (!wrapped) return Poison(t->type);
    Shape out = t->type.shape;
    for (int64_t a : *wrapped) out[static_cast<size_t>(a)] = 1;  // MPSGraph keeps reduced axes as 1
    if (!CheckAccepted(selector, call, {t})) return Poison({out, t->type.dataType});
    return EmitOne(call, kind, {t}, mps::AxesAttrs{*wrapped}, {out, t->type.dataType});
  }

  Tensor* ArgReduction(const std::string& call, OpKind kind, Tensor* t, int64_t axis) {
    if (!Usable(call, {t})) return Poison({ShapeOf(t), DataType::kInt32});
    const int64_t a = WrapAxis(axis, t->type.shape.size());
    if (a < 0) return Reject(call, {t}, "axis " + std::to_string(axis) + " outside the rank", t->type);
    Shape out = t->type.shape;
    out[static_cast<size_t>(a)] = 1;
    return EmitOne(call, kind, {t}, mps::AxisAttrs{a}, {out, DataType::kInt32});
  }

  Tensor* Sort(const std::string& selector, OpKind kind, Tensor* t, int64_t axis, bool descending) {
    const std::string call = selector + ":axis:descending:";
    if (!Usable(call, {t})) return Poison({ShapeOf(t), TypeOf(t)});
    const DataType out = kind == OpKind::kArgSort ? DataType::kInt32 : t->type.dataType;
    if (!CheckAccepted(selector, call, {t})) return Poison({t->type.shape, out});
    const int64_t a = WrapAxis(axis, t->type.shape.size());
    if (a < 0) return Reject(call, {t}, "axis " + std::to_string(axis) + " outside the rank", t->type);
    return EmitOne(call, kind, {t}, mps::SortAttrs{a, descending}, {t->type.shape, out});
  }

  Tensor* Cumulative(const std::string& selector, OpKind kind, Tensor* t, int64_t axis, bool exclusive, bool reverse) {
    const std::string call = selector + ":axis:exclusive:reverse:";
    if (!Usable(call, {t})) return Poison({ShapeOf(t), TypeOf(t)});
    const int64_t a = WrapAxis(axis, t->type.shape.size());
    if (a < 0) return Reject(call, {t}, "axis " + std::to_string(axis) + " outside the rank", t->type);
    return EmitOne(call, kind, {t}, mps::CumulativeAttrs{a, exclusive, reverse}, t->type);
  }

  Tensor* Pool(const std::string& selector, OpKind kind, const Tensors& operands,
               const metal::Pooling4DOpDescriptor& d) {
    const std::string call = selector + (operands.size() == 2 ? ":sourceTensor:descriptor:" : ":descriptor:");
    if (!Usable(call, operands)) return Poison({ShapeOf(operands.back()), TypeOf(operands.back())});
    if (!CheckAccepted(selector, call, operands)) return Poison(operands.back()->type);
    Tensor* source = operands.back();
    const Shape& s = source->type.shape;
    if (s.size() != 4) return Reject(call, operands, "a source of rank other than 4", source->type);
    if (d.kernelSizes.size() != 4 || d.strides.size() != 4 || d.dilationRates.size() != 4 ||
        d.paddingValues.size() != 8)
      return Reject(call, operands, "kernelSizes, strides and dilationRates need 4 entries, paddingValues 8",
                    source->type);
    if (d.paddingStyle != metal::PaddingStyle::kExplicit)
      return Unsupport(call, operands, "implicit padding", source->type);
    for (int64_t r : d.dilationRates)
      if (r != 1) return Unsupport(call, operands, "dilation rates other than 1", source->type);
    if (kind == OpKind::kAvgPool4D && !d.includeZeroPadToAverage)
      return Unsupport(call, operands, "an average that leaves padding out (includeZeroPadToAverage NO)", source->type);
    mps::Pool4DAttrs a;
    Shape out;
    for (size_t i = 0; i < 4; ++i) {
      const int64_t lo = d.paddingValues[2 * i], hi = d.paddingValues[2 * i + 1];
      if (d.kernelSizes[i] <= 0 || d.strides[i] <= 0 || lo < 0 || hi < 0)
        return Reject(call, operands, "a kernel size or stride below 1, or negative padding", source->type);
      const int64_t padded = s[i] + lo + hi;
      out.push_back(padded < d.kernelSizes[i] ? 0 : (padded - d.kernelSizes[i]) / d.strides[i] + 1);
      a.window.push_back(d.kernelSizes[i]);
      a.strides.push_back(d.strides[i]);
      a.pad_low.push_back(lo);
      a.pad_high.push_back(hi);
    }
    if (kind == OpKind::kMaxPool4DGradient) {
      if (operands[0]->type.shape != out || operands[0]->type.dataType != source->type.dataType)
        return Reject(call, operands, "the gradient must have the pooled shape " + Join(out) + " and the source's type",
                      source->type);
      return EmitOne(call, kind, operands, std::move(a), source->type);
    }
    return EmitOne(call, kind, operands, std::move(a), {out, source->type.dataType});
  }

  Scope* OpenScope(bool captures_allowed) {
    scopes_.push_back(std::make_unique<Scope>());
    Scope* s = scopes_.back().get();
    s->parent = stack_.back();
    s->captures_allowed = captures_allowed;
    return s;
  }

  std::deque<std::unique_ptr<Scope>> scopes_;
  std::set<const Scope*> owned_;
  std::vector<Scope*> stack_;
  std::deque<std::unique_ptr<Tensor>> tensors_;
  Status first_error_;
};

Tensors StandinGraph::whileWithInitialInputs(const Tensors& initial, const WhileBeforeBlock& before,
                                             const WhileAfterBlock& after) {
  const std::string call = "whileWithInitialInputs:before:after:";
  auto poisons = [&] {
    Tensors r;
    for (Tensor* t : initial) r.push_back(Poison({ShapeOf(t), TypeOf(t)}));
    return r;
  };
  if (initial.empty()) {
    Record(Violation(call + ": no initial inputs"));
    return {};
  }
  if (!Usable(call, initial)) return poisons();
  auto in = Locals(call, initial);
  if (!in) return poisons();
  auto block_args = [&](Scope* s) {
    Tensors args;
    for (Tensor* t : initial) {
      const int v = s->graph.AddValue(MpsType(t->type).dtype, t->type.shape);
      s->graph.inputs.push_back(v);
      args.push_back(NewTensor(s, v, t->type));
    }
    return args;
  };
  // before: the loop's values in, the predicate and what `after` gets out.
  Scope* cond = OpenScope(false);
  const Tensors cond_args = block_args(cond);
  stack_.push_back(cond);
  Tensors forwarded;
  Tensor* predicate = before(cond_args, forwarded);
  bool ok = Usable(call + " (before block)", {predicate}) && Usable(call + " (before block)", forwarded);
  if (ok && (predicate->type.dataType != DataType::kBool || ElementCount(predicate->type.shape) != 1)) {
    Record(Violation(Describe(call, {predicate}) + ": the before block's predicate must be a bool of one element"));
    ok = false;
  }
  if (ok && forwarded.size() != initial.size()) {
    Record(Violation(call + ": the before block's resultTensors count " + std::to_string(forwarded.size()) +
                     " differs from the initial inputs' " + std::to_string(initial.size())));
    ok = false;
  }
  for (size_t i = 0; ok && i < forwarded.size(); ++i) {
    if (forwarded[i]->type.shape != initial[i]->type.shape ||
        forwarded[i]->type.dataType != initial[i]->type.dataType) {
      Record(Violation(Describe(call, {forwarded[i], initial[i]}) + ": before block result " + std::to_string(i) +
                       " differs in type from the initial input"));
      ok = false;
    } else if (forwarded[i] != cond_args[i]) {
      Record(Unsupported(call + ": a before block whose resultTensors are not its arguments, in order"));
      ok = false;
    }
  }
  if (ok) {
    auto p = Capture(cond, predicate);
    if (!p.ok()) {
      Record(p.status());
      ok = false;
    } else {
      // The host's While wants a bool scalar.
      const int scalar =
          predicate->type.shape.empty() ? *p : EmitLocal(OpKind::kReshape, {*p}, mps::NoAttrs{}, {DType::kBool, {}});
      cond->graph.outputs = {scalar};
    }
  }
  stack_.pop_back();
  cond->open = false;
  if (!ok) return poisons();

  Scope* body = OpenScope(false);
  const Tensors body_args = block_args(body);
  stack_.push_back(body);
  const Tensors next = after(body_args);
  ok = Usable(call + " (after block)", next);
  if (ok && next.size() != initial.size()) {
    Record(Violation(call + ": the after block returns " + std::to_string(next.size()) + " tensors for " +
                     std::to_string(initial.size()) + " loop values"));
    ok = false;
  }
  for (size_t i = 0; ok && i < next.size(); ++i) {
    if (next[i]->type.shape != initial[i]->type.shape || next[i]->type.dataType != initial[i]->type.dataType) {
      Record(Violation(Describe(call, {next[i], initial[i]}) + ": after block result " + std::to_string(i) +
                       " differs in type from the loop value"));
      ok = false;
      break;
    }
    auto v = Capture(body, next[i]);
    if (!v.ok()) {
      Record(v.status());
      ok = false;
    } else {
      body->graph.outputs.push_back(*v);
    }
  }
  stack_.pop_back();
  body->open = false;
  if (!ok) return poisons();

  mps::Graph& g = stack_.back()->graph;
  mps::Op op{OpKind::kWhile, *in, {}, mps::NoAttrs{}, {}, "stand-in"};
  op.subgraphs.push_back(std::move(cond->graph));
  op.subgraphs.push_back(std::move(body->graph));
  Tensors results;
  for (Tensor* t : initial) {
    op.outputs.push_back(g.AddValue(MpsType(t->type).dtype, t->type.shape));
    results.push_back(NewTensor(stack_.back(), op.outputs.back(), t->type));
  }
  g.ops.push_back(std::move(op));
  return results;
}

Tensors StandinGraph::ifWithPredicateTensor(Tensor* predicate, const IfBlock& thenBlock, const IfBlock& elseBlock) {
  const std::string call = "ifWithPredicateTensor:thenBlock:elseBlock:";
  if (!Usable(call, {predicate})) return {};
  bool ok = true;
  if (predicate->type.dataType != DataType::kBool || ElementCount(predicate->type.shape) != 1) {
    Record(Violation(Describe(call, {predicate}) + ": the predicate must be a bool of one element"));
    ok = false;
  }
  auto in = Locals(call, {predicate});
  if (!in) ok = false;
  Scope* branches[2] = {OpenScope(true), OpenScope(true)};
  Tensors results[2];
  for (int b = 0; b < 2; ++b) {
    stack_.push_back(branches[b]);
    results[b] = b == 0 ? thenBlock() : elseBlock();
    if (!Usable(call + (b == 0 ? " (then block)" : " (else block)"), results[b])) ok = false;
    for (size_t i = 0; ok && i < results[b].size(); ++i) {
      auto v = Capture(branches[b], results[b][i]);
      if (!v.ok()) {
        Record(v.status());
        ok = false;
      } else {
        branches[b]->graph.outputs.push_back(*v);
      }
    }
    stack_.pop_back();
    branches[b]->open = false;
  }
  if (ok && results[0].size() != results[1].size()) {
    Record(Violation(call + ": the then block returns " + std::to_string(results[0].size()) +
                     " tensors and the else block " + std::to_string(results[1].size()) + " (they must be alike)"));
    ok = false;
  }
  for (size_t i = 0; ok && i < results[0].size(); ++i)
    if (results[0][i]->type.shape != results[1][i]->type.shape ||
        results[0][i]->type.dataType != results[1][i]->type.dataType) {
      Record(Violation(Describe(call, {results[0][i], results[1][i]}) + ": result " + std::to_string(i) +
                       " differs in type between the blocks"));
      ok = false;
    }
  if (!ok) {
    Tensors r;
    for (Tensor* t : results[0]) r.push_back(Poison(t ? t->type : ShapedType{{1}, DataType::kFloat32}));
    return r;
  }
  // The If's operands: every outer value either block captured; each block takes all of them.
  std::vector<int> operands;
  for (Scope* s : branches)
    for (const auto& [outer, local] : s->captures)
      if (std::find(operands.begin(), operands.end(), outer) == operands.end()) operands.push_back(outer);
  mps::Graph& g = stack_.back()->graph;
  for (Scope* s : branches)
    for (int outer : operands) {
      int local = -1;
      for (const auto& [o, l] : s->captures)
        if (o == outer) local = l;
      if (local < 0) local = s->graph.AddValue(g.type(outer).dtype, g.type(outer).shape);
      s->graph.inputs.push_back(local);
    }
  const int pred = predicate->type.shape.empty()
                       ? (*in)[0]
                       : EmitLocal(OpKind::kReshape, {(*in)[0]}, mps::NoAttrs{}, {DType::kBool, {}});
  mps::Op op{OpKind::kIf, {pred}, {}, mps::NoAttrs{}, {}, "stand-in"};
  op.inputs.insert(op.inputs.end(), operands.begin(), operands.end());
  op.subgraphs.push_back(std::move(branches[0]->graph));
  op.subgraphs.push_back(std::move(branches[1]->graph));
  Tensors r;
  for (Tensor* t : results[0]) {
    op.outputs.push_back(g.AddValue(MpsType(t->type).dtype, t->type.shape));
    r.push_back(NewTensor(stack_.back(), op.outputs.back(), t->type));
  }
  g.ops.push_back(std::move(op));
  return r;
}

// The ops the targets need, in order; everything else MPSGraph would not compile either.
mps::Graph Prune(const mps::Graph& g) {
  std::vector<bool> needed(g.values.size(), false);
  for (int v : g.outputs) needed[static_cast<size_t>(v)] = true;
  std::vector<bool> keep(g.ops.size(), false);
  for (size_t i = g.ops.size(); i-- > 0;) {
    const mps::Op& op = g.ops[i];
    for (int o : op.outputs) keep[i] = keep[i] || needed[static_cast<size_t>(o)];
    if (keep[i])
      for (int v : op.inputs) needed[static_cast<size_t>(v)] = true;
  }
  mps::Graph r;
  r.values = g.values;
  r.inputs = g.inputs;
  r.outputs = g.outputs;
  for (size_t i = 0; i < g.ops.size(); ++i)
    if (keep[i]) r.ops.push_back(g.ops[i]);
  return r;
}

StatusOr<std::unique_ptr<metal::GraphExecutable>> StandinGraph::compileWithDevice(
    metal::Device&, const std::vector<std::pair<Tensor*, ShapedType>>& feeds, const Tensors& targets) {
  const std::string call = "compileWithDevice:feeds:targetTensors:targetOperations:compilationDescriptor:";
  if (!first_error_.ok()) return first_error_;
  if (stack_.size() != 1) return Violation(call + ": called inside a control-flow block");
  if (targets.empty()) return Violation(call + ": no target tensors");
  Scope* root = stack_[0];
  std::vector<Tensor*> fed;
  for (const auto& [t, type] : feeds) {
    if (!t || !t->placeholder || t->scope != root)
      return Violation(call + ": a feed that is not a placeholder of this graph");
    if (std::find(fed.begin(), fed.end(), t) != fed.end()) return Violation(call + ": a placeholder fed twice");
    if (type.shape != t->type.shape || type.dataType != t->type.dataType)
      return Violation(call + ": a feed's shaped type " + TypeString(type) + " differs from its placeholder's " +
                       TypeString(t->type));
    fed.push_back(t);
  }
  for (Tensor* t : targets) {
    if (!Usable(call, {t})) return first_error_.ok() ? Violation(call + ": an unusable target") : first_error_;
    if (t->scope != root) return Violation(call + ": a target tensor made inside a control-flow block");
  }
  // The executable's feed order: a dictionary has none, so it is a permutation of the order given,
  // deterministic and different from it whenever there are two feeds or more.
  std::vector<Tensor*> order = fed;
  if (order.size() >= 2) std::rotate(order.begin(), order.begin() + 1, order.end());
  Program program;
  program.graph = root->graph;
  for (Tensor* t : order) {
    program.graph.inputs.push_back(t->value);
    program.feeds.push_back(t->type);
  }
  for (Tensor* t : targets) {
    program.graph.outputs.push_back(t->value);
    program.targets.push_back(t->type);
  }
  program.graph = Prune(program.graph);
  // A placeholder the targets read must be fed.
  std::vector<bool> produced(program.graph.values.size(), false);
  for (int v : program.graph.inputs) produced[static_cast<size_t>(v)] = true;
  for (const mps::Op& op : program.graph.ops)
    for (int o : op.outputs) produced[static_cast<size_t>(o)] = true;
  for (const mps::Op& op : program.graph.ops)
    for (int v : op.inputs)
      if (!produced[static_cast<size_t>(v)])
        return Violation(call + ": a placeholder " + program.graph.type(v).ToString() +
                         " that the targets read is not among the feeds");
  for (int v : program.graph.outputs)
    if (!produced[static_cast<size_t>(v)]) return Violation(call + ": a target placeholder that is not fed");
  return MakeExecutable(std::move(program), Tensors(order.begin(), order.end()), targets);
}

}  // namespace

std::unique_ptr<metal::Graph> NewStandinGraph() { return std::make_unique<StandinGraph>(); }

}  // namespace jmp::exec::standin
