// The stand-in's type rules for placeholders, constants, casts and layout (reshape, transpose,
// broadcast, slice, concat, pad, reverse).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "exec/standin/standin_graph.h"
#include "support/dtype.h"

namespace jmp::exec::standin {

Tensor* StandinGraph::placeholderWithShape(const Shape& shape, DataType dt) {
  const std::string call = "placeholderWithShape:dataType:";
  if (stack_.size() != 1) return Reject(call, {}, "a placeholder made inside a control-flow block", {shape, dt});
  if (!CheckNewType(call, {}, {shape, dt})) return Poison({shape, dt});
  Scope* s = stack_.back();
  Tensor* t = NewTensor(s, s->graph.AddValue(MpsType({shape, dt}).dtype, shape), {shape, dt});
  t->placeholder = true;
  return t;
}

Tensor* StandinGraph::constantWithData(const void* data, size_t length, const Shape& shape, DataType dt) {
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

Tensor* StandinGraph::constantWithScalar(double scalar, const Shape& shape, DataType dt) {
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
  const int value = shape == ones ? cast : EmitLocal(OpKind::kBroadcast, {cast}, mps::NoAttrs{}, MpsType({shape, dt}));
  return NewTensor(s, value, {shape, dt});
}

Tensor* StandinGraph::coordinateAlongAxis(int64_t axis, const Shape& shape) {
  const std::string call = "coordinateAlongAxis:withShape:";
  const ShapedType out{shape, DataType::kInt32};
  if (!CheckNewType(call, {}, out)) return Poison(out);
  const int64_t a = WrapAxis(axis, shape.size());
  if (a < 0) return Reject(call, {}, "axis " + std::to_string(axis) + " outside shape " + Join(shape), out);
  return EmitOne(call, OpKind::kCoordinateAlongAxis, {}, mps::AxisAttrs{a}, out);
}

Tensor* StandinGraph::castTensor(Tensor* t, DataType to) {
  const std::string call = "castTensor:toType:";
  if (!Usable(call, {t})) return Poison({ShapeOf(t), to});
  const ShapedType out{t->type.shape, to};
  if (!CheckNewType(call, {t}, out)) return Poison(out);
  return EmitOne(call, OpKind::kCast, {t}, mps::NoAttrs{}, out);
}

Tensor* StandinGraph::reinterpretCastTensor(Tensor* t, DataType to) {
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

Tensor* StandinGraph::reshapeTensor(Tensor* t, const Shape& shape) {
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

Tensor* StandinGraph::transposeTensor(Tensor* t, const Shape& permutation) {
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

Tensor* StandinGraph::broadcastTensor(Tensor* t, const Shape& shape) {
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

Tensor* StandinGraph::sliceTensor(Tensor* t, const Shape& starts, const Shape& ends, const Shape& strides) {
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

Tensor* StandinGraph::concatTensors(const Tensors& tensors, int64_t dimension) {
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

Tensor* StandinGraph::padTensor(Tensor* t, metal::PaddingMode mode, const Shape& left, const Shape& right,
                                double value) {
  const std::string call = "padTensor:withPaddingMode:leftPadding:rightPadding:constantValue:";
  if (!Usable(call, {t})) return Poison({ShapeOf(t), TypeOf(t)});
  const size_t rank = t->type.shape.size();
  if (mode != metal::PaddingMode::kConstant) return Unsupport(call, {t}, "a padding mode other than constant", t->type);
  if (left.size() != rank || right.size() != rank)
    return Reject(call, {t}, "leftPadding and rightPadding need one entry per dimension", t->type);
  Shape out;
  for (size_t i = 0; i < rank; ++i) {
    if (left[i] < 0 || right[i] < 0) return Unsupport(call, {t}, "negative padding", t->type);
    out.push_back(t->type.shape[i] + left[i] + right[i]);
  }
  return EmitOne(call, OpKind::kPad, {t}, mps::PadAttrs{left, right, value}, {out, t->type.dataType});
}

Tensor* StandinGraph::reverseTensor(Tensor* t, const Shape& axes) {
  const std::string call = "reverseTensor:axes:";
  if (!Usable(call, {t})) return Poison({ShapeOf(t), TypeOf(t)});
  auto wrapped = WrapAxes(call, t, axes);
  if (!wrapped) return Poison(t->type);
  if (wrapped->size() != axes.size()) return Reject(call, {t}, "axes " + Join(axes) + " are not unique", t->type);
  return EmitOne(call, OpKind::kReverse, {t}, mps::AxesAttrs{*wrapped}, t->type);
}

}  // namespace jmp::exec::standin
