// Gather and scatter kernels (GatherAlongAxis, GatherND, ScatterND, ScatterAlongAxis): index
// tensors select rows of the data; out-of-range indices follow op_kinds.def.
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

// The flat offset in data (row-major strides ds) of element i of an indices-shaped tensor (strides
// es, no larger than the data off the axis) once its coordinate along `axis` is replaced by k.
int64_t OffsetAlongAxis(int64_t i, const Shape& es, const Shape& ds, size_t axis, int64_t k) {
  int64_t offset = 0;
  for (size_t d = 0; d < es.size(); ++d) {
    offset += (d == axis ? k : i / es[d]) * ds[d];
    i %= es[d];
  }
  return offset;
}

// Reads index element i as int64 from an int32 or int64 tensor.
int64_t IndexAt(const uint8_t* p, DType t, int64_t i) {
  if (t == DType::kI64) {
    int64_t v;
    std::memcpy(&v, p + i * 8, 8);
    return v;
  }
  int32_t v;
  std::memcpy(&v, p + i * 4, 4);
  return v;
}

}  // namespace

namespace {

// out[o, j, i] = data[o, index[o, j, i], i] with data [outer, dim, inner] and out/index [outer, n, inner]:
// one pass over the output, rows in parallel. False when an index is out of range.
template <typename T, typename I>
bool GatherRows(const T* data, const I* index, T* out, int64_t outer, int64_t dim, int64_t n, int64_t inner) {
  std::atomic<bool> ok{true};
  ParallelFor(outer * n, std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t o = r / n;
      const I* k = index + r * inner;
      T* y = out + r * inner;
      const T* x = data + o * dim * inner;
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t row = static_cast<int64_t>(k[i]);
        if (row < 0 || row >= dim) {
          ok.store(false, std::memory_order_relaxed);
          return;
        }
        y[i] = x[row * inner + i];
      }
    }
  });
  return ok.load();
}

// Any shapes (indices may be smaller than the data off the axis) and element widths.
Status GatherAlongAxisGeneral(const OpArgs& a) {
  const Shape& data = a.InType(0).shape;
  const Shape& out = a.OutType().shape;
  DType it = a.InType(1).dtype;
  size_t axis = static_cast<size_t>(a.op.Attrs<mps::AxisAttrs>().axis);
  for (size_t d = 0; d < out.size(); ++d)
    if (d != axis && out[d] > data[d]) return Internal("GatherAlongAxis: indices larger than the data off the axis");
  size_t width = Width(a);
  Shape ds = RowMajorStrides(data), os = RowMajorStrides(out);
  int64_t n = a.OutType().NumElements();
  for (int64_t i = 0; i < n; ++i) {
    int64_t k = IndexAt(a.in[1], it, i);
    if (k < 0 || k >= data[axis]) return Internal("GatherAlongAxis: index " + std::to_string(k) + " out of range");
    int64_t src = OffsetAlongAxis(i, os, ds, axis, k);
    std::memcpy(a.out[0] + i * static_cast<int64_t>(width), a.in[0] + src * static_cast<int64_t>(width), width);
  }
  return Status::Ok();
}

template <typename T>
bool GatherRowsAnyIndex(const OpArgs& a, int64_t outer, int64_t dim, int64_t n, int64_t inner) {
  const T* data = reinterpret_cast<const T*>(a.in[0]);
  T* out = reinterpret_cast<T*>(a.out[0]);
  if (a.InType(1).dtype == DType::kI64)
    return GatherRows(data, reinterpret_cast<const int64_t*>(a.in[1]), out, outer, dim, n, inner);
  return GatherRows(data, reinterpret_cast<const int32_t*>(a.in[1]), out, outer, dim, n, inner);
}

}  // namespace

Status RunGatherAlongAxis(const OpArgs& a) {
  const Shape& data = a.InType(0).shape;
  const Shape& out = a.OutType().shape;
  const size_t axis = static_cast<size_t>(a.op.Attrs<mps::AxisAttrs>().axis);
  if (data.size() != out.size() || axis >= out.size()) return a.Unsupported("needs data and indices of one rank");
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < out.size(); ++d) {
    if (d != axis && data[d] != out[d]) return GatherAlongAxisGeneral(a);
    if (d < axis) outer *= out[d];
    if (d > axis) inner *= out[d];
  }
  const int64_t dim = data[axis], n = out[axis];
  if (outer * n * inner == 0) return Status::Ok();
  bool ok = false;
  switch (Width(a)) {
    case 1: ok = GatherRowsAnyIndex<uint8_t>(a, outer, dim, n, inner); break;
    case 2: ok = GatherRowsAnyIndex<uint16_t>(a, outer, dim, n, inner); break;
    case 4: ok = GatherRowsAnyIndex<uint32_t>(a, outer, dim, n, inner); break;
    case 8: ok = GatherRowsAnyIndex<uint64_t>(a, outer, dim, n, inner); break;
    default: return GatherAlongAxisGeneral(a);
  }
  if (!ok) return Internal("GatherAlongAxis: index out of range");
  return Status::Ok();
}

namespace {

// The flat offset (in elements) of the slice an index row selects; false when out of range.
bool RowOffset(const OpArgs& a, const Shape& data, int64_t row, int64_t k, const Shape& strides, int64_t* offset) {
  DType it = a.op.kind == mps::OpKind::kGatherND ? a.InType(1).dtype : a.InType(2).dtype;
  const uint8_t* idx = a.op.kind == mps::OpKind::kGatherND ? a.in[1] : a.in[2];
  *offset = 0;
  for (int64_t c = 0; c < k; ++c) {
    int64_t v = IndexAt(idx, it, row * k + c);
    if (v < 0 || v >= data[static_cast<size_t>(c)]) return false;
    *offset += v * strides[static_cast<size_t>(c)];
  }
  return true;
}

}  // namespace

Status RunGatherND(const OpArgs& a) {
  if (a.op.Attrs<mps::GatherNDAttrs>().batch_dims != 0)
    return a.Unsupported("with batch dimensions is not implemented on the host");
  const Shape& data = a.InType(0).shape;
  const Shape& ishape = a.InType(1).shape;
  int64_t k = ishape.empty() ? 0 : ishape.back();
  if (k > static_cast<int64_t>(data.size())) return a.Unsupported("has more index components than data dims");
  int64_t rows = k ? a.InType(1).NumElements() / k : 0;
  int64_t slice = 1;
  for (size_t d = static_cast<size_t>(k); d < data.size(); ++d) slice *= data[d];
  Shape strides = RowMajorStrides(data);
  size_t bytes = static_cast<size_t>(slice) * Width(a);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t off;
    if (!RowOffset(a, data, r, k, strides, &off)) return Internal("GatherND: index out of range");
    std::memcpy(a.out[0] + r * static_cast<int64_t>(bytes), a.in[0] + off * static_cast<int64_t>(Width(a)), bytes);
  }
  return Status::Ok();
}

namespace {

// Combines src into dst by a scatter mode (op_kinds.def: ScatterND); false when the type lacks it.
template <typename T>
bool Combine(T& dst, const T& src, mps::ScatterMode mode) {
  using S = mps::ScatterMode;
  if (mode == S::kSet) {
    dst = src;
    return true;
  }
  if constexpr (kIsBool<T>) {
    return false;
  } else if constexpr (kIsComplex<T>) {
    if (mode == S::kAdd)
      dst = dst + src;
    else if (mode == S::kSub)
      dst = dst - src;
    else if (mode == S::kMul)
      dst = dst * src;
    else
      return false;
  } else if constexpr (kIsInt<T>) {
    using UT = std::make_unsigned_t<T>;  // wrap-around, as the elementwise ops do
    UT x = static_cast<UT>(dst), v = static_cast<UT>(src);
    switch (mode) {
      case S::kAdd: dst = static_cast<T>(static_cast<UT>(x + v)); break;
      case S::kSub: dst = static_cast<T>(static_cast<UT>(x - v)); break;
      case S::kMul: dst = static_cast<T>(static_cast<UT>(static_cast<uint64_t>(x) * v)); break;
      case S::kDiv:
        dst = src == 0                                ? T(0)
              : (std::is_signed_v<T> && src == T(-1)) ? static_cast<T>(UT(0) - x)
                                                      : static_cast<T>(dst / src);
        break;
      case S::kMin: dst = src < dst ? src : dst; break;
      case S::kMax: dst = src > dst ? src : dst; break;
      case S::kSet: dst = src; break;
    }
  } else {
    using N = Num<T>;
    auto x = N::Load(dst), v = N::Load(src);
    using C = decltype(x);
    C res = v;
    switch (mode) {
      case S::kAdd: res = static_cast<C>(x + v); break;
      case S::kSub: res = static_cast<C>(x - v); break;
      case S::kMul: res = static_cast<C>(x * v); break;
      case S::kDiv: res = v == C(0) ? C(0) : static_cast<C>(x / v); break;
      case S::kMin: res = (v != v || v < x) ? v : x; break;
      case S::kMax: res = (v != v || v > x) ? v : x; break;
      case S::kSet: res = v; break;
    }
    dst = N::Store(res);
  }
  return true;
}

}  // namespace

// The output may be the data's own buffer (the plan scatters in place into a value nothing reads
// afterwards); the copy is skipped then.
Status RunScatterND(const OpArgs& a) {
  if (a.InType(1).dtype != a.OutType().dtype) return a.Unsupported("needs updates of the data's type");
  const Shape& data = a.InType(0).shape;
  const Shape& ishape = a.InType(2).shape;
  int64_t k = ishape.empty() ? 0 : ishape.back();
  int64_t rows = k ? a.InType(2).NumElements() / k : 0;
  int64_t slice = 1;
  for (size_t d = static_cast<size_t>(k); d < data.size(); ++d) slice *= data[d];
  Shape strides = RowMajorStrides(data);
  if (a.out[0] != a.in[0]) std::memcpy(a.out[0], a.in[0], a.OutType().ByteSize());
  const mps::ScatterMode mode = a.op.Attrs<mps::ScatterAttrs>().mode;
  return Dispatch(a.OutType().dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    T* y = reinterpret_cast<T*>(a.out[0]);
    const T* u = reinterpret_cast<const T*>(a.in[1]);
    for (int64_t r = 0; r < rows; ++r) {
      int64_t off;
      if (!RowOffset(a, data, r, k, strides, &off)) return Internal("ScatterND: index out of range");
      if (mode == mps::ScatterMode::kSet) {
        std::memcpy(y + off, u + r * slice, static_cast<size_t>(slice) * sizeof(T));
        continue;
      }
      for (int64_t i = 0; i < slice; ++i)
        if (!Combine(y[off + i], u[r * slice + i], mode)) return a.Unsupported("has a mode this type does not have");
    }
    return Status::Ok();
  });
}

Status RunScatterAlongAxis(const OpArgs& a) {
  const Shape& data = a.InType(0).shape;
  const Shape& ushape = a.InType(1).shape;
  const int64_t along = a.op.Attrs<mps::ScatterAttrs>().axis;
  if (a.InType(1).dtype != a.OutType().dtype || a.InType(2).shape != ushape || ushape.size() != data.size() ||
      along < 0 || along >= static_cast<int64_t>(data.size()))
    return a.Unsupported("needs updates and indices of one shape, the data's rank and type, and an axis");
  size_t axis = static_cast<size_t>(along);
  for (size_t d = 0; d < data.size(); ++d)
    if (ushape[d] > data[d] && d != axis) return a.Unsupported("has updates wider than the data");
  Shape ds = RowMajorStrides(data), us = RowMajorStrides(ushape);
  if (a.out[0] != a.in[0]) std::memcpy(a.out[0], a.in[0], a.OutType().ByteSize());
  int64_t n = a.InType(1).NumElements();
  const mps::ScatterMode mode = a.op.Attrs<mps::ScatterAttrs>().mode;
  DType it = a.InType(2).dtype;
  return Dispatch(a.OutType().dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    T* y = reinterpret_cast<T*>(a.out[0]);
    const T* u = reinterpret_cast<const T*>(a.in[1]);
    for (int64_t i = 0; i < n; ++i) {
      int64_t c = IndexAt(a.in[2], it, i);
      if (c < 0 || c >= data[axis]) return Internal("ScatterAlongAxis: index " + std::to_string(c) + " out of range");
      int64_t dst = OffsetAlongAxis(i, us, ds, axis, c);
      if (!Combine(y[dst], u[i], mode)) return a.Unsupported("has a mode this type does not have");
    }
    return Status::Ok();
  });
}

}  // namespace jmp::exec::host
