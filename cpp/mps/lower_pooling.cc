// reduce_window in general (pooling, and any window a scan doesn't cover): pad with the init value
// (base dilation as interior padding), then combine one strided slice per window offset — O(window
// size) MPS ops, exact for every monoid, padding, stride and dilation.
#include "mps/lower_families.h"
#include "mps/lower_window_common.h"

namespace jmp::mps {

StatusOr<WindowAttrs> ReadWindowAttrs(LowerContext& cx, size_t rank) {
  WindowAttrs w;
  auto get = [&](const char* name, std::vector<int64_t>* out, int64_t fill) -> Status {
    const shlo::Attr* a = cx.op().Find(name);
    if (a && a->kind == shlo::Attr::Kind::kInts && !a->ints.empty()) *out = a->ints;
    else out->assign(rank, fill);
    return Status::Ok();
  };
  JMP_RETURN_IF_ERROR(get("window_dimensions", &w.dims, 1));
  JMP_RETURN_IF_ERROR(get("window_strides", &w.strides, 1));
  JMP_RETURN_IF_ERROR(get("base_dilations", &w.base_dilations, 1));
  JMP_RETURN_IF_ERROR(get("window_dilations", &w.window_dilations, 1));
  std::vector<int64_t> padding;
  JMP_RETURN_IF_ERROR(get("padding", &padding, 0));
  if (padding.size() == rank) padding.assign(2 * rank, 0);
  if (w.dims.size() != rank || w.strides.size() != rank || w.base_dilations.size() != rank ||
      w.window_dilations.size() != rank || padding.size() != 2 * rank)
    return cx.Unsupported("reduce_window attributes do not match the operand rank");
  for (size_t d = 0; d < rank; ++d) {
    w.pad_low.push_back(padding[2 * d]);
    w.pad_high.push_back(padding[2 * d + 1]);
  }
  if (!Reasonable(w.dims) || !Reasonable(w.strides) || !Reasonable(w.base_dilations) || !Reasonable(w.window_dilations) ||
      !Reasonable(padding))
    return cx.Unsupported("reduce_window attributes out of range");
  return w;
}

std::string WindowMonoid(const shlo::Op& op) { return BlockMonoid(op.regions.size() == 1 ? &op.regions[0] : nullptr); }

std::string BlockMonoid(const shlo::Region* region) {
  if (!region || region->blocks.size() != 1) return "";
  const shlo::Block& b = region->blocks[0];
  if (b.args.size() != 2 || b.ops.size() != 2) return "";
  const shlo::Op& f = b.ops[0];
  const shlo::Op& ret = b.ops[1];
  if (f.operands.size() != 2 || f.results.size() != 1 || ret.operands.size() != 1 || ret.operands[0] != f.results[0])
    return "";
  bool args = (f.operands[0] == b.args[0] && f.operands[1] == b.args[1]) ||
              (f.operands[0] == b.args[1] && f.operands[1] == b.args[0]);
  return args ? f.name : "";
}

StatusOr<bool> TryLowerPooling(LowerContext& cx) {
  const shlo::Op& op = cx.op();
  if (op.operands.size() != 2) return cx.Unsupported("variadic reduce_window is not supported");
  JMP_ASSIGN_OR_RETURN(int x, cx.In(0));
  JMP_ASSIGN_OR_RETURN(int init, cx.In(1));
  const Shape shape = cx.ShapeOf(x);
  size_t rank = shape.size();
  JMP_ASSIGN_OR_RETURN(WindowAttrs w, ReadWindowAttrs(cx, rank));
  std::string monoid = WindowMonoid(op);
  DType t = cx.DTypeOf(x);
  OpKind combine;
  bool boolean = t == DType::kBool;
  if (monoid == "stablehlo.add") combine = boolean ? OpKind::kLogicalOr : OpKind::kAdd;
  else if (monoid == "stablehlo.multiply") combine = boolean ? OpKind::kLogicalAnd : OpKind::kMultiply;
  else if (monoid == "stablehlo.maximum") combine = boolean ? OpKind::kLogicalOr : OpKind::kMaximum;
  else if (monoid == "stablehlo.minimum") combine = boolean ? OpKind::kLogicalAnd : OpKind::kMinimum;
  else return cx.Unsupported("reduce_window body not recognised (" + monoid + ")");
  int64_t positions = 1;
  for (int64_t d : w.dims) positions *= d;
  if (positions > 4096) return cx.Unsupported("reduce_window with a window of more than 4096 elements");
  // Pad (with interior padding for base dilation) using the init value.
  Shape padded = shape;
  bool any_pad = false;
  for (size_t d = 0; d < rank; ++d) {
    if (w.pad_low[d] < 0 || w.pad_high[d] < 0 || w.base_dilations[d] < 1 || w.strides[d] < 1 || w.window_dilations[d] < 1)
      return cx.Unsupported("negative padding or non-positive strides in reduce_window");
    int64_t dilated = shape[d] == 0 ? 0 : (shape[d] - 1) * w.base_dilations[d] + 1;
    padded[d] = dilated + w.pad_low[d] + w.pad_high[d];
    any_pad |= padded[d] != shape[d];
  }
  int src = x;
  if (any_pad) {
    // Interior padding by reshape/pad/slice per dilated dim, then edge padding, all with `init`.
    for (size_t d = 0; d < rank; ++d) {
      int64_t k = w.base_dilations[d] - 1;
      Shape s = cx.ShapeOf(src);
      if (k == 0 || s[d] <= 1) continue;
      Shape split = s;
      split.insert(split.begin() + static_cast<ptrdiff_t>(d) + 1, 1);
      int y = cx.Reshape(src, split);
      Shape grown = split;
      grown[d + 1] = 1 + k;
      int fill = cx.BroadcastTo(init, grown);
      Shape lo(split.size(), 0), hi(split.size(), 0);
      hi[d + 1] = k;
      // Place y at offset 0 of the new axis: select between fill and the broadcast value.
      Op& p = cx.Emit(OpKind::kPad, {y}, t, grown);
      p.starts = lo;
      p.ends = hi;
      int yp = p.outputs[0];
      Op& m = cx.Emit(OpKind::kPad, {cx.Splat(DType::kBool, split, 1)}, DType::kBool, grown);
      m.starts = lo;
      m.ends = hi;
      int mask = m.outputs[0];
      y = cx.Select(mask, yp, fill);
      Shape merged = s;
      merged[d] = s[d] * (1 + k);
      y = cx.Reshape(y, merged);
      Shape starts(rank, 0), ends = merged;
      ends[d] = (s[d] - 1) * (1 + k) + 1;
      src = cx.Slice(y, starts, ends);
    }
    Shape s = cx.ShapeOf(src);
    Shape mask_shape = s;
    Op& p = cx.Emit(OpKind::kPad, {src}, t, padded);
    p.starts = w.pad_low;
    p.ends = w.pad_high;
    int xp = p.outputs[0];
    Op& m = cx.Emit(OpKind::kPad, {cx.Splat(DType::kBool, mask_shape, 1)}, DType::kBool, padded);
    m.starts = w.pad_low;
    m.ends = w.pad_high;
    int mask = m.outputs[0];
    src = cx.Select(mask, xp, cx.BroadcastTo(init, padded));
  }
  const Shape out = cx.OutType(0).shape;
  int acc = -1;
  std::vector<int64_t> offset(rank, 0);
  for (int64_t i = 0; i < positions; ++i) {
    int64_t rem = i;
    for (size_t d = rank; d-- > 0;) {
      offset[d] = rem % w.dims[d];
      rem /= w.dims[d];
    }
    Shape starts(rank), ends(rank);
    for (size_t d = 0; d < rank; ++d) {
      starts[d] = offset[d] * w.window_dilations[d];
      ends[d] = starts[d] + (out[d] - 1) * w.strides[d] + 1;
      if (out[d] == 0) ends[d] = starts[d];
    }
    int piece = cx.Slice(src, starts, ends, w.strides);
    acc = acc < 0 ? piece : cx.Binary(combine, acc, piece);
  }
  if (acc < 0 || positions == 0) acc = cx.BroadcastTo(init, out);
  double init_value;
  bool identity = cx.KnownSplat(init, &init_value) &&
                  ((monoid == "stablehlo.add" && init_value == 0) || (monoid == "stablehlo.multiply" && init_value == 1) ||
                   (monoid == "stablehlo.maximum" && init_value == LowestValue(t)) ||
                   (monoid == "stablehlo.minimum" && init_value == HighestValue(t)));
  if (!identity) acc = cx.Binary(combine, acc, cx.BroadcastTo(init, out));
  cx.Bind(0, acc);
  return true;
}

namespace {

// select_and_scatter (the max-pool gradient): per window, the element the select body picks (the
// first maximum for GE, as StableHLO iterates row-major), then each source value is added at its
// picked position: one strided slice per window offset to pick, one strided pad to place.
Status SelectAndScatter(LowerContext& cx) {
  const shlo::Op& op = cx.op();
  if (op.regions.size() != 2) return cx.Unsupported("select_and_scatter needs select and scatter bodies");
  JMP_ASSIGN_OR_RETURN(int x, cx.In(0));
  JMP_ASSIGN_OR_RETURN(int source, cx.In(1));
  JMP_ASSIGN_OR_RETURN(int init, cx.In(2));
  const shlo::Block& select = op.regions[0].blocks.at(0);
  const shlo::Op* cmp = select.ops.size() == 2 ? &select.ops[0] : nullptr;
  const shlo::Attr* dir = cmp ? cmp->Find("comparison_direction") : nullptr;
  if (!cmp || cmp->name != "stablehlo.compare" || !dir || cmp->operands.size() != 2 ||
      cmp->operands[0] != select.args[0] || cmp->operands[1] != select.args[1] || (dir->s != "GE" && dir->s != "LE"))
    return cx.Unsupported("select_and_scatter select body not recognised");
  std::string scatter = BlockMonoid(&op.regions[1]);
  if (scatter != "stablehlo.add") return cx.Unsupported("select_and_scatter scatter body not recognised");
  const Shape shape = cx.ShapeOf(x);
  const Shape sshape = cx.ShapeOf(source);
  size_t rank = shape.size();
  JMP_ASSIGN_OR_RETURN(WindowAttrs w, ReadWindowAttrs(cx, rank));
  DType t = cx.DTypeOf(x);
  if (!IsFloat(t) && !IsInteger(t)) return cx.Unsupported("select_and_scatter of this type");
  bool ge = dir->s == "GE";
  // Pad with a value the select never picks over a real element.
  std::vector<int64_t> zeros(rank, 0);
  int pad_value = cx.Scalar(t, ge ? LowestValue(t) : HighestValue(t));
  JMP_ASSIGN_OR_RETURN(int padded, PadGeneral(cx, x, pad_value, w.pad_low, w.pad_high, zeros));
  Shape pshape = cx.ShapeOf(padded);
  int64_t positions = 1;
  for (int64_t d : w.dims) positions *= d;
  if (positions > 4096) return cx.Unsupported("select_and_scatter with a window of more than 4096 elements");
  auto offset_of = [&](int64_t i) {
    std::vector<int64_t> off(rank);
    for (size_t d = rank; d-- > 0;) {
      off[d] = i % w.dims[d];
      i /= w.dims[d];
    }
    return off;
  };
  auto window_slice = [&](int64_t i) {
    std::vector<int64_t> off = offset_of(i);
    Shape starts(rank), ends(rank);
    for (size_t d = 0; d < rank; ++d) {
      starts[d] = off[d];
      ends[d] = off[d] + (sshape[d] - 1) * w.strides[d] + 1;
    }
    return cx.Slice(padded, starts, ends, w.strides);
  };
  int best = window_slice(0);
  int pick = cx.Splat(DType::kI32, sshape, 0);
  for (int64_t i = 1; i < positions; ++i) {
    int v = window_slice(i);
    // Keep the current pick while select(best, v) holds.
    int keep = cx.Compare(ge ? OpKind::kGreaterThanOrEqualTo : OpKind::kLessThanOrEqualTo, best, v);
    best = cx.Select(keep, best, v);
    pick = cx.Select(keep, pick, cx.Splat(DType::kI32, sshape, static_cast<double>(i)));
  }
  int zero = cx.Scalar(t, 0);
  int acc = -1;
  for (int64_t i = 0; i < positions; ++i) {
    int contribution = cx.Select(cx.Compare(OpKind::kEqual, pick, cx.Splat(DType::kI32, sshape, static_cast<double>(i))),
                                 source, cx.Splat(t, sshape, 0));
    std::vector<int64_t> off = offset_of(i), lo(rank), hi(rank), interior(rank);
    for (size_t d = 0; d < rank; ++d) {
      lo[d] = off[d];
      interior[d] = w.strides[d] - 1;
      int64_t placed = sshape[d] == 0 ? 0 : (sshape[d] - 1) * w.strides[d] + 1;
      hi[d] = pshape[d] - off[d] - placed;
    }
    JMP_ASSIGN_OR_RETURN(int placed, PadGeneral(cx, contribution, zero, lo, hi, interior));
    acc = acc < 0 ? placed : cx.Binary(OpKind::kAdd, acc, placed);
  }
  // Back to the operand's shape (drop the padding), and the init value added everywhere.
  Shape starts(rank), ends(rank);
  for (size_t d = 0; d < rank; ++d) {
    starts[d] = w.pad_low[d];
    ends[d] = w.pad_low[d] + shape[d];
  }
  acc = cx.Slice(acc, starts, ends);
  double init_value;
  if (!(cx.KnownSplat(init, &init_value) && init_value == 0)) acc = cx.Binary(OpKind::kAdd, acc, cx.BroadcastTo(init, shape));
  cx.Bind(0, acc);
  return Status::Ok();
}

}  // namespace

void RegisterPoolingRules(std::map<std::string, LowerRule>& r) {
  RegisterRule(r, "stablehlo.select_and_scatter", &SelectAndScatter);
}

}  // namespace jmp::mps
