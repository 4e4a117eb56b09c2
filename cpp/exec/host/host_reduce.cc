// Reductions (ReductionX, ArgMaximum/ArgMinimum). They first lay the input out as
// [kept..., reduced...] so each output element reduces one contiguous row.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <vector>

#include "exec/host/host_domain.h"
#include "exec/host/host_fastmath.h"
#include "exec/host/host_kernels.h"
#include "exec/host/host_parallel.h"
#include "exec/host/host_types.h"

namespace jmp::exec::host {

namespace {

using Shape = std::vector<int64_t>;
using K = mps::OpKind;

Shape RowMajor(const Shape& shape) {
  Shape s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

// Copies x (elements of type T) into [kept dims..., reduced dims...] order; returns rows and row length.
template <typename T>
std::vector<T> KeptThenReduced(const T* x, const Shape& shape, const std::vector<int64_t>& axes, int64_t* rows,
                               int64_t* row_len) {
  std::vector<bool> reduced(shape.size(), false);
  for (int64_t ax : axes) reduced[static_cast<size_t>(ax)] = true;
  std::vector<size_t> order;
  for (size_t d = 0; d < shape.size(); ++d)
    if (!reduced[d]) order.push_back(d);
  for (size_t d = 0; d < shape.size(); ++d)
    if (reduced[d]) order.push_back(d);
  *rows = 1;
  *row_len = 1;
  for (size_t d = 0; d < shape.size(); ++d) (reduced[d] ? *row_len : *rows) *= shape[d];
  int64_t n = *rows * *row_len;
  std::vector<T> out(static_cast<size_t>(n));
  Shape strides = RowMajor(shape);
  Shape pshape, pstrides;
  for (size_t d : order) {
    pshape.push_back(shape[d]);
    pstrides.push_back(strides[d]);
  }
  bool identity = true;
  for (size_t i = 0; i < order.size(); ++i) identity &= order[i] == i;
  if (identity) {
    std::copy(x, x + n, out.begin());
    return out;
  }
  std::vector<int64_t> idx(pshape.size(), 0);
  int64_t off = 0;
  for (int64_t i = 0; i < n; ++i) {
    out[static_cast<size_t>(i)] = x[off];
    for (size_t k = pshape.size(); k-- > 0;) {
      ++idx[k];
      off += pstrides[k];
      if (idx[k] < pshape[k]) break;
      off -= pstrides[k] * pshape[k];
      idx[k] = 0;
    }
  }
  return out;
}

// Sums of rows r0..r1 of n floats, in double, eight lanes at a time (the lanes become two AVX2 registers).
JMP_VECTOR_LOOP(RowSumsF32, (const float* x, float* y, int64_t r0, int64_t r1, int64_t n), (x, y, r0, r1, n), {
  for (int64_t r = r0; r < r1; ++r) {
    const float* row = x + r * n;
    double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
      for (int j = 0; j < 8; ++j) lanes[j] += row[i + j];
    double acc = 0.0;
    for (; i < n; ++i) acc += row[i];
    for (double l : lanes) acc += l;
    y[r] = static_cast<float>(acc);
  }
})

// Sums of columns c0..c1 of a [rows, cols] float matrix, in double, row by row.
JMP_VECTOR_LOOP(ColumnSumsF32, (const float* x, float* y, int64_t c0, int64_t c1, int64_t rows, int64_t cols),
                (x, y, c0, c1, rows, cols), {
                  constexpr int64_t kBlock = 256;  // the accumulators stay in L1
                  double acc[kBlock];
                  for (int64_t b0 = c0; b0 < c1; b0 += kBlock) {
                    const int64_t b1 = std::min(c1, b0 + kBlock);
                    for (int64_t j = b0; j < b1; ++j) acc[j - b0] = 0.0;
                    for (int64_t i = 0; i < rows; ++i) {
                      const float* row = x + i * cols;
                      for (int64_t j = b0; j < b1; ++j) acc[j - b0] += row[j];
                    }
                    for (int64_t j = b0; j < b1; ++j) y[j] = static_cast<float>(acc[j - b0]);
                  }
                })

// float32 sums, maxima and minima whose reduced dims are all after, or all before, the kept ones (size-1
// dims aside): no relayout, split across threads. Sums accumulate in double, eight lanes at a time.
bool FastReduceF32(const OpArgs& a, Reduction how) {
  const Shape& shape = a.InType(0).shape;
  if (how != Reduction::kSum && how != Reduction::kMaximum && how != Reduction::kMinimum) return false;
  std::vector<bool> reduced(shape.size(), false);
  for (int64_t ax : a.op.Attrs<mps::AxesAttrs>().axes) reduced[static_cast<size_t>(ax)] = true;
  int64_t kept_n = 1, red_n = 1;
  int first_red = -1, last_red = -1, first_kept = -1, last_kept = -1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    int di = static_cast<int>(d);
    if (reduced[d]) {
      red_n *= shape[d];
      if (first_red < 0) first_red = di;
      last_red = di;
    } else {
      kept_n *= shape[d];
      if (first_kept < 0) first_kept = di;
      last_kept = di;
    }
  }
  bool trailing = first_red < 0 || first_kept < 0 || last_kept < first_red;
  bool leading = !trailing && last_red < first_kept;
  if ((!trailing && !leading) || red_n == 0) return false;
  const float* x = reinterpret_cast<const float*>(a.in[0]);
  float* y = reinterpret_cast<float*>(a.out[0]);
  const bool sum = how == Reduction::kSum, max = how == Reduction::kMaximum;
  auto combine = [&](double acc, float v) {
    if (std::isnan(acc) || std::isnan(v)) return static_cast<double>(NAN);
    return max ? (v > acc ? v : acc) : (v < acc ? v : acc);
  };
  const double init = sum ? 0.0 : max ? -INFINITY : INFINITY;
  if (trailing && sum) {
    ParallelFor(kept_n, std::max<int64_t>(1, 16384 / red_n),
                [&](int64_t r0, int64_t r1) { RowSumsF32(x, y, r0, r1, red_n); });
  } else if (trailing) {
    ParallelFor(kept_n, std::max<int64_t>(1, 16384 / red_n), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const float* row = x + r * red_n;
        double acc = init;
        {
          for (int64_t i = 0; i < red_n; ++i) acc = combine(acc, row[i]);
        }
        y[r] = static_cast<float>(acc);
      }
    });
  } else if (sum) {
    ParallelFor(kept_n, 256, [&](int64_t c0, int64_t c1) { ColumnSumsF32(x, y, c0, c1, red_n, kept_n); });
  } else {
    // Columns: out[j] combines x[i * kept_n + j] over i.
    ParallelFor(kept_n, 256, [&](int64_t c0, int64_t c1) {
      std::vector<double> acc(static_cast<size_t>(c1 - c0), init);
      for (int64_t i = 0; i < red_n; ++i) {
        const float* row = x + i * kept_n;
        for (int64_t j = c0; j < c1; ++j)
          acc[static_cast<size_t>(j - c0)] = combine(acc[static_cast<size_t>(j - c0)], row[j]);
      }
      for (int64_t j = c0; j < c1; ++j) y[j] = static_cast<float>(acc[static_cast<size_t>(j - c0)]);
    });
  }
  return true;
}

template <typename T>
Status Reduce(const OpArgs& a, Reduction how) {
  using N = Num<T>;
  using R = Reduction;
  if constexpr (std::is_same_v<T, float>)
    if (FastReduceF32(a, how)) return Status::Ok();
  int64_t rows, len;
  std::vector<T> x = KeptThenReduced(reinterpret_cast<const T*>(a.in[0]), a.InType(0).shape,
                                     a.op.Attrs<mps::AxesAttrs>().axes, &rows, &len);
  T* y = reinterpret_cast<T*>(a.out[0]);
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = x.data() + r * len;
    if constexpr (kIsBool<T>) {
      bool acc = how == R::kAnd;
      for (int64_t i = 0; i < len; ++i) acc = how == R::kAnd ? (acc && row[i].v) : (acc || row[i].v);
      if (how != R::kAnd && how != R::kOr) return a.Unsupported("is not defined for bool");
      y[r] = boolean{static_cast<uint8_t>(acc)};
    } else if constexpr (kIsComplex<T>) {
      if (how != R::kSum) return a.Unsupported("is not defined for complex values");
      std::complex<double> acc = 0;
      for (int64_t i = 0; i < len; ++i) acc += std::complex<double>(row[i]);
      y[r] = T(acc);
    } else if constexpr (kIsFloat<T>) {
      double acc = 0;
      switch (how) {
        case R::kSum:
          acc = 0;
          for (int64_t i = 0; i < len; ++i) acc += N::Load(row[i]);
          break;
        case R::kProduct:
          acc = 1;
          for (int64_t i = 0; i < len; ++i) acc *= N::Load(row[i]);
          break;
        case R::kMaximum:
          acc = -INFINITY;
          for (int64_t i = 0; i < len; ++i) {
            double v = N::Load(row[i]);
            if (std::isnan(v) || v > acc) acc = v;
            if (std::isnan(acc)) break;
          }
          break;
        case R::kMinimum:
          acc = INFINITY;
          for (int64_t i = 0; i < len; ++i) {
            double v = N::Load(row[i]);
            if (std::isnan(v) || v < acc) acc = v;
            if (std::isnan(acc)) break;
          }
          break;
        case R::kAnd:
        case R::kOr: return a.Unsupported("is not defined for floats");
      }
      y[r] = N::Store(static_cast<typename N::C>(acc));
    } else {
      using UT = std::make_unsigned_t<T>;
      UT acc = 0;
      switch (how) {
        case R::kSum:
          acc = 0;
          for (int64_t i = 0; i < len; ++i) acc = static_cast<UT>(acc + static_cast<UT>(row[i]));
          break;
        case R::kProduct:
          acc = 1;
          for (int64_t i = 0; i < len; ++i)
            acc = static_cast<UT>(static_cast<uint64_t>(acc) * static_cast<uint64_t>(static_cast<UT>(row[i])));
          break;
        case R::kMaximum: {
          T m = std::numeric_limits<T>::lowest();
          for (int64_t i = 0; i < len; ++i) m = std::max(m, row[i]);
          acc = static_cast<UT>(m);
          break;
        }
        case R::kMinimum: {
          T m = std::numeric_limits<T>::max();
          for (int64_t i = 0; i < len; ++i) m = std::min(m, row[i]);
          acc = static_cast<UT>(m);
          break;
        }
        case R::kAnd:
        case R::kOr: return a.Unsupported("is not defined for integers");
      }
      y[r] = static_cast<T>(acc);
    }
  }
  return Status::Ok();
}

// Ties give the smallest index; a NaN counts as both the maximum and the minimum, the first one wins.
template <typename T>
Status ArgReduce(const OpArgs& a) {
  using N = Num<T>;
  int64_t rows, len;
  std::vector<T> x = KeptThenReduced(reinterpret_cast<const T*>(a.in[0]), a.InType(0).shape,
                                     {a.op.Attrs<mps::AxisAttrs>().axis}, &rows, &len);
  int32_t* y = reinterpret_cast<int32_t*>(a.out[0]);
  bool max = a.op.kind == K::kReductionArgMaximum;
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = x.data() + r * len;
    int64_t best = 0;
    auto bv = N::Load(row[0]);
    for (int64_t i = 1; i < len; ++i) {
      auto v = N::Load(row[i]);
      if constexpr (kIsFloat<T>) {
        if (std::isnan(bv)) break;
        if (std::isnan(v)) {
          best = i;
          bv = v;
          break;
        }
      }
      if (max ? v > bv : v < bv) {
        best = i;
        bv = v;
      }
    }
    y[r] = static_cast<int32_t>(best);
  }
  return Status::Ok();
}

}  // namespace

Status RunReduction(const OpArgs& a, Reduction how) {
  return Dispatch(a.InType(0).dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    return Reduce<T>(a, how);
  });
}

Status RunArgReduction(const OpArgs& a) {
  if (a.OutType().dtype != DType::kI32) return a.Unsupported("must produce int32");
  if (a.InType(0).shape.at(static_cast<size_t>(a.op.Attrs<mps::AxisAttrs>().axis)) == 0)
    return a.Unsupported("reduces an empty axis");
  return Dispatch(a.InType(0).dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (!kInDomain<T, K::kReductionArgMaximum, K::kReductionArgMinimum>)
      return OutsideDomain(a);
    else
      return ArgReduce<T>(a);
  });
}

}  // namespace jmp::exec::host
