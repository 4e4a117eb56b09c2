// reduce_window in general (pooling, and any window a scan doesn't cover): pad with the init value
// (base dilation as interior padding), then one pass per windowed dim combining strided slices —
// O(sum of log window sizes) MPS ops for every monoid, padding, stride and dilation. And
// select_and_scatter, the max/min-pool gradient.
#include <functional>
#include <map>

#include "lower/lower_families.h"
#include "lower/lower_window_common.h"

namespace jmp::mps {

StatusOr<WindowAttrs> ReadWindowAttrs(LowerContext& cx, size_t rank) {
  WindowAttrs w;
  auto get = [&](const char* name, std::vector<int64_t>* out, int64_t fill) -> Status {
    const shlo::Attr* a = cx.op().Find(name);
    if (a && a->kind == shlo::Attr::Kind::kInts && !a->ints.empty())
      *out = a->ints;
    else
      out->assign(rank, fill);
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
  if (!Reasonable(w.dims) || !Reasonable(w.strides) || !Reasonable(w.base_dilations) ||
      !Reasonable(w.window_dilations) || !Reasonable(padding))
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

namespace {

// One window pass along dim d: out[i] = combine over j < k of x[i*stride + j*dilation], n outputs.
// Small windows take one strided slice per tap; larger ones build doubled partial windows first
// (P_2m[i] = P_m[i] + P_m[i + m*dilation]), so a window of k costs O(log k) ops, not O(k).
int WindowPass(LowerContext& cx, int x, size_t d, int64_t k, int64_t dilation, int64_t stride, int64_t n,
               OpKind combine) {
  const Shape shape = cx.ShapeOf(x);
  auto tap = [&](int v, int64_t offset) {
    Shape starts(shape.size(), 0), ends = cx.ShapeOf(v), strides(shape.size(), 1);
    starts[d] = offset;
    ends[d] = n == 0 ? offset : offset + (n - 1) * stride + 1;
    strides[d] = stride;
    return cx.Slice(v, starts, ends, strides);
  };
  if (n == 0) return tap(x, 0);  // an empty result (the window is longer than the padded input)
  if (k <= 8) {
    int acc = tap(x, 0);
    for (int64_t j = 1; j < k; ++j) acc = cx.Binary(combine, acc, tap(x, j * dilation));
    return acc;
  }
  // partial[b] covers 2^b taps; built up to the highest bit of k.
  std::vector<int> partial = {x};
  for (int64_t m = 1; 2 * m <= k; m *= 2) {
    int p = partial.back();
    Shape ps = cx.ShapeOf(p), starts(ps.size(), 0), ends = ps;
    ends[d] = ps[d] - m * dilation;
    int head = cx.Slice(p, starts, ends);
    starts[d] = m * dilation;
    ends[d] = ps[d];
    partial.push_back(cx.Binary(combine, head, cx.Slice(p, starts, ends)));
  }
  // k's binary digits, highest first, each a chunk starting where the previous ended.
  int acc = -1;
  int64_t covered = 0;
  for (size_t b = partial.size(); b-- > 0;) {
    int64_t m = int64_t{1} << b;
    if (!(k & m)) continue;
    int piece = tap(partial[b], covered * dilation);
    acc = acc < 0 ? piece : cx.Binary(combine, acc, piece);
    covered += m;
  }
  return acc;
}

}  // namespace

namespace {

// MPSGraph's 4-D pooling calls take windows of rank <= 4 (leading 1s added by reshapes), unit
// dilations, non-negative padding smaller than the window (every window holds a real element) and
// float operands.
bool FitsPool4D(const WindowAttrs& w, const Shape& shape, DType t) {
  if (shape.size() > 4 || (t != DType::kF32 && t != DType::kF16 && t != DType::kBF16)) return false;
  for (size_t d = 0; d < shape.size(); ++d)
    if (w.base_dilations[d] != 1 || w.window_dilations[d] != 1 || w.dims[d] < 1 || w.strides[d] < 1 ||
        w.pad_low[d] < 0 || w.pad_high[d] < 0 || w.pad_low[d] >= w.dims[d] || w.pad_high[d] >= w.dims[d] ||
        shape[d] + w.pad_low[d] + w.pad_high[d] < w.dims[d])
      return false;
  return true;
}

// One MaxPool4D / AvgPool4D / MaxPool4DGradient (inputs given) with the window padded out to rank 4.
int EmitPool4D(LowerContext& cx, OpKind kind, std::vector<int> inputs, const WindowAttrs& w, const Shape& out) {
  size_t lead = 4 - out.size();
  auto widen = [&](const std::vector<int64_t>& v, int64_t fill) {
    std::vector<int64_t> r(lead, fill);
    r.insert(r.end(), v.begin(), v.end());
    return r;
  };
  for (int& v : inputs) v = cx.Reshape(v, widen(cx.ShapeOf(v), 1));
  Pool4DAttrs attrs{widen(w.dims, 1), widen(w.strides, 1), widen(w.pad_low, 0), widen(w.pad_high, 0)};
  return cx.Reshape(cx.Emit(kind, inputs, cx.DTypeOf(inputs[0]), widen(out, 1), attrs), out);
}

}  // namespace

StatusOr<bool> TryLowerPooling(LowerContext& cx) {
  const shlo::Op& op = cx.op();
  if (op.operands.size() != 2) return false;  // several operands: the general fold (lower_reduce_window.cc)
  JMP_ASSIGN_OR_RETURN(int x, cx.In(0));
  JMP_ASSIGN_OR_RETURN(int init, cx.In(1));
  const Shape shape = cx.ShapeOf(x);
  size_t rank = shape.size();
  JMP_ASSIGN_OR_RETURN(WindowAttrs w, ReadWindowAttrs(cx, rank));
  std::string monoid = WindowMonoid(op);
  DType t = cx.DTypeOf(x);
  OpKind combine;
  bool boolean = t == DType::kBool;
  if (monoid == "stablehlo.add")
    combine = boolean ? OpKind::kLogicalOr : OpKind::kAdd;
  else if (monoid == "stablehlo.multiply")
    combine = boolean ? OpKind::kLogicalAnd : OpKind::kMultiply;
  else if (monoid == "stablehlo.maximum")
    combine = boolean ? OpKind::kLogicalOr : OpKind::kMaximum;
  else if (monoid == "stablehlo.minimum")
    combine = boolean ? OpKind::kLogicalAnd : OpKind::kMinimum;
  else
    return false;  // no monoid: the general fold
  const Shape out = cx.OutType(0).shape;
  if (out.size() != rank) return cx.Unsupported("reduce_window result rank");
  for (size_t d = 0; d < rank; ++d)
    if (w.base_dilations[d] < 1 || w.strides[d] < 1 || w.window_dilations[d] < 1 || w.dims[d] < 0)
      return cx.Unsupported("non-positive window dimensions, strides or dilations in reduce_window");
  // Pad with the monoid's identity (base dilation as interior padding; negative padding slices):
  // XLA skips padded positions and combines the init value once per window, which StableHLO's
  // "pad with init" only matches when init is the identity. Then one pass per windowed dim: the
  // monoids are associative and commutative, so the window separates.
  double identity_value = monoid == "stablehlo.add"        ? 0
                          : monoid == "stablehlo.multiply" ? 1
                          : monoid == "stablehlo.maximum"  ? LowestValue(t)
                                                           : HighestValue(t);
  // Max pooling, and float32 sum pooling as average pooling times the window size, go to MPSGraph's
  // pooling calls when the window fits them and the init value is the monoid's identity.
  double init_splat;
  bool init_is_identity = cx.KnownSplat(init, &init_splat) && init_splat == identity_value;
  bool pool_monoid = monoid == "stablehlo.maximum" || (monoid == "stablehlo.add" && t == DType::kF32);
  if (pool_monoid && init_is_identity && FitsPool4D(w, shape, t)) {
    bool max = monoid == "stablehlo.maximum";
    int pooled = EmitPool4D(cx, max ? OpKind::kMaxPool4D : OpKind::kAvgPool4D, {x}, w, out);
    if (!max) {
      int64_t size = 1;
      for (int64_t k : w.dims) size *= k;
      pooled = cx.Binary(OpKind::kMultiply, pooled, cx.Splat(t, out, static_cast<double>(size)));
    }
    cx.Bind(0, pooled);
    return true;
  }
  std::vector<int64_t> interior(rank);
  for (size_t d = 0; d < rank; ++d) interior[d] = w.base_dilations[d] - 1;
  bool empty_window = false;  // or an empty result: init everywhere (nothing to pad)
  for (size_t d = 0; d < rank; ++d) empty_window |= w.dims[d] == 0 || out[d] == 0;
  int acc = -1;
  if (!empty_window) {
    JMP_ASSIGN_OR_RETURN(acc, PadGeneral(cx, x, cx.Scalar(t, identity_value), w.pad_low, w.pad_high, interior));
    for (size_t d = 0; d < rank; ++d) {
      int64_t n = out[d], k = w.dims[d];
      int64_t padded = cx.ShapeOf(acc)[d];
      int64_t span = (k - 1) * w.window_dilations[d] + 1;
      int64_t expected = padded < span ? 0 : (padded - span) / w.strides[d] + 1;
      if (n != expected) return cx.Unsupported("reduce_window result shape does not match its window");
      if (k == 1 && w.strides[d] == 1) continue;
      acc = WindowPass(cx, acc, d, k, w.window_dilations[d], w.strides[d], n, combine);
    }
  } else {
    acc = cx.BroadcastTo(init, out);
  }
  double init_value;
  bool identity = cx.KnownSplat(init, &init_value) && init_value == identity_value;
  if (!identity && !empty_window) acc = cx.Binary(combine, acc, cx.BroadcastTo(init, out));
  if (cx.ShapeOf(acc) != out) return cx.Unsupported("reduce_window result shape mismatch");
  cx.Bind(0, acc);
  return true;
}

namespace {

// Places per-window-offset contributions (each shaped like the source) at offset + stride * index in
// a tensor of the padded operand's shape, summing overlaps. Offset o = r + j * stride: all offsets of
// one residue r land on one strided sub-grid, shifted by j source steps, so each contribution is one
// edge pad (the shift), each residue one sum, and the residues interleave by concat + reshape.
StatusOr<int> PlaceByResidues(LowerContext& cx, const std::vector<int>& contributions, const WindowAttrs& w,
                              const Shape& pshape, const std::function<std::vector<int64_t>(int64_t)>& offset_of) {
  size_t rank = pshape.size();
  Shape sshape = cx.ShapeOf(contributions.at(0));
  DType t = cx.DTypeOf(contributions[0]);
  int zero = cx.Scalar(t, 0);
  Shape shifted = sshape, J(rank);
  for (size_t d = 0; d < rank; ++d) {
    J[d] = (w.dims[d] - 1) / w.strides[d];
    shifted[d] += J[d];
  }
  // Sum per residue vector (row-major index over strides).
  std::map<int64_t, int> sums;
  for (size_t i = 0; i < contributions.size(); ++i) {
    std::vector<int64_t> off = offset_of(static_cast<int64_t>(i));
    std::vector<int64_t> lo(rank), hi(rank), interior(rank, 0);
    int64_t key = 0;
    for (size_t d = 0; d < rank; ++d) {
      int64_t j = off[d] / w.strides[d];
      lo[d] = j;
      hi[d] = J[d] - j;
      key = key * w.strides[d] + off[d] % w.strides[d];
    }
    JMP_ASSIGN_OR_RETURN(int placed, PadGeneral(cx, contributions[i], zero, lo, hi, interior));
    auto it = sums.find(key);
    if (it == sums.end())
      sums[key] = placed;
    else
      it->second = cx.Binary(OpKind::kAdd, it->second, placed);
  }
  // Interleave, last dim first: residues r along dim d become [.., L_d, s_d, ..] -> [.., L_d * s_d, ..].
  // `level` maps the residue prefix (dims before d) to the tensor interleaved over dims >= d.
  std::map<int64_t, int> level;
  int64_t count = 1;
  for (int64_t s : w.strides) count *= s;
  for (int64_t key = 0; key < count; ++key) {
    auto it = sums.find(key);
    level[key] = it != sums.end() ? it->second : cx.Splat(t, shifted, 0);
  }
  for (size_t d = rank; d-- > 0;) {
    int64_t s = w.strides[d];
    if (s == 1) continue;  // one residue: nothing to interleave
    std::map<int64_t, int> next;
    for (int64_t prefix = 0; prefix < static_cast<int64_t>(level.size()) / s; ++prefix) {
      std::vector<int> parts;
      Shape one;
      for (int64_t r = 0; r < s; ++r) {
        int v = level.at(prefix * s + r);
        Shape vs = cx.ShapeOf(v);
        one = vs;
        one.insert(one.begin() + static_cast<ptrdiff_t>(d) + 1, 1);
        parts.push_back(cx.Reshape(v, one));
      }
      Shape cat = one;
      cat[d + 1] = s;
      int c = cx.Emit(OpKind::kConcat, parts, t, cat, AxisAttrs{static_cast<int64_t>(d) + 1});
      Shape merged = cx.ShapeOf(parts[0]);
      merged.erase(merged.begin() + static_cast<ptrdiff_t>(d) + 1);
      merged[d] *= s;
      next[prefix] = cx.Reshape(c, merged);
    }
    level.swap(next);
  }
  int y = level.at(0);
  // To the padded operand's extent: the tail past it holds only zeros, or is missing.
  Shape ys = cx.ShapeOf(y);
  std::vector<int64_t> lo(rank, 0), hi(rank), interior(rank, 0);
  for (size_t d = 0; d < rank; ++d) hi[d] = pshape[d] - ys[d];
  return PadGeneral(cx, y, zero, lo, hi, interior);
}

// select_and_scatter (the max-pool gradient): per window, the element the select body picks (the
// first maximum for GE, as StableHLO iterates row-major), then each source value is added at its
// picked position: one strided slice per window offset to pick, then placement by residues.
Status SelectAndScatter(LowerContext& cx) {
  const shlo::Op& op = cx.op();
  if (op.regions.size() != 2) return cx.Unsupported("select_and_scatter needs select and scatter bodies");
  JMP_ASSIGN_OR_RETURN(int x, cx.In(0));
  JMP_ASSIGN_OR_RETURN(int source, cx.In(1));
  JMP_ASSIGN_OR_RETURN(int init, cx.In(2));
  if (op.regions[0].blocks.size() != 1 || op.regions[0].blocks[0].args.size() != 2)
    return cx.Unsupported("select_and_scatter select body not recognised");
  const shlo::Block& select = op.regions[0].blocks[0];
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
  // The artifact's window must be well formed and match the source's shape before any indexing.
  if (sshape.size() != rank || cx.DTypeOf(source) != t)
    return cx.Unsupported("select_and_scatter source does not match the operand");
  for (size_t d = 0; d < rank; ++d) {
    if (w.dims[d] < 1 || w.strides[d] < 1 || w.base_dilations[d] != 1 || w.window_dilations[d] != 1)
      return cx.Unsupported("select_and_scatter window dimensions and strides must be positive");
    int64_t padded_len = shape[d] + w.pad_low[d] + w.pad_high[d];
    int64_t windows = padded_len < w.dims[d] ? 0 : (padded_len - w.dims[d]) / w.strides[d] + 1;
    if (sshape[d] != windows) return cx.Unsupported("select_and_scatter source shape does not match its windows");
  }
  bool ge = dir->s == "GE";
  // The max-pool gradient proper: MPSGraph's pooling gradient call.
  double init_splat;
  bool zero_init = cx.KnownSplat(init, &init_splat) && init_splat == 0;
  bool unpadded = true;
  for (size_t d = 0; d < rank; ++d) unpadded &= w.pad_low[d] == 0 && w.pad_high[d] == 0;
  if (ge && zero_init && unpadded && FitsPool4D(w, shape, t)) {
    cx.Bind(0, EmitPool4D(cx, OpKind::kMaxPool4DGradient, {source, x}, w, shape));
    return Status::Ok();
  }
  // Pad with a value the select never picks over a real element.
  std::vector<int64_t> zeros(rank, 0);
  int pad_value = cx.Scalar(t, ge ? LowestValue(t) : HighestValue(t));
  JMP_ASSIGN_OR_RETURN(int padded, PadGeneral(cx, x, pad_value, w.pad_low, w.pad_high, zeros));
  Shape pshape = cx.ShapeOf(padded);
  int64_t positions = 1;
  for (size_t d = 0; d < rank && positions <= 4096; ++d) positions *= w.dims[d];
  if (positions < 1 || positions > 4096)
    return cx.Unsupported("select_and_scatter with an empty window or one of more than 4096 elements");
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
  std::vector<int> contributions;
  for (int64_t i = 0; i < positions; ++i)
    contributions.push_back(
        cx.Select(cx.Compare(OpKind::kEqual, pick, cx.Splat(DType::kI32, sshape, static_cast<double>(i))), source,
                  cx.Splat(t, sshape, 0)));
  int64_t residues = 1;
  for (size_t d = 0; d < rank && residues <= 64; ++d) residues *= w.strides[d];  // stops before overflowing
  int acc = -1;
  if (residues <= 64) {
    JMP_ASSIGN_OR_RETURN(acc, PlaceByResidues(cx, contributions, w, pshape, offset_of));
  } else {
    // Very large strides: each contribution placed by its own strided (interior) pad.
    for (int64_t i = 0; i < positions; ++i) {
      std::vector<int64_t> off = offset_of(i), lo(rank), hi(rank), interior(rank);
      for (size_t d = 0; d < rank; ++d) {
        lo[d] = off[d];
        interior[d] = w.strides[d] - 1;
        int64_t placed = sshape[d] == 0 ? 0 : (sshape[d] - 1) * w.strides[d] + 1;
        hi[d] = pshape[d] - off[d] - placed;
      }
      JMP_ASSIGN_OR_RETURN(int placed, PadGeneral(cx, contributions[static_cast<size_t>(i)], zero, lo, hi, interior));
      acc = acc < 0 ? placed : cx.Binary(OpKind::kAdd, acc, placed);
    }
  }
  // Back to the operand's shape (drop the padding), and the init value added everywhere.
  Shape starts(rank), ends(rank);
  for (size_t d = 0; d < rank; ++d) {
    starts[d] = w.pad_low[d];
    ends[d] = w.pad_low[d] + shape[d];
  }
  acc = cx.Slice(acc, starts, ends);
  double init_value;
  if (!(cx.KnownSplat(init, &init_value) && init_value == 0))
    acc = cx.Binary(OpKind::kAdd, acc, cx.BroadcastTo(init, shape));
  cx.Bind(0, acc);
  return Status::Ok();
}

}  // namespace

void RegisterPoolingRules(std::map<std::string, LowerRule>& r) {
  RegisterRule(r, "stablehlo.select_and_scatter", &SelectAndScatter);
}

}  // namespace jmp::mps
