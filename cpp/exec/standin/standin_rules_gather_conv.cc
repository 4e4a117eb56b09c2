// The stand-in's type rules for gathers, scatters, convolution and pooling.
#include <cstdint>
#include <string>
#include <utility>

#include "exec/standin/standin_dtypes.h"
#include "exec/standin/standin_graph.h"

namespace jmp::exec::standin {

Tensor* StandinGraph::gatherAlongAxis(int64_t axis, Tensor* updates, Tensor* indices) {
  const std::string call = "gatherAlongAxis:withUpdatesTensor:indicesTensor:";
  if (!Usable(call, {updates, indices})) return Poison({ShapeOf(indices), TypeOf(updates)});
  const ShapedType out{indices->type.shape, updates->type.dataType};
  if (!CheckIndices(call, {updates, indices}, indices, AlongAxisIndexTypes())) return Poison(out);
  const int64_t a = WrapAxis(axis, updates->type.shape.size());
  if (a < 0 || !SameExceptAxis(updates->type.shape, indices->type.shape, a))
    return Reject(call, {updates, indices},
                  "axis " + std::to_string(axis) + ": updates and indices must match in rank and except at axis", out);
  auto in = Locals(call, {updates, indices});
  if (!in) return Poison(out);
  return Emit(call, OpKind::kGatherAlongAxis, {(*in)[0], Int32Indices((*in)[1], indices->type)}, mps::AxisAttrs{a},
              {out})[0];
}

Tensor* StandinGraph::gatherNDWithUpdatesTensor(Tensor* updates, Tensor* indices, uint64_t batch) {
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

Tensor* StandinGraph::scatterNDWithDataTensor(Tensor* data, Tensor* updates, Tensor* indices, uint64_t batch,
                                              metal::ScatterMode mode) {
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

Tensor* StandinGraph::scatterAlongAxis(int64_t axis, Tensor* data, Tensor* updates, Tensor* indices,
                                       metal::ScatterMode mode) {
  const std::string call = "scatterAlongAxis:withDataTensor:updatesTensor:indicesTensor:mode:";
  if (!Usable(call, {data, updates, indices})) return Poison({ShapeOf(data), TypeOf(data)});
  const Tensors ops{data, updates, indices};
  if (!CheckIndices(call, ops, indices, AlongAxisIndexTypes())) return Poison(data->type);
  if (updates->type.dataType != data->type.dataType)
    return Reject(call, ops, "updates and data differ in data type", data->type);
  auto m = ScatterModeOf(mode);
  if (!m) return Reject(call, ops, "an unknown scatter mode", data->type);
  const int64_t a = WrapAxis(axis, data->type.shape.size());
  if (updates->type.shape != indices->type.shape || a < 0 || !SameExceptAxis(data->type.shape, updates->type.shape, a))
    return Reject(
        call, ops,
        "axis " + std::to_string(axis) + ": updates and indices must have one shape, data the same except at axis",
        data->type);
  auto in = Locals(call, ops);
  if (!in) return Poison(data->type);
  return Emit(call, OpKind::kScatterAlongAxis, {(*in)[0], (*in)[1], Int32Indices((*in)[2], indices->type)},
              mps::ScatterAttrs{*m, a}, {data->type})[0];
}

Tensor* StandinGraph::convolution2DWithSourceTensor(Tensor* x, Tensor* w, const metal::Convolution2DOpDescriptor& d) {
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

Tensor* StandinGraph::maxPooling4DWithSourceTensor(Tensor* t, const metal::Pooling4DOpDescriptor& d) {
  return Pool("maxPooling4DWithSourceTensor", OpKind::kMaxPool4D, {t}, d);
}

Tensor* StandinGraph::avgPooling4DWithSourceTensor(Tensor* t, const metal::Pooling4DOpDescriptor& d) {
  return Pool("avgPooling4DWithSourceTensor", OpKind::kAvgPool4D, {t}, d);
}

Tensor* StandinGraph::maxPooling4DGradientWithGradientTensor(Tensor* gradient, Tensor* source,
                                                             const metal::Pooling4DOpDescriptor& d) {
  return Pool("maxPooling4DGradientWithGradientTensor", OpKind::kMaxPool4DGradient, {gradient, source}, d);
}

Tensor* StandinGraph::Pool(const std::string& selector, OpKind kind, const Tensors& operands,
                           const metal::Pooling4DOpDescriptor& d) {
  const std::string call = selector + (operands.size() == 2 ? ":sourceTensor:descriptor:" : ":descriptor:");
  if (!Usable(call, operands)) return Poison({ShapeOf(operands.back()), TypeOf(operands.back())});
  if (!CheckAccepted(selector, call, operands)) return Poison(operands.back()->type);
  Tensor* source = operands.back();
  const Shape& s = source->type.shape;
  if (s.size() != 4) return Reject(call, operands, "a source of rank other than 4", source->type);
  if (d.kernelSizes.size() != 4 || d.strides.size() != 4 || d.dilationRates.size() != 4 || d.paddingValues.size() != 8)
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

}  // namespace jmp::exec::standin
