// gather and scatter with general dimension numbers, as one GatherND / ScatterND on a transposed
// operand: the index vector moves last, batching dims become extra index components (iotas), indexed
// dims move first, windows over indexed dims become explicit offsets, and the result is transposed
// into StableHLO's order. Gather clamps its starts; scatter drops out-of-bounds windows by sending
// them to scratch rows that are sliced off.
#include <algorithm>
#include <limits>

#include "lower/lower_families.h"

namespace jmp::mps {

namespace {

std::vector<int64_t> Field(const shlo::Op& op, const char* name) {
  const shlo::Attr* a = op.Find(name);
  if (!a) return {};
  if (a->kind == shlo::Attr::Kind::kInts) return a->ints;
  if (a->kind == shlo::Attr::Kind::kInt) return {a->i};
  return {};
}

bool Contains(const std::vector<int64_t>& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// Dimension lists from an artifact: each entry in [0, n) and none repeated.
bool DistinctInRange(const std::vector<int64_t>& v, int64_t n) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] < 0 || v[i] >= n) return false;
    for (size_t j = 0; j < i; ++j)
      if (v[j] == v[i]) return false;
  }
  return true;
}

bool Disjoint(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  for (int64_t x : a)
    if (std::find(b.begin(), b.end(), x) != b.end()) return false;
  return true;
}

// What gather and scatter share: the operand-side lists (`dropped` = collapsed or inserted dims,
// `index_map` = start_index_map or scatter_dims_to_operand_dims), the batching pairs and the index
// vector dim, checked against the operand and indices ranks before anything is indexed by them.
Status ValidateDims(LowerContext& cx, int64_t rank, int64_t index_rank, const std::vector<int64_t>& dropped,
                    const std::vector<int64_t>& operand_batching, const std::vector<int64_t>& index_batching,
                    const std::vector<int64_t>& index_map, int64_t index_vector_dim) {
  if (!DistinctInRange(dropped, rank) || !DistinctInRange(operand_batching, rank) ||
      !DistinctInRange(index_map, rank) || !Disjoint(dropped, operand_batching) ||
      !Disjoint(index_map, operand_batching))
    return cx.Unsupported("dimension numbers out of range or repeated");
  if (index_batching.size() != operand_batching.size() || !DistinctInRange(index_batching, index_rank) ||
      std::find(index_batching.begin(), index_batching.end(), index_vector_dim) != index_batching.end())
    return cx.Unsupported("batching dimension numbers do not pair up");
  if (index_vector_dim < 0 || index_vector_dim > index_rank) return cx.Unsupported("index_vector_dim out of range");
  return Status::Ok();
}

struct Indices {
  int value = -1;             // int32 [B..., K]
  std::vector<int64_t> dims;  // operand dim of each index component
  Shape batch;                // B
};

// Index vector last, int32, batching dims appended as iota components.
StatusOr<Indices> NormalizeIndices(LowerContext& cx, int indices, int64_t index_vector_dim, std::vector<int64_t> dims,
                                   const std::vector<int64_t>& operand_batching,
                                   const std::vector<int64_t>& index_batching) {
  Shape s = cx.ShapeOf(indices);
  int64_t rank = static_cast<int64_t>(s.size());
  if (index_vector_dim < 0 || index_vector_dim > rank) return cx.Unsupported("index_vector_dim out of range");
  // Indices wider than int32 (uint32, int64, uint64) saturate to int32's range in their own type
  // first: an index past 2^31 stays out of bounds instead of wrapping into range.
  int v = indices;
  DType t = cx.DTypeOf(indices);
  if (IsInteger(t) && BitWidth(t) >= 32 && t != DType::kI32) {
    v = cx.Binary(OpKind::kMinimum, v, cx.Splat(t, s, std::numeric_limits<int32_t>::max()));
    if (IsSignedInt(t)) v = cx.Binary(OpKind::kMaximum, v, cx.Splat(t, s, std::numeric_limits<int32_t>::lowest()));
  }
  v = cx.Cast(v, DType::kI32);
  if (index_vector_dim == rank) {
    s.push_back(1);
    v = cx.Reshape(v, s);
  } else if (index_vector_dim != rank - 1) {
    std::vector<int64_t> perm;
    for (int64_t d = 0; d < rank; ++d)
      if (d != index_vector_dim) perm.push_back(d);
    perm.push_back(index_vector_dim);
    v = cx.Transpose(v, perm);
  }
  Indices out;
  out.dims = std::move(dims);
  Shape full = cx.ShapeOf(v);
  out.batch.assign(full.begin(), full.end() - 1);
  if (full.back() != static_cast<int64_t>(out.dims.size()))
    return cx.Unsupported("index vector size does not match the index map");
  for (size_t j = 0; j < operand_batching.size(); ++j) {
    int64_t b = index_batching[j];
    if (b > index_vector_dim) --b;  // the index vector moved last
    Shape one = out.batch;
    one.push_back(1);
    int comp = cx.Iota(one, b);
    Shape cat = out.batch;
    cat.push_back(cx.ShapeOf(v).back() + 1);
    v = cx.Emit(OpKind::kConcat, {v, comp}, DType::kI32, cat, AxisAttrs{static_cast<int64_t>(cat.size()) - 1});
    out.dims.push_back(operand_batching[j]);
  }
  out.value = v;
  return out;
}

// Extra index components fixed at 0 for operand dims `dims` (windows then start at 0 there).
void AppendZeroComponents(LowerContext& cx, Indices* ix, const std::vector<int64_t>& dims) {
  if (dims.empty()) return;
  Shape zs = ix->batch;
  zs.push_back(static_cast<int64_t>(dims.size()));
  Shape cat = ix->batch;
  cat.push_back(static_cast<int64_t>(ix->dims.size() + dims.size()));
  ix->value = cx.Emit(OpKind::kConcat, {ix->value, cx.Splat(DType::kI32, zs, 0)}, DType::kI32, cat,
                      AxisAttrs{static_cast<int64_t>(cat.size()) - 1});
  ix->dims.insert(ix->dims.end(), dims.begin(), dims.end());
}

// A [K] int32 constant broadcast along [B..., K].
int VectorConst(LowerContext& cx, const std::vector<int32_t>& values, const Shape& shape) {
  return cx.BroadcastTo(cx.Int32Constant({static_cast<int64_t>(values.size())}, values), shape);
}

// Adds window offsets: [B..., K] -> [B..., sizes..., K], offset w moving along index component comp[w].
int ExpandWindows(LowerContext& cx, int idx, const Shape& batch, const std::vector<int64_t>& sizes,
                  const std::vector<size_t>& comp, size_t k) {
  if (sizes.empty()) return idx;
  int64_t count = 1;
  for (int64_t s : sizes) count *= s;
  std::vector<int32_t> offsets(static_cast<size_t>(count) * k, 0);
  for (int64_t i = 0; i < count; ++i) {
    int64_t rem = i;
    for (size_t w = sizes.size(); w-- > 0;) {
      offsets[static_cast<size_t>(i) * k + comp[w]] = static_cast<int32_t>(rem % sizes[w]);
      rem /= sizes[w];
    }
  }
  Shape oshape(batch.size(), 1);
  oshape.insert(oshape.end(), sizes.begin(), sizes.end());
  oshape.push_back(static_cast<int64_t>(k));
  Shape wshape(sizes.begin(), sizes.end());
  wshape.push_back(static_cast<int64_t>(k));
  int off = cx.Reshape(cx.Int32Constant(wshape, offsets), oshape);
  Shape bshape = batch;
  bshape.insert(bshape.end(), sizes.size(), 1);
  bshape.push_back(static_cast<int64_t>(k));
  Shape full = batch;
  full.insert(full.end(), sizes.begin(), sizes.end());
  full.push_back(static_cast<int64_t>(k));
  int base = cx.BroadcastTo(cx.Reshape(idx, bshape), full);
  return cx.Binary(OpKind::kAdd, base, cx.BroadcastTo(off, full));
}

Status Gather(LowerContext& cx) {
  const shlo::Op& op = cx.op();
  JMP_ASSIGN_OR_RETURN(int operand, cx.In(0));
  JMP_ASSIGN_OR_RETURN(int indices, cx.In(1));
  std::vector<int64_t> offset_dims = Field(op, "offset_dims"), collapsed = Field(op, "collapsed_slice_dims"),
                       obd = Field(op, "operand_batching_dims"), ibd = Field(op, "start_indices_batching_dims"),
                       sim = Field(op, "start_index_map"), slice_sizes = Field(op, "slice_sizes");
  JMP_ASSIGN_OR_RETURN(int64_t ivd, cx.IntAttr("index_vector_dim"));
  const Shape os = cx.ShapeOf(operand);
  size_t rank = os.size();
  if (slice_sizes.size() != rank) return cx.Unsupported("slice_sizes does not match the operand rank");
  JMP_RETURN_IF_ERROR(ValidateDims(cx, static_cast<int64_t>(rank), static_cast<int64_t>(cx.ShapeOf(indices).size()),
                                   collapsed, obd, ibd, sim, ivd));
  if (!DistinctInRange(offset_dims, static_cast<int64_t>(cx.OutType(0).shape.size())) ||
      offset_dims.size() + collapsed.size() + obd.size() != rank)
    return cx.Unsupported("offset_dims do not match the operand rank");
  for (size_t d = 0; d < rank; ++d) {
    bool dropped = Contains(collapsed, static_cast<int64_t>(d)) || Contains(obd, static_cast<int64_t>(d));
    if (slice_sizes[d] < 0 || slice_sizes[d] > os[d] || (dropped && slice_sizes[d] > 1))
      return cx.Unsupported("slice_sizes out of range");
  }
  JMP_ASSIGN_OR_RETURN(Indices ix, NormalizeIndices(cx, indices, ivd, sim, obd, ibd));
  collapsed.insert(collapsed.end(), obd.begin(), obd.end());
  if (rank == 0) {  // a scalar operand: every slice is the operand
    cx.Bind(0, cx.BroadcastTo(operand, cx.OutType(0).shape));
    return Status::Ok();
  }
  if (ix.dims.empty()) AppendZeroComponents(cx, &ix, {0});  // no index: slices start at the origin
  size_t k = ix.dims.size();
  // Clamp starts so each slice lies inside the operand.
  std::vector<int32_t> hi(k);
  for (size_t c = 0; c < k; ++c) {
    size_t d = static_cast<size_t>(ix.dims[c]);
    if (d >= rank) return cx.Unsupported("start_index_map out of range");
    hi[c] = static_cast<int32_t>(std::max<int64_t>(os[d] - slice_sizes[d], 0));
  }
  Shape ishape = cx.ShapeOf(ix.value);
  int idx = cx.Binary(OpKind::kMaximum, ix.value, cx.Splat(DType::kI32, ishape, 0));
  idx = cx.Binary(OpKind::kMinimum, idx, VectorConst(cx, hi, ishape));
  // Indexed dims first (index order), then the rest ascending.
  std::vector<int64_t> order(ix.dims.begin(), ix.dims.end()), rest;
  for (int64_t d = 0; d < static_cast<int64_t>(rank); ++d)
    if (!Contains(ix.dims, d)) rest.push_back(d);
  order.insert(order.end(), rest.begin(), rest.end());
  int data = cx.Transpose(operand, order);
  std::vector<int64_t> window_sizes, window_dims;
  std::vector<size_t> window_comp;
  for (size_t c = 0; c < k; ++c) {
    if (Contains(collapsed, ix.dims[c])) continue;
    window_dims.push_back(ix.dims[c]);
    window_sizes.push_back(slice_sizes[static_cast<size_t>(ix.dims[c])]);
    window_comp.push_back(c);
  }
  idx = ExpandWindows(cx, idx, ix.batch, window_sizes, window_comp, k);
  Shape gshape = ix.batch;
  gshape.insert(gshape.end(), window_sizes.begin(), window_sizes.end());
  for (int64_t d : rest) gshape.push_back(os[static_cast<size_t>(d)]);
  int y = cx.Reshape(GatherND(cx, data, idx), gshape);
  // Windows over the non-indexed dims start at 0.
  Shape starts(gshape.size(), 0), ends = gshape;
  size_t nb = ix.batch.size(), nw = window_sizes.size();
  for (size_t r = 0; r < rest.size(); ++r) ends[nb + nw + r] = slice_sizes[static_cast<size_t>(rest[r])];
  y = cx.Slice(y, starts, ends);
  // Into StableHLO's order: offset dims take the non-collapsed operand dims ascending.
  std::vector<int64_t> uncollapsed;
  for (int64_t d = 0; d < static_cast<int64_t>(rank); ++d)
    if (!Contains(collapsed, d)) uncollapsed.push_back(d);
  const Shape& out = cx.OutType(0).shape;
  std::vector<int64_t> perm;
  size_t next_batch = 0;
  for (int64_t p = 0; p < static_cast<int64_t>(out.size()); ++p) {
    auto it = std::find(offset_dims.begin(), offset_dims.end(), p);
    if (it == offset_dims.end()) {
      perm.push_back(static_cast<int64_t>(next_batch++));
      continue;
    }
    int64_t od = uncollapsed.at(static_cast<size_t>(it - offset_dims.begin()));
    auto w = std::find(window_dims.begin(), window_dims.end(), od);
    if (w != window_dims.end())
      perm.push_back(static_cast<int64_t>(nb + static_cast<size_t>(w - window_dims.begin())));
    else
      perm.push_back(
          static_cast<int64_t>(nb + nw + static_cast<size_t>(std::find(rest.begin(), rest.end(), od) - rest.begin())));
  }
  if (perm.size() != cx.ShapeOf(y).size()) return cx.Unsupported("gather dimension numbers not understood");
  y = cx.Transpose(y, perm);
  cx.Bind(0, cx.Reshape(y, out));
  return Status::Ok();
}

// The update computation: combine(x, u) or `return u` (set).
bool UpdateMode(const shlo::Op& op, DType t, ScatterMode* mode) {
  if (op.regions.size() != 1 || op.regions[0].blocks.size() != 1) return false;
  const shlo::Block& b = op.regions[0].blocks[0];
  if (b.args.size() != 2 || b.ops.empty()) return false;
  const shlo::Op& ret = b.ops.back();
  if (ret.operands.size() != 1) return false;
  if (ret.operands[0] == b.args[1] && b.ops.size() == 1) {
    *mode = ScatterMode::kSet;
    return true;
  }
  if (b.ops.size() != 2) return false;
  const shlo::Op& f = b.ops[0];
  if (f.results.size() != 1 || f.results[0] != ret.operands[0] || f.operands.size() != 2) return false;
  bool args = (f.operands[0] == b.args[0] && f.operands[1] == b.args[1]) ||
              (f.operands[0] == b.args[1] && f.operands[1] == b.args[0]);
  if (!args) return false;
  bool boolean = t == DType::kBool;
  // Subtract is not commutative: only operand - update is the Sub mode.
  const bool operand_first = f.operands[0] == b.args[0];
  if (f.name == "stablehlo.add" && !boolean)
    *mode = ScatterMode::kAdd;
  else if (f.name == "stablehlo.subtract" && !boolean && operand_first)
    *mode = ScatterMode::kSub;
  else if (f.name == "stablehlo.multiply" && !boolean)
    *mode = ScatterMode::kMul;
  else if (f.name == "stablehlo.minimum" && !boolean)
    *mode = ScatterMode::kMin;
  else if (f.name == "stablehlo.maximum" && !boolean)
    *mode = ScatterMode::kMax;
  else
    return false;
  return true;
}

// The scatter op's dimension numbers applied to these operand and updates values, combining with
// ScatterND's `mode`.
StatusOr<int> EmitScatter(LowerContext& cx, int operand, int indices, int updates, ScatterMode mode) {
  const shlo::Op& op = cx.op();
  std::vector<int64_t> uwd = Field(op, "update_window_dims"), inserted = Field(op, "inserted_window_dims"),
                       obd = Field(op, "input_batching_dims"), ibd = Field(op, "scatter_indices_batching_dims"),
                       sim = Field(op, "scatter_dims_to_operand_dims");
  JMP_ASSIGN_OR_RETURN(int64_t ivd, cx.IntAttr("index_vector_dim"));
  const Shape os = cx.ShapeOf(operand);
  const Shape us = cx.ShapeOf(updates);
  size_t rank = os.size();
  JMP_RETURN_IF_ERROR(ValidateDims(cx, static_cast<int64_t>(rank), static_cast<int64_t>(cx.ShapeOf(indices).size()),
                                   inserted, obd, ibd, sim, ivd));
  if (!DistinctInRange(uwd, static_cast<int64_t>(us.size()))) return cx.Unsupported("update_window_dims out of range");
  JMP_ASSIGN_OR_RETURN(Indices ix, NormalizeIndices(cx, indices, ivd, sim, obd, ibd));
  inserted.insert(inserted.end(), obd.begin(), obd.end());
  {  // the updates' scatter dims are the indices' batch dims
    Shape scatter_dims;
    for (int64_t d = 0; d < static_cast<int64_t>(us.size()); ++d)
      if (!Contains(uwd, d)) scatter_dims.push_back(us[static_cast<size_t>(d)]);
    if (scatter_dims != ix.batch) return cx.Unsupported("updates do not match the scatter indices");
  }
  for (int64_t d : ix.dims)
    if (d < 0 || d >= static_cast<int64_t>(rank)) return cx.Unsupported("scatter_dims_to_operand_dims out of range");
  for (int64_t d : uwd)
    if (d < 0 || d >= static_cast<int64_t>(us.size())) return cx.Unsupported("update_window_dims out of range");
  // Update window dims map to the non-inserted operand dims ascending.
  std::vector<int64_t> window_operand_dims;
  for (int64_t d = 0; d < static_cast<int64_t>(rank); ++d)
    if (!Contains(inserted, d)) window_operand_dims.push_back(d);
  if (window_operand_dims.size() != uwd.size()) return cx.Unsupported("scatter dimension numbers not understood");
  auto window_size = [&](int64_t od) {
    size_t j = static_cast<size_t>(std::find(window_operand_dims.begin(), window_operand_dims.end(), od) -
                                   window_operand_dims.begin());
    return j < uwd.size() ? us[static_cast<size_t>(uwd[j])] : int64_t{1};
  };
  for (size_t j = 0; j < uwd.size(); ++j)
    if (us[static_cast<size_t>(uwd[j])] > os[static_cast<size_t>(window_operand_dims[j])])
      return cx.Unsupported("update window larger than the operand");
  // Unindexed dims whose window is not the whole dim become index components fixed at 0 (ScatterND
  // only writes whole trailing slices).
  std::vector<int64_t> partial;
  for (int64_t d = 0; d < static_cast<int64_t>(rank); ++d)
    if (!Contains(ix.dims, d) && window_size(d) != os[static_cast<size_t>(d)]) partial.push_back(d);
  if (rank == 0) {
    // Every update lands on the one element (an index vector of a scalar is empty): the operand as one
    // slot of a rank-1 ScatterND, each update a row with index 0.
    const int64_t n = cx.Type(updates).NumElements();  // the updates' shape is the scatter batch
    if (n == 0) return operand;
    int y = ScatterND(cx, cx.Reshape(operand, {1}), cx.Reshape(updates, {n}), cx.Splat(DType::kI32, {n, 1}, 0), mode);
    return cx.Reshape(y, {});
  }
  if (ix.dims.empty() && partial.empty()) partial.push_back(0);  // no index at all: the whole operand
  AppendZeroComponents(cx, &ix, partial);
  std::vector<int64_t> rest;
  for (int64_t d = 0; d < static_cast<int64_t>(rank); ++d)
    if (!Contains(ix.dims, d)) rest.push_back(d);
  size_t k = ix.dims.size();
  // Which windows are in bounds (StableHLO skips the others whole).
  std::vector<int32_t> hi(k);
  std::vector<int64_t> window_sizes, window_dims;
  std::vector<size_t> window_comp;
  for (size_t c = 0; c < k; ++c) {
    int64_t d = ix.dims[c];
    int64_t s = Contains(inserted, d) ? 1 : window_size(d);
    hi[c] = static_cast<int32_t>(os[static_cast<size_t>(d)] - s);
    if (!Contains(inserted, d)) {
      window_dims.push_back(d);
      window_sizes.push_back(s);
      window_comp.push_back(c);
    }
  }
  Shape ishape = cx.ShapeOf(ix.value);
  int ok_lo = cx.Compare(OpKind::kGreaterThanOrEqualTo, ix.value, cx.Splat(DType::kI32, ishape, 0));
  int ok_hi = cx.Compare(OpKind::kLessThanOrEqualTo, ix.value, VectorConst(cx, hi, ishape));
  Shape kept = ix.batch;
  kept.push_back(1);
  int valid = cx.Emit(OpKind::kReductionAnd, {cx.Binary(OpKind::kLogicalAnd, ok_lo, ok_hi)}, DType::kBool, kept,
                      AxesAttrs{{static_cast<int64_t>(kept.size()) - 1}});  // [B..., 1]
  // Invalid windows go to scratch slots past the end of the first indexed dim, as many as its
  // window is long.
  int64_t first = ix.dims[0];
  int64_t scratch_rows = Contains(inserted, first) ? 1 : window_size(first);
  std::vector<int32_t> scratch(k, 0);
  scratch[0] = static_cast<int32_t>(os[static_cast<size_t>(first)]);
  int idx = cx.Select(cx.BroadcastTo(valid, ishape), ix.value, VectorConst(cx, scratch, ishape));
  idx = ExpandWindows(cx, idx, ix.batch, window_sizes, window_comp, k);
  // Operand: indexed dims first, padded by one scratch slot along the first.
  std::vector<int64_t> order(ix.dims.begin(), ix.dims.end());
  order.insert(order.end(), rest.begin(), rest.end());
  int data = cx.Transpose(operand, order);
  Shape dshape = cx.ShapeOf(data);
  Shape lo(dshape.size(), 0), hi_pad(dshape.size(), 0);
  hi_pad[0] = scratch_rows;
  Shape padded_shape = dshape;
  padded_shape[0] += scratch_rows;
  data = cx.Emit(OpKind::kPad, {data}, cx.DTypeOf(data), padded_shape, PadAttrs{lo, hi_pad, 0});
  // Updates: [B..., windows over indexed dims (index order)..., rest ascending].
  std::vector<int64_t> scatter_update_dims;
  for (int64_t d = 0; d < static_cast<int64_t>(us.size()); ++d)
    if (!Contains(uwd, d)) scatter_update_dims.push_back(d);
  std::vector<int64_t> uperm = scatter_update_dims;
  auto uwd_of = [&](int64_t od) {
    size_t j = static_cast<size_t>(std::find(window_operand_dims.begin(), window_operand_dims.end(), od) -
                                   window_operand_dims.begin());
    return uwd[j];
  };
  for (int64_t d : window_dims) uperm.push_back(uwd_of(d));
  for (int64_t d : rest) uperm.push_back(uwd_of(d));
  int u = cx.Transpose(updates, uperm);
  Shape ushape = ix.batch;
  ushape.insert(ushape.end(), window_sizes.begin(), window_sizes.end());
  for (int64_t d : rest) ushape.push_back(os[static_cast<size_t>(d)]);
  u = cx.Reshape(u, ushape);
  int y = ScatterND(cx, data, u, idx, mode);
  Shape starts(padded_shape.size(), 0);
  y = cx.Slice(y, starts, dshape);
  std::vector<int64_t> inverse(order.size());
  for (size_t i = 0; i < order.size(); ++i) inverse[static_cast<size_t>(order[i])] = static_cast<int64_t>(i);
  return cx.Transpose(y, inverse);
}

// How a bool operand's update computation maps onto an int32 scatter (a type every backend scatters):
// or-like bodies (add, max, or) are max, and-like ones (mul, min, and) are min.
bool BoolScatterMode(const shlo::Op& op, ScatterMode* mode) {
  if (op.regions.size() != 1 || op.regions[0].blocks.size() != 1) return false;
  const shlo::Block& b = op.regions[0].blocks[0];
  if (b.args.size() != 2 || b.ops.size() != 2) return false;
  const shlo::Op& f = b.ops[0];
  if (f.operands.size() != 2 || f.results.size() != 1 || b.ops[1].operands.size() != 1 ||
      b.ops[1].operands[0] != f.results[0])
    return false;
  if (!((f.operands[0] == b.args[0] && f.operands[1] == b.args[1]) ||
        (f.operands[0] == b.args[1] && f.operands[1] == b.args[0])))
    return false;
  if (f.name == "stablehlo.add" || f.name == "stablehlo.maximum" || f.name == "stablehlo.or")
    *mode = ScatterMode::kMax;
  else if (f.name == "stablehlo.multiply" || f.name == "stablehlo.minimum" || f.name == "stablehlo.and")
    *mode = ScatterMode::kMin;
  else
    return false;
  return true;
}

// Whether the block is plain scalar code (no nested regions), so it can be lowered inline on tensors.
bool Flat(const shlo::Block& b) {
  for (const shlo::Op& o : b.ops)
    if (!o.regions.empty()) return false;
  return true;
}

// Whether any op of the block reads the block argument `arg` (the update, for x.at[i].apply(f)).
bool BlockUses(const shlo::Block& b, int arg) {
  for (const shlo::Op& o : b.ops)
    for (int v : o.operands)
      if (v == arg) return true;
  return false;
}

Status Scatter(LowerContext& cx) {
  const shlo::Op& op = cx.op();
  if (op.operands.size() != 3) return cx.Unsupported("variadic scatter is not supported");
  JMP_ASSIGN_OR_RETURN(int operand, cx.In(0));
  JMP_ASSIGN_OR_RETURN(int indices, cx.In(1));
  JMP_ASSIGN_OR_RETURN(int updates, cx.In(2));
  DType t = cx.DTypeOf(operand);
  ScatterMode mode;
  if (UpdateMode(op, t, &mode)) {
    JMP_ASSIGN_OR_RETURN(int y, EmitScatter(cx, operand, indices, updates, mode));
    cx.Bind(0, y);
    return Status::Ok();
  }
  if (t == DType::kBool && BoolScatterMode(op, &mode)) {
    JMP_ASSIGN_OR_RETURN(int y,
                         EmitScatter(cx, cx.Cast(operand, DType::kI32), indices, cx.Cast(updates, DType::kI32), mode));
    cx.Bind(0, cx.Cast(y, DType::kBool));
    return Status::Ok();
  }
  // Any other update computation, applied elementwise where updates land: exact when each element
  // gets at most one update (unique_indices), or when the body ignores the update (x.at[i].apply(f)),
  // where an element hit c times gets f applied c times.
  if (op.regions.size() != 1 || op.regions[0].blocks.size() != 1 || op.regions[0].blocks[0].args.size() != 2)
    return cx.Unsupported("scatter update computation not recognised");
  const shlo::Block& body = op.regions[0].blocks[0];
  const shlo::Attr* unique_attr = op.Find("unique_indices");
  bool unique = unique_attr && unique_attr->kind == shlo::Attr::Kind::kBool && unique_attr->b;
  bool uses_update = BlockUses(body, body.args[1]);
  if ((!unique && uses_update) || !Flat(body)) return cx.Unsupported("scatter update computation not recognised");
  const Shape os = cx.ShapeOf(operand), us = cx.ShapeOf(updates);
  JMP_ASSIGN_OR_RETURN(int count, EmitScatter(cx, cx.Splat(DType::kI32, os, 0), indices, cx.Splat(DType::kI32, us, 1),
                                              ScatterMode::kAdd));
  int64_t windows = 1;  // the most updates one element can receive
  {
    const std::vector<int64_t> uwd = Field(op, "update_window_dims");
    for (int64_t d = 0; d < static_cast<int64_t>(us.size()); ++d)
      if (!Contains(uwd, d)) windows *= us[static_cast<size_t>(d)];
  }
  int spread = uses_update ? -1 : cx.Splat(t, os, 0);
  if (uses_update) {
    JMP_ASSIGN_OR_RETURN(spread, EmitScatter(cx, operand, indices, updates, ScatterMode::kSet));
  }
  int64_t rounds = unique ? 1 : windows;
  if (rounds > 64) return cx.Unsupported("scatter applying a function to more than 64 possibly repeated updates");
  int y = operand;
  for (int64_t k = 1; k <= rounds; ++k) {
    JMP_ASSIGN_OR_RETURN(std::vector<int> r, cx.LowerBlockInline(body, {y, spread}));
    if (r.size() != 1) return cx.Unsupported("scatter update computation returns several values");
    int hit = cx.Compare(OpKind::kGreaterThanOrEqualTo, count, cx.Splat(DType::kI32, os, static_cast<double>(k)));
    y = cx.Select(hit, cx.BroadcastTo(r[0], os), y);
  }
  cx.Bind(0, y);
  return Status::Ok();
}

}  // namespace

void RegisterGatherScatterRules(std::map<std::string, LowerRule>& r) {
  RegisterRule(r, "stablehlo.gather", &Gather);
  RegisterRule(r, "stablehlo.scatter", &Scatter);
}

}  // namespace jmp::mps
