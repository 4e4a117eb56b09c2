// Data movement kernels. Every layout op is one strided copy: output element i reads input offset
// base + Σ idx_d · stride_d, with strides permuted (transpose), zero (broadcast), scaled (slice) or
// negative (reverse); copies move raw elements of the dtype's width.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "exec/host/host_kernels.h"
#include "exec/host/host_parallel.h"
#include "exec/host/host_types.h"

namespace jmp::exec::host {

namespace {

using Shape = std::vector<int64_t>;

}  // namespace

Shape RowMajorStrides(const Shape& shape) {
  Shape s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

namespace {

// Drops size-1 dims and merges neighbours that are contiguous in both source and destination, so
// that e.g. a head transpose [B,T,H,D] -> [B,H,T,D] becomes a 3-D copy with D-long rows.
void SimplifyDims(Shape& shape, Shape& dst, Shape& src) {
  Shape s2, d2, r2;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    if (!s2.empty() && d2.back() == dst[i] * shape[i] && r2.back() == src[i] * shape[i]) {
      s2.back() *= shape[i];
      d2.back() = dst[i];
      r2.back() = src[i];
      continue;
    }
    s2.push_back(shape[i]);
    d2.push_back(dst[i]);
    r2.push_back(src[i]);
  }
  shape.swap(s2);
  dst.swap(d2);
  src.swap(r2);
}

// Copies the sub-block idx[0] in [first, last) of the outermost dim.
template <typename W>
void StridedCopyRange(W* out, const Shape& dst_strides, const W* in, int64_t src_base, const Shape& src_strides,
                      const Shape& shape, int64_t first, int64_t last) {
  size_t rank = shape.size();
  int64_t inner = shape[rank - 1];
  int64_t in_step = src_strides[rank - 1], out_step = dst_strides[rank - 1];
  // A transpose: the source is contiguous along some outer dim `t`; copy 16x16 tiles of (t, inner)
  // so reads and writes both stay within a few cache lines.
  size_t t = rank;
  if (in_step != 1 && out_step == 1)
    for (size_t d = 0; d + 1 < rank; ++d)
      if (src_strides[d] == 1) t = d;
  // Along dim 0 this call owns only [first, last).
  const int64_t plane_start = t == 0 ? first : 0;
  const int64_t plane_n = t == 0 ? last - first : (t < rank ? shape[t] : 0);
  std::vector<int64_t> idx(rank, 0);
  idx[0] = first;
  int64_t in_off = src_base + first * src_strides[0], out_off = first * dst_strides[0];
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < rank; ++d) rows *= shape[d];
  rows = rows / shape[0] * (last - first);
  constexpr int64_t kTile = 16;
  for (int64_t row = 0; row < rows;) {
    const W* sp = in + in_off;
    W* dp = out + out_off;
    if (t < rank && idx[t] == plane_start) {
      // Handle the whole (t, inner) plane here, tile by tile, then skip its rows.
      int64_t tn = plane_n, ts = dst_strides[t];
      for (int64_t i0 = 0; i0 < tn; i0 += kTile)
        for (int64_t j0 = 0; j0 < inner; j0 += kTile) {
          int64_t i1 = std::min(tn, i0 + kTile), j1 = std::min(inner, j0 + kTile);
          for (int64_t j = j0; j < j1; ++j)
            for (int64_t i = i0; i < i1; ++i) dp[i * ts + j] = sp[i + j * in_step];
        }
    } else if (t < rank) {
      // Rows with idx[t] != 0 were written with the plane above.
    } else if (in_step == 1 && out_step == 1) {
      std::memcpy(dp, sp, static_cast<size_t>(inner) * sizeof(W));
    } else if (in_step == 0 && out_step == 1) {
      W v = sp[0];
      for (int64_t i = 0; i < inner; ++i) dp[i] = v;
    } else {
      for (int64_t i = 0; i < inner; ++i) dp[i * out_step] = sp[i * in_step];
    }
    ++row;
    for (size_t k = rank - 1; k-- > 0;) {  // advance the outer index
      ++idx[k];
      in_off += src_strides[k];
      out_off += dst_strides[k];
      if (idx[k] < shape[k]) break;
      in_off -= src_strides[k] * shape[k];
      out_off -= dst_strides[k] * shape[k];
      idx[k] = 0;
    }
  }
}

template <typename W>
void StridedCopyT(uint8_t* dst, const Shape& dst_strides_in, const uint8_t* src, int64_t src_base,
                  const Shape& src_strides_in, const Shape& shape_in) {
  int64_t total = 1;
  for (int64_t d : shape_in) total *= d;
  if (total == 0) return;
  W* out = reinterpret_cast<W*>(dst);
  const W* in = reinterpret_cast<const W*>(src);
  Shape shape = shape_in, dst_strides = dst_strides_in, src_strides = src_strides_in;
  SimplifyDims(shape, dst_strides, src_strides);
  if (shape.empty()) {
    out[0] = in[src_base];
    return;
  }
  if (shape.size() == 1) {
    int64_t in_step = src_strides[0], out_step = dst_strides[0];
    ParallelFor(total, 32768, [&](int64_t first, int64_t last) {
      for (int64_t i = first; i < last; ++i) out[i * out_step] = in[src_base + i * in_step];
    });
    return;
  }
  int64_t per_outer = total / shape[0];
  ParallelFor(shape[0], std::max<int64_t>(1, 32768 / std::max<int64_t>(per_outer, 1)),
              [&](int64_t first, int64_t last) {
                StridedCopyRange(out, dst_strides, in, src_base, src_strides, shape, first, last);
              });
}

struct C16 {
  uint64_t a, b;
};

void StridedCopy(size_t width, uint8_t* dst, const Shape& dst_strides, const uint8_t* src, int64_t src_base,
                 const Shape& src_strides, const Shape& shape) {
  switch (width) {
    case 1: return StridedCopyT<uint8_t>(dst, dst_strides, src, src_base, src_strides, shape);
    case 2: return StridedCopyT<uint16_t>(dst, dst_strides, src, src_base, src_strides, shape);
    case 4: return StridedCopyT<uint32_t>(dst, dst_strides, src, src_base, src_strides, shape);
    case 8: return StridedCopyT<uint64_t>(dst, dst_strides, src, src_base, src_strides, shape);
    default: return StridedCopyT<C16>(dst, dst_strides, src, src_base, src_strides, shape);
  }
}

template <typename W>
void FillWith(uint8_t* dst, const uint8_t* one, int64_t n) {
  W v;
  std::memcpy(&v, one, sizeof(W));
  W* out = reinterpret_cast<W*>(dst);
  for (int64_t i = 0; i < n; ++i) out[i] = v;
}

void FillTile(uint8_t* dst, const uint8_t* one, size_t width, int64_t n) {
  switch (width) {
    case 1: std::memset(dst, one[0], static_cast<size_t>(n)); return;
    case 2: FillWith<uint16_t>(dst, one, n); return;
    case 4: FillWith<uint32_t>(dst, one, n); return;
    case 8: FillWith<uint64_t>(dst, one, n); return;
    default:
      for (int64_t i = 0; i < n; ++i) std::memcpy(dst + static_cast<size_t>(i) * width, one, width);
  }
}

}  // namespace

size_t Width(const OpArgs& a) { return ByteSize(a.OutType().dtype); }

Status RunCopyLike(const OpArgs& a) {
  size_t bytes = a.OutType().ByteSize();
  if (a.InType(0).ByteSize() != bytes) return a.Unsupported("changes the byte size");
  if (a.count >= 0) bytes = static_cast<size_t>(a.count) * Width(a);
  if (bytes && a.out[0] != a.in[0]) std::memcpy(a.out[0], a.in[0], bytes);
  return Status::Ok();
}

Status RunTranspose(const OpArgs& a) {
  const Shape& in = a.InType(0).shape;
  Shape in_strides = RowMajorStrides(in), src(in.size());
  const std::vector<int64_t>& perm = a.op.Attrs<mps::PermutationAttrs>().permutation;
  if (perm.size() != in.size()) return a.Unsupported("has a permutation of the wrong rank");
  for (size_t i = 0; i < in.size(); ++i) src[i] = in_strides[static_cast<size_t>(perm[i])];
  const Shape& out = a.OutType().shape;
  StridedCopy(Width(a), a.out[0], RowMajorStrides(out), a.in[0], 0, src, out);
  return Status::Ok();
}

TiledBroadcast TiledBroadcastOf(const Shape& in, const Shape& out) {
  if (in.size() > out.size()) return {};
  Shape padded(out.size() - in.size(), 1);
  padded.insert(padded.end(), in.begin(), in.end());
  size_t d = 0;
  while (d < padded.size() && padded[d] == 1) ++d;
  bool trailing = true;
  for (size_t k = d; k < padded.size(); ++k) trailing &= padded[k] == out[k];
  if (trailing) return {TiledBroadcast::kTrailing, 1};
  size_t k = 0;
  while (k < padded.size() && padded[k] == out[k]) ++k;
  int64_t repeat = 1;
  for (size_t r = k; r < padded.size(); ++r) {
    if (padded[r] != 1) return {};
    repeat *= out[r];
  }
  return {TiledBroadcast::kLeading, repeat};
}

Status RunBroadcast(const OpArgs& a) {
  const Shape& in = a.InType(0).shape;
  const Shape& out = a.OutType().shape;
  if (a.count >= 0) {  // a fused tile (TiledBroadcastOf)
    TiledBroadcast how = TiledBroadcastOf(in, out);
    int64_t source = a.InType(0).NumElements();
    size_t w = Width(a);
    if (source == 1) {
      FillTile(a.out[0], a.in[0], w, a.count);
    } else if (how.kind == TiledBroadcast::kTrailing) {
      for (int64_t j = 0, s = a.base % source; j < a.count;) {  // runs of the source, wrapping around
        int64_t run = std::min(a.count - j, source - s);
        std::memcpy(a.out[0] + static_cast<size_t>(j) * w, a.in[0] + static_cast<size_t>(s) * w,
                    static_cast<size_t>(run) * w);
        j += run;
        s = 0;
      }
    } else if (how.kind == TiledBroadcast::kLeading) {
      for (int64_t j = 0, s = a.base / how.repeat, o = a.base % how.repeat; j < a.count; ++s, o = 0) {
        int64_t run = std::min(a.count - j, how.repeat - o);  // one source element repeated
        FillTile(a.out[0] + static_cast<size_t>(j) * w, a.in[0] + static_cast<size_t>(s) * w, w, run);
        j += run;
      }
    } else {
      return Internal("a fused Broadcast the tile cannot make");
    }
    return Status::Ok();
  }
  if (in.size() > out.size()) return a.Unsupported("broadcasts to a lower rank");
  Shape in_strides = RowMajorStrides(in), src(out.size(), 0);
  size_t lead = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != out[lead + i] && in[i] != 1) return a.Unsupported("has incompatible shapes");
    src[lead + i] = in[i] == 1 ? 0 : in_strides[i];
  }
  StridedCopy(Width(a), a.out[0], RowMajorStrides(out), a.in[0], 0, src, out);
  return Status::Ok();
}

Status RunSlice(const OpArgs& a) {
  const Shape& in = a.InType(0).shape;
  const Shape& out = a.OutType().shape;
  const mps::SliceAttrs& slice = a.op.Attrs<mps::SliceAttrs>();
  Shape in_strides = RowMajorStrides(in), src(in.size());
  int64_t base = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    base += slice.starts[i] * in_strides[i];
    src[i] = in_strides[i] * slice.strides[i];
  }
  StridedCopy(Width(a), a.out[0], RowMajorStrides(out), a.in[0], base, src, out);
  return Status::Ok();
}

Status RunReverse(const OpArgs& a) {
  const Shape& in = a.InType(0).shape;
  Shape strides = RowMajorStrides(in), src = strides;
  int64_t base = 0;
  for (int64_t axis : a.op.Attrs<mps::AxesAttrs>().axes) {
    size_t d = static_cast<size_t>(axis);
    if (in[d] == 0) return Status::Ok();
    base += (in[d] - 1) * strides[d];
    src[d] = -strides[d];
  }
  StridedCopy(Width(a), a.out[0], strides, a.in[0], base, src, in);
  return Status::Ok();
}

Status RunConcat(const OpArgs& a) {
  const Shape& out = a.OutType().shape;
  size_t axis = static_cast<size_t>(a.op.Attrs<mps::AxisAttrs>().axis);
  Shape out_strides = RowMajorStrides(out);
  int64_t offset = 0;
  size_t width = Width(a);
  for (size_t i = 0; i < a.in.size(); ++i) {
    const Shape& in = a.InType(i).shape;
    StridedCopy(width, a.out[0] + offset * out_strides[axis] * static_cast<int64_t>(width), out_strides, a.in[i], 0,
                RowMajorStrides(in), in);
    offset += in[axis];
  }
  return Status::Ok();
}

Status RunPad(const OpArgs& a) {
  const Shape& in = a.InType(0).shape;
  const Shape& out = a.OutType().shape;
  size_t width = Width(a);
  int64_t n = a.OutType().NumElements();
  const mps::PadAttrs& pad = a.op.Attrs<mps::PadAttrs>();
  // Fill with the padding value, then copy the input into its window.
  Dispatch(a.OutType().dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T fill;
    if constexpr (kIsComplex<T>)
      fill = T(static_cast<typename T::value_type>(pad.value), 0);
    else if constexpr (kIsBool<T>)
      fill = T{static_cast<uint8_t>(pad.value != 0)};
    else
      fill = Num<T>::Store(static_cast<typename Num<T>::C>(pad.value));
    T* y = reinterpret_cast<T*>(a.out[0]);
    for (int64_t i = 0; i < n; ++i) y[i] = fill;
    return 0;
  });
  Shape out_strides = RowMajorStrides(out);
  int64_t base = 0;
  for (size_t i = 0; i < in.size(); ++i) base += pad.low[i] * out_strides[i];
  StridedCopy(width, a.out[0] + base * static_cast<int64_t>(width), out_strides, a.in[0], 0, RowMajorStrides(in), in);
  return Status::Ok();
}

Status RunCoordinate(const OpArgs& a) {
  const Shape& out = a.OutType().shape;
  size_t axis = static_cast<size_t>(a.op.Attrs<mps::AxisAttrs>().axis);
  Shape strides = RowMajorStrides(out);
  int64_t n = a.Count(), base = a.base;
  int64_t dim = out[axis], inner = strides[axis];
  return Dispatch(a.OutType().dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (!kIsInt<T>) {
      return a.Unsupported("produces integers only");
    } else {
      // Runs of equal or consecutive coordinates, not two divisions per element: a threefry counter is
      // an iota over every element of a random array, and the divisions cost more than the hash.
      T* y = reinterpret_cast<T*>(a.out[0]);
      if (n == 0) return Status::Ok();  // `inner` may be 0 then
      int64_t c = (base / inner) % dim, r = base % inner;
      for (int64_t i = 0; i < n;) {
        if (inner == 1) {  // c, c + 1, ..., dim - 1, then again from 0
          const int64_t len = std::min(n - i, dim - c);
          for (int64_t k = 0; k < len; ++k) y[i + k] = static_cast<T>(c + k);
          i += len;
          c = 0;
        } else {  // c repeated until the next step along the axis
          const int64_t len = std::min(n - i, inner - r);
          for (int64_t k = 0; k < len; ++k) y[i + k] = static_cast<T>(c);
          i += len;
          r = 0;
          c = c + 1 == dim ? 0 : c + 1;
        }
      }
      return Status::Ok();
    }
  });
}

}  // namespace jmp::exec::host
