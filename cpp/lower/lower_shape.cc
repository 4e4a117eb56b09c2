// Constants, iota and the shape ops. broadcast_in_dim becomes transpose + reshape + broadcast;
// interior and negative padding become reshape/pad/slice idioms MPSGraph has.
#include <cstring>

#include "lower/lower_families.h"
#include "support/float16.h"

namespace jmp::mps {

namespace {

Status Constant(LowerContext& cx) {
  const shlo::Attr* value = cx.op().Find("value");
  if (!value || value->kind != shlo::Attr::Kind::kTensor) return cx.Unsupported("constant without a dense value");
  const shlo::Type& t = cx.OutType(0);
  size_t width = ByteSize(t.dtype);
  size_t count = static_cast<size_t>(t.NumElements());
  if (value->splat && value->data.size() == width && count > 0) {
    int scalar = cx.ConstantData(t.dtype, {}, value->data);
    if (!IsComplex(t.dtype)) cx.RecordSplat(scalar, DecodeScalar(t.dtype, value->data.data()));
    cx.Bind(0, cx.BroadcastTo(scalar, t.shape));
    return Status::Ok();
  }
  if (value->data.size() != count * width)
    return cx.Unsupported("constant has " + std::to_string(value->data.size()) + " bytes, its type needs " +
                          std::to_string(count * width));
  bool splat = count > 0;
  for (size_t i = 1; i < count && splat; ++i)
    splat = std::memcmp(value->data.data(), value->data.data() + i * width, width) == 0;
  if (splat && (count > 1 || t.shape.empty())) {
    std::vector<uint8_t> one(value->data.begin(), value->data.begin() + static_cast<ptrdiff_t>(width));
    int scalar = cx.ConstantData(t.dtype, {}, std::move(one));
    if (!IsComplex(t.dtype)) cx.RecordSplat(scalar, DecodeScalar(t.dtype, value->data.data()));
    cx.Bind(0, cx.BroadcastTo(scalar, t.shape));
    return Status::Ok();
  }
  cx.Bind(0, cx.ConstantData(t.dtype, t.shape, value->data));
  return Status::Ok();
}

Status Iota(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int64_t axis, cx.IntAttr("iota_dimension"));
  const shlo::Type& t = cx.OutType(0);
  if (axis < 0 || axis >= static_cast<int64_t>(t.shape.size())) return cx.Unsupported("iota_dimension out of range");
  if (t.dtype == DType::kC128) return cx.Unsupported("iota of this type");
  DType index = t.shape[static_cast<size_t>(axis)] > (int64_t{1} << 31) - 1 ? DType::kI64 : DType::kI32;
  int coordinates = cx.Emit(OpKind::kCoordinateAlongAxis, {}, index, t.shape, AxisAttrs{axis});
  int v;
  if (t.dtype == DType::kC64) {  // the real part counts, the imaginary part is zero
    int real = cx.Cast(coordinates, DType::kF32);
    v = cx.Emit(OpKind::kComplexFromParts, {real, cx.Splat(DType::kF32, t.shape, 0)}, DType::kC64, t.shape);
  } else {
    v = cx.Cast(coordinates, t.dtype);  // bool: x != 0, as XLA converts
  }
  cx.MarkIota(v, axis);
  cx.Bind(0, v);
  return Status::Ok();
}

Status BroadcastInDim(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int x, cx.In(0));
  JMP_ASSIGN_OR_RETURN(std::vector<int64_t> dims, cx.IntsAttr("broadcast_dimensions"));
  const Shape& out = cx.OutType(0).shape;
  // Scalar to scalar, as in a body lowered inline on lanes (where the operand is a lane tensor).
  if (out.empty() && cx.InType(0).shape.empty() && dims.empty()) {
    cx.Bind(0, x);
    return Status::Ok();
  }
  const Shape in = cx.ShapeOf(x);
  if (dims.size() != in.size()) return cx.Unsupported("broadcast_dimensions does not match the operand rank");
  // Put the operand's dims in the order they take in the result, then give the result's rank.
  std::vector<int64_t> order(dims.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return dims[a] < dims[b]; });
  x = cx.Transpose(x, order);
  Shape expanded(out.size(), 1);
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0 || dims[i] >= static_cast<int64_t>(out.size()))
      return cx.Unsupported("broadcast dimension out of range");
    expanded[static_cast<size_t>(dims[i])] = in[i];
  }
  x = cx.Reshape(x, expanded);
  cx.Bind(0, cx.BroadcastTo(x, out));
  return Status::Ok();
}

Status ReshapeOp(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int x, cx.In(0));
  cx.Bind(0, cx.Reshape(x, cx.OutType(0).shape));
  return Status::Ok();
}

Status TransposeOp(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int x, cx.In(0));
  JMP_ASSIGN_OR_RETURN(std::vector<int64_t> perm, cx.IntsAttr("permutation"));
  cx.Bind(0, cx.Transpose(x, perm));
  return Status::Ok();
}

Status SliceOp(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int x, cx.In(0));
  JMP_ASSIGN_OR_RETURN(std::vector<int64_t> starts, cx.IntsAttr("start_indices"));
  JMP_ASSIGN_OR_RETURN(std::vector<int64_t> limits, cx.IntsAttr("limit_indices"));
  JMP_ASSIGN_OR_RETURN(std::vector<int64_t> strides, cx.IntsAttr("strides"));
  cx.Bind(0, cx.Slice(x, starts, limits, strides));
  return Status::Ok();
}

Status Concatenate(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int64_t dim, cx.IntAttr("dimension"));
  std::vector<int> inputs;
  for (size_t i = 0; i < cx.op().operands.size(); ++i) {
    if (cx.InType(i).shape.at(static_cast<size_t>(dim)) == 0) continue;
    JMP_ASSIGN_OR_RETURN(int v, cx.In(i));
    inputs.push_back(v);
  }
  const shlo::Type& t = cx.OutType(0);
  if (inputs.size() == 1) {
    cx.Bind(0, inputs[0]);
  } else if (inputs.empty()) {
    cx.Bind(0, cx.ConstantData(t.dtype, t.shape, {}));
  } else {
    cx.Bind(0, cx.Emit(OpKind::kConcat, inputs, t.dtype, t.shape, AxisAttrs{dim}));
  }
  return Status::Ok();
}

Status Reverse(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int x, cx.In(0));
  JMP_ASSIGN_OR_RETURN(std::vector<int64_t> dims, cx.IntsAttr("dimensions"));
  if (dims.empty()) {
    cx.Bind(0, x);
    return Status::Ok();
  }
  cx.Bind(0, cx.Emit(OpKind::kReverse, {x}, cx.DTypeOf(x), cx.ShapeOf(x), AxesAttrs{dims}));
  return Status::Ok();
}

// A constant-mode pad with non-negative edges and a value known at compile time, else pad with 0 and
// select the padding value through a mask.
int PadEdges(LowerContext& cx, int x, const Shape& low, const Shape& high, int value) {
  bool any = false;
  for (size_t i = 0; i < low.size(); ++i) any |= low[i] > 0 || high[i] > 0;
  if (!any) return x;
  Shape out = cx.ShapeOf(x);
  for (size_t i = 0; i < out.size(); ++i) out[i] += low[i] + high[i];
  double scalar = 0;
  bool known = cx.KnownSplat(value, &scalar);
  int padded = cx.Emit(OpKind::kPad, {x}, cx.DTypeOf(x), out, PadAttrs{low, high, known ? scalar : 0});
  if (known) return padded;
  int inside = cx.Splat(DType::kBool, cx.ShapeOf(x), 1);
  int mask = cx.Emit(OpKind::kPad, {inside}, DType::kBool, out, PadAttrs{low, high, 0});
  int fill = cx.BroadcastTo(value, out);
  return cx.Select(mask, padded, fill);
}

}  // namespace

StatusOr<int> PadGeneral(LowerContext& cx, int x, int value, const std::vector<int64_t>& low,
                         const std::vector<int64_t>& high, const std::vector<int64_t>& interior) {
  size_t rank = cx.ShapeOf(x).size();
  if (low.size() != rank || high.size() != rank || interior.size() != rank)
    return cx.Unsupported("padding rank mismatch");
  if (!Reasonable(low) || !Reasonable(high) || !Reasonable(interior)) return cx.Unsupported("padding out of range");
  // Interior padding, one dim at a time: [.., n, ..] -> [.., n, 1, ..] -> pad to [.., n, 1+k, ..]
  // -> [.., n*(1+k), ..] -> drop the trailing k.
  for (size_t d = 0; d < rank; ++d) {
    int64_t k = interior[d];
    if (k < 0) return cx.Unsupported("negative interior padding");
    int64_t n = cx.ShapeOf(x)[d];
    if (k == 0 || n <= 1) continue;
    Shape s = cx.ShapeOf(x);
    Shape split = s;
    split.insert(split.begin() + static_cast<ptrdiff_t>(d) + 1, 1);
    int y = cx.Reshape(x, split);
    Shape zero(split.size(), 0), after(split.size(), 0);
    after[d + 1] = k;
    y = PadEdges(cx, y, zero, after, value);
    Shape merged = s;
    merged[d] = n * (1 + k);
    y = cx.Reshape(y, merged);
    Shape starts(rank, 0), ends = merged;
    ends[d] = n + (n - 1) * k;
    x = cx.Slice(y, starts, ends);
  }
  // Positive edges pad; negative edges slice.
  Shape pos_low(rank), pos_high(rank);
  for (size_t d = 0; d < rank; ++d) {
    pos_low[d] = std::max<int64_t>(low[d], 0);
    pos_high[d] = std::max<int64_t>(high[d], 0);
  }
  x = PadEdges(cx, x, pos_low, pos_high, value);
  Shape s = cx.ShapeOf(x), starts(rank), ends(rank);
  for (size_t d = 0; d < rank; ++d) {
    starts[d] = low[d] < 0 ? -low[d] : 0;
    ends[d] = s[d] + (high[d] < 0 ? high[d] : 0);
  }
  return cx.Slice(x, starts, ends);
}

namespace {

Status PadOp(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int x, cx.In(0));
  JMP_ASSIGN_OR_RETURN(int value, cx.In(1));
  JMP_ASSIGN_OR_RETURN(std::vector<int64_t> low, cx.IntsAttr("edge_padding_low"));
  JMP_ASSIGN_OR_RETURN(std::vector<int64_t> high, cx.IntsAttr("edge_padding_high"));
  JMP_ASSIGN_OR_RETURN(std::vector<int64_t> interior, cx.IntsAttr("interior_padding"));
  JMP_ASSIGN_OR_RETURN(int y, PadGeneral(cx, x, value, low, high, interior));
  cx.Bind(0, y);
  return Status::Ok();
}

}  // namespace

// Values pass through unchanged (a barrier means nothing to a graph we compile whole).
Status PassThrough(LowerContext& cx) {
  for (size_t i = 0; i < cx.op().operands.size() && i < cx.op().results.size(); ++i) {
    JMP_ASSIGN_OR_RETURN(int v, cx.In(i));
    cx.Bind(i, v);
  }
  return Status::Ok();
}

void RegisterShapeRules(std::map<std::string, LowerRule>& r) {
  RegisterRule(r, "stablehlo.constant", &Constant);
  RegisterRule(r, "stablehlo.iota", &Iota);
  RegisterRule(r, "stablehlo.broadcast_in_dim", &BroadcastInDim);
  RegisterRule(r, "stablehlo.reshape", &ReshapeOp);
  RegisterRule(r, "stablehlo.transpose", &TransposeOp);
  RegisterRule(r, "stablehlo.slice", &SliceOp);
  RegisterRule(r, "stablehlo.concatenate", &Concatenate);
  RegisterRule(r, "stablehlo.reverse", &Reverse);
  RegisterRule(r, "stablehlo.pad", &PadOp);
  RegisterRule(r, "stablehlo.optimization_barrier", &PassThrough);
  RegisterRule(r, "builtin.unrealized_conversion_cast", &PassThrough);
  RegisterRule(r, "sdy.reshard", &PassThrough);
  // The pass-through custom-call targets (stablehlo/custom_calls.def). JAX's dce_sink keeps its operands
  // alive through XLA's dead-code elimination; it has no results, and this lowering removes nothing, so
  // it lowers to nothing.
#define JMP_PASS_THROUGH_TARGET(target) RegisterRule(r, "custom_call:" target, &PassThrough);
#include "stablehlo/custom_calls.def"
}

}  // namespace jmp::mps
