// MaxPool4D, AvgPool4D and MaxPool4DGradient over rank-4 tensors, as op_kinds.def defines them:
// window sizes in `axes`, strides in `strides`, low/high padding in `starts`/`ends`, all four dims.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "exec/host/host_kernels.h"
#include "exec/host/host_parallel.h"
#include "exec/host/host_types.h"

namespace jmp::exec::host {

namespace {

using K = mps::OpKind;
using Shape = std::vector<int64_t>;

struct Window {
  int64_t k[4], s[4], lo[4];
  int64_t in[4], out[4];
  int64_t in_stride[4], out_stride[4];
};

// Checks the attributes against the shapes (an artifact may carry anything) and lays them out.
Status ReadWindow(const OpArgs& a, const Shape& in, const Shape& out, Window* w) {
  const mps::Pool4DAttrs& p = a.op.Attrs<mps::Pool4DAttrs>();
  if (in.size() != 4 || out.size() != 4 || p.window.size() != 4 || p.strides.size() != 4 || p.pad_low.size() != 4 ||
      p.pad_high.size() != 4)
    return a.Unsupported("needs rank-4 operands and four window sizes, strides and paddings");
  for (size_t d = 0; d < 4; ++d) {
    w->k[d] = p.window[d];
    w->s[d] = p.strides[d];
    w->lo[d] = p.pad_low[d];
    w->in[d] = in[d];
    w->out[d] = out[d];
    if (w->k[d] < 1 || w->s[d] < 1 || p.pad_low[d] < 0 || p.pad_high[d] < 0 || p.pad_low[d] > (int64_t{1} << 40) ||
        p.pad_high[d] > (int64_t{1} << 40))
      return a.Unsupported("has a non-positive window or stride, or negative padding");
    int64_t padded = in[d] + p.pad_low[d] + p.pad_high[d];
    int64_t expected = padded < w->k[d] ? 0 : (padded - w->k[d]) / w->s[d] + 1;
    if (out[d] != expected) return a.Unsupported("has a result shape its window does not give");
  }
  w->in_stride[3] = w->out_stride[3] = 1;
  for (int d = 2; d >= 0; --d) {
    w->in_stride[d] = w->in_stride[d + 1] * in[static_cast<size_t>(d) + 1];
    w->out_stride[d] = w->out_stride[d + 1] * out[static_cast<size_t>(d) + 1];
  }
  return Status::Ok();
}

// True when the window neither spans, strides nor pads the last dim (NHWC pooling): the kernels then
// run vectorisable loops along it.
bool LastDimIsLanes(const Window& w) { return w.k[3] == 1 && w.s[3] == 1 && w.lo[3] == 0 && w.out[3] == w.in[3]; }

// Calls f(input offset of lane 0) for each in-bounds window position of output row (o0, o1, o2).
template <typename F>
void ForWindowRows(const Window& w, const int64_t o[3], F f) {
  int64_t b[3], e[3];
  for (int d = 0; d < 3; ++d) {
    int64_t first = o[d] * w.s[d] - w.lo[d];
    b[d] = std::max<int64_t>(first, 0);
    e[d] = std::min<int64_t>(first + w.k[d], w.in[d]);
  }
  for (int64_t i0 = b[0]; i0 < e[0]; ++i0)
    for (int64_t i1 = b[1]; i1 < e[1]; ++i1)
      for (int64_t i2 = b[2]; i2 < e[2]; ++i2) f(i0 * w.in_stride[0] + i1 * w.in_stride[1] + i2 * w.in_stride[2]);
}

// Calls f(input offset) for each in-bounds element of the window at output position o, in row-major
// window order.
template <typename F>
void ForWindow(const Window& w, const int64_t o[4], F f) {
  int64_t first = o[3] * w.s[3] - w.lo[3];
  int64_t b3 = std::max<int64_t>(first, 0), e3 = std::min<int64_t>(first + w.k[3], w.in[3]);
  ForWindowRows(w, o, [&](int64_t base) {
    for (int64_t i3 = b3; i3 < e3; ++i3) f(base + i3);
  });
}

template <typename T>
void PoolLanes(const OpArgs& a, const Window& w, bool max) {
  using N = Num<T>;
  const T* x = reinterpret_cast<const T*>(a.in[0]);
  T* y = reinterpret_cast<T*>(a.out[0]);
  const int64_t lanes = w.out[3];
  const float size = static_cast<float>(w.k[0] * w.k[1] * w.k[2]);
  int64_t rows = w.out[0] * w.out[1] * w.out[2];
  ParallelFor(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(lanes, 1)), [&](int64_t r0, int64_t r1) {
    std::vector<float> acc(static_cast<size_t>(lanes));
    for (int64_t r = r0; r < r1; ++r) {
      int64_t o[3] = {r / (w.out[1] * w.out[2]), r / w.out[2] % w.out[1], r % w.out[2]};
      std::fill(acc.begin(), acc.end(), max ? -std::numeric_limits<float>::infinity() : 0.0f);
      float* ac = acc.data();
      ForWindowRows(w, o, [&](int64_t base) {
        const T* xs = x + base;
        if (max) {
          for (int64_t c = 0; c < lanes; ++c) {
            float v = N::Load(xs[c]), m = ac[c];
            bool wins = v > m || v != v || (v == m && std::signbit(m) && !std::signbit(v));
            ac[c] = wins && m == m ? v : m;
          }
        } else {
          for (int64_t c = 0; c < lanes; ++c) ac[c] += N::Load(xs[c]);
        }
      });
      T* ys = y + r * lanes;
      for (int64_t c = 0; c < lanes; ++c) ys[c] = N::Store(max ? ac[c] : ac[c] / size);
    }
  });
}

template <typename T>
void Pool(const OpArgs& a, const Window& w, bool max) {
  if (LastDimIsLanes(w)) return PoolLanes<T>(a, w, max);
  using N = Num<T>;
  const T* x = reinterpret_cast<const T*>(a.in[0]);
  T* y = reinterpret_cast<T*>(a.out[0]);
  const double size = static_cast<double>(w.k[0] * w.k[1] * w.k[2] * w.k[3]);
  int64_t rows = w.out[0] * w.out[1] * w.out[2];
  ParallelFor(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(w.out[3], 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      int64_t o[4] = {r / (w.out[1] * w.out[2]), r / w.out[2] % w.out[1], r % w.out[2], 0};
      for (o[3] = 0; o[3] < w.out[3]; ++o[3]) {
        float acc = max ? -std::numeric_limits<float>::infinity() : 0.0f;
        if (max) {
          ForWindow(w, o, [&](int64_t i) {
            float v = N::Load(x[i]);
            bool wins = v > acc || std::isnan(v) || (v == acc && std::signbit(acc) && !std::signbit(v));
            acc = wins && !std::isnan(acc) ? v : acc;
          });
        } else {
          ForWindow(w, o, [&](int64_t i) { acc += N::Load(x[i]); });
          acc = static_cast<float>(acc / size);
        }
        y[r * w.out[3] + o[3]] = N::Store(acc);
      }
    }
  });
}

// StableHLO's select_and_scatter with select GE: each window keeps its first element and moves to a
// later one only when !(kept >= later), so ties go to the first maximum; the window's gradient is
// added there. Windows overlap when strides are below window sizes, so only batches (dim 0, when the
// window neither spans nor strides it) run in parallel.
template <typename T>
void PoolGradient(const OpArgs& a, const Window& w) {
  using N = Num<T>;
  const T* g = reinterpret_cast<const T*>(a.in[0]);
  const T* x = reinterpret_cast<const T*>(a.in[1]);
  T* y = reinterpret_cast<T*>(a.out[0]);
  int64_t in_total = w.in[0] * w.in_stride[0];
  // Gradients accumulate in float: straight in the output for float32, else in a scratch buffer.
  std::vector<float> scratch(std::is_same_v<T, float> ? 0 : static_cast<size_t>(in_total), 0.0f);
  float* acc = std::is_same_v<T, float> ? reinterpret_cast<float*>(a.out[0]) : scratch.data();
  if (std::is_same_v<T, float>) std::memset(acc, 0, static_cast<size_t>(in_total) * sizeof(float));
  auto batch_range = [&](int64_t b0, int64_t b1) {
    int64_t o[4];
    for (o[0] = b0; o[0] < b1; ++o[0])
      for (o[1] = 0; o[1] < w.out[1]; ++o[1])
        for (o[2] = 0; o[2] < w.out[2]; ++o[2])
          for (o[3] = 0; o[3] < w.out[3]; ++o[3]) {
            int64_t pick = -1;
            float best = 0;
            ForWindow(w, o, [&](int64_t i) {
              float v = N::Load(x[i]);
              if (pick < 0 || !(best >= v)) {
                pick = i;
                best = v;
              }
            });
            int64_t out_index = o[0] * w.out_stride[0] + o[1] * w.out_stride[1] + o[2] * w.out_stride[2] + o[3];
            if (pick >= 0) acc[pick] += N::Load(g[out_index]);
          }
  };
  // NHWC: each output row's window picks per lane, vectorised along the lanes.
  auto batch_range_lanes = [&](int64_t b0, int64_t b1) {
    const int64_t lanes = w.out[3];
    std::vector<float> best(static_cast<size_t>(lanes));
    std::vector<int64_t> pick(static_cast<size_t>(lanes));
    int64_t o[3];
    for (o[0] = b0; o[0] < b1; ++o[0])
      for (o[1] = 0; o[1] < w.out[1]; ++o[1])
        for (o[2] = 0; o[2] < w.out[2]; ++o[2]) {
          bool first = true;
          ForWindowRows(w, o, [&](int64_t base) {
            const T* xs = x + base;
            for (int64_t c = 0; c < lanes; ++c) {
              float v = N::Load(xs[c]);
              bool take = first || !(best[static_cast<size_t>(c)] >= v);
              best[static_cast<size_t>(c)] = take ? v : best[static_cast<size_t>(c)];
              pick[static_cast<size_t>(c)] = take ? base + c : pick[static_cast<size_t>(c)];
            }
            first = false;
          });
          if (first) continue;  // a window of padding only
          const T* gs = g + o[0] * w.out_stride[0] + o[1] * w.out_stride[1] + o[2] * w.out_stride[2];
          for (int64_t c = 0; c < lanes; ++c) acc[pick[static_cast<size_t>(c)]] += N::Load(gs[c]);
        }
  };
  bool batches_disjoint = w.k[0] == 1 && w.s[0] == 1 && w.lo[0] == 0;
  bool lanes = LastDimIsLanes(w);
  auto run = [&](int64_t b0, int64_t b1) { lanes ? batch_range_lanes(b0, b1) : batch_range(b0, b1); };
  if (batches_disjoint)
    ParallelFor(w.out[0], 1, run);
  else
    run(0, w.out[0]);
  if constexpr (!std::is_same_v<T, float>)
    for (int64_t i = 0; i < in_total; ++i) y[i] = N::Store(acc[i]);
}

template <typename F>
Status FloatTypes(const OpArgs& a, DType t, F f) {
  switch (t) {
    case DType::kF32: f(float{}); return Status::Ok();
    case DType::kF16: f(f16{}); return Status::Ok();
    case DType::kBF16: f(bf16{}); return Status::Ok();
    default: return a.Unsupported("is defined for f32, f16 and bf16");
  }
}

}  // namespace

Status RunPool4D(const OpArgs& a) {
  Window w;
  JMP_RETURN_IF_ERROR(ReadWindow(a, a.InType(0).shape, a.OutType().shape, &w));
  if (a.OutType().NumElements() == 0) return Status::Ok();
  bool max = a.op.kind == K::kMaxPool4D;
  return FloatTypes(a, a.OutType().dtype, [&](auto tag) { Pool<decltype(tag)>(a, w, max); });
}

Status RunMaxPool4DGradient(const OpArgs& a) {
  if (a.op.inputs.size() != 2 || a.InType(1).shape != a.OutType().shape || a.InType(0).dtype != a.OutType().dtype ||
      a.InType(1).dtype != a.OutType().dtype)
    return a.Unsupported("needs (gradient, source) with the source's shape and one type");
  Window w;
  JMP_RETURN_IF_ERROR(ReadWindow(a, a.OutType().shape, a.InType(0).shape, &w));
  if (a.OutType().NumElements() == 0) return Status::Ok();
  return FloatTypes(a, a.OutType().dtype, [&](auto tag) { PoolGradient<decltype(tag)>(a, w); });
}

}  // namespace jmp::exec::host
