// MatMul on a BLAS, reductions, scans and sorts. Reductions first lay the input out as
// [kept..., reduced...] so each output element reduces one contiguous row.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <vector>

#include "exec/host/host_kernels.h"
#include "exec/host/host_parallel.h"
#include "exec/host/host_types.h"

#if defined(JMP_BLAS_ACCELERATE)
#include <Accelerate/Accelerate.h>
#define JMP_SGEMM cblas_sgemm
#define JMP_CGEMM cblas_cgemm
#elif defined(JMP_BLAS_SCIPY_OPENBLAS)
#include <cblas.h>
#define JMP_SGEMM scipy_cblas_sgemm
#define JMP_CGEMM scipy_cblas_cgemm
#else
#error "no BLAS configured"
#endif

namespace jmp::exec::host {

// OpenBLAS runs one thread per call: RunMatMul splits its calls across the host executor's own
// threads (host_parallel.h), so OpenBLAS's spinning workers never compete with them for the cores.
// JMP_HOST_BLAS_THREADS=N gives OpenBLAS N threads instead. Accelerate manages its own threads.
void ConfigureBlasThreads() {
#if defined(JMP_BLAS_SCIPY_OPENBLAS)
  int threads = 1;
  if (const char* env = std::getenv("JMP_HOST_BLAS_THREADS")) threads = std::max(1, std::atoi(env));
  scipy_openblas_set_num_threads(threads);
#endif
}

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

// float32 sums, maxima and minima whose reduced dims are all after, or all before, the kept ones (size-1
// dims aside): no relayout, split across threads. Sums accumulate in double, eight lanes at a time.
bool FastReduceF32(const OpArgs& a, Reduction how) {
  const Shape& shape = a.InType(0).shape;
  if (how != Reduction::kSum && how != Reduction::kMaximum && how != Reduction::kMinimum) return false;
  std::vector<bool> reduced(shape.size(), false);
  for (int64_t ax : a.op.axes) reduced[static_cast<size_t>(ax)] = true;
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
  if (trailing) {
    ParallelFor(kept_n, std::max<int64_t>(1, 16384 / red_n), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const float* row = x + r * red_n;
        double acc = init;
        if (sum) {
          double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
          int64_t i = 0;
          for (; i + 8 <= red_n; i += 8)
            for (int j = 0; j < 8; ++j) lanes[j] += row[i + j];
          for (; i < red_n; ++i) acc += row[i];
          for (double l : lanes) acc += l;
        } else {
          for (int64_t i = 0; i < red_n; ++i) acc = combine(acc, row[i]);
        }
        y[r] = static_cast<float>(acc);
      }
    });
  } else {
    // Columns: out[j] combines x[i * kept_n + j] over i.
    ParallelFor(kept_n, 256, [&](int64_t c0, int64_t c1) {
      std::vector<double> acc(static_cast<size_t>(c1 - c0), init);
      for (int64_t i = 0; i < red_n; ++i) {
        const float* row = x + i * kept_n;
        if (sum) {
          for (int64_t j = c0; j < c1; ++j) acc[static_cast<size_t>(j - c0)] += row[j];
        } else {
          for (int64_t j = c0; j < c1; ++j) acc[static_cast<size_t>(j - c0)] = combine(acc[static_cast<size_t>(j - c0)], row[j]);
        }
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
  std::vector<T> x = KeptThenReduced(reinterpret_cast<const T*>(a.in[0]), a.InType(0).shape, a.op.axes, &rows, &len);
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
        case R::kSum: acc = 0; for (int64_t i = 0; i < len; ++i) acc += N::Load(row[i]); break;
        case R::kProduct: acc = 1; for (int64_t i = 0; i < len; ++i) acc *= N::Load(row[i]); break;
        case R::kMaximum:
          acc = -INFINITY;
          for (int64_t i = 0; i < len; ++i) { double v = N::Load(row[i]); if (std::isnan(v) || v > acc) acc = v; if (std::isnan(acc)) break; }
          break;
        case R::kMinimum:
          acc = INFINITY;
          for (int64_t i = 0; i < len; ++i) { double v = N::Load(row[i]); if (std::isnan(v) || v < acc) acc = v; if (std::isnan(acc)) break; }
          break;
        case R::kAnd: case R::kOr: return a.Unsupported("is not defined for floats");
      }
      y[r] = N::Store(static_cast<typename N::C>(acc));
    } else {
      using UT = std::make_unsigned_t<T>;
      UT acc = 0;
      switch (how) {
        case R::kSum: acc = 0; for (int64_t i = 0; i < len; ++i) acc = static_cast<UT>(acc + static_cast<UT>(row[i])); break;
        case R::kProduct:
          acc = 1;
          for (int64_t i = 0; i < len; ++i) acc = static_cast<UT>(static_cast<uint64_t>(acc) * static_cast<uint64_t>(static_cast<UT>(row[i])));
          break;
        case R::kMaximum: { T m = std::numeric_limits<T>::lowest(); for (int64_t i = 0; i < len; ++i) m = std::max(m, row[i]); acc = static_cast<UT>(m); break; }
        case R::kMinimum: { T m = std::numeric_limits<T>::max(); for (int64_t i = 0; i < len; ++i) m = std::min(m, row[i]); acc = static_cast<UT>(m); break; }
        case R::kAnd: case R::kOr: return a.Unsupported("is not defined for integers");
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
  std::vector<T> x = KeptThenReduced(reinterpret_cast<const T*>(a.in[0]), a.InType(0).shape, a.op.axes, &rows, &len);
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
        if (std::isnan(v)) { best = i; bv = v; break; }
      }
      if (max ? v > bv : v < bv) { best = i; bv = v; }
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
  if (a.InType(0).shape.at(static_cast<size_t>(a.op.axes.at(0))) == 0) return a.Unsupported("reduces an empty axis");
  return Dispatch(a.InType(0).dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (kIsComplex<T> || kIsBool<T>) return a.Unsupported("is not defined for this type");
    else return ArgReduce<T>(a);
  });
}

Status RunMatMul(const OpArgs& a) {
  const Shape& ls = a.InType(0).shape;
  const Shape& rs = a.InType(1).shape;
  const Shape& os = a.OutType().shape;
  if (ls.size() < 2 || rs.size() != ls.size() || os.size() != ls.size()) return a.Unsupported("needs operands of one rank >= 2");
  size_t r = ls.size();
  int64_t m = ls[r - 2], k = ls[r - 1], n = rs[r - 1];
  if (rs[r - 2] != k) return a.Unsupported("has mismatched contraction sizes");
  int64_t batch = 1;
  for (size_t i = 0; i + 2 < r; ++i) batch *= os[i];
  DType t = a.OutType().dtype;
  if (m == 0 || n == 0) return Status::Ok();
  if (k == 0) {
    std::memset(a.out[0], 0, a.OutType().ByteSize());
    return Status::Ok();
  }
  if (t == DType::kF32) {
    // An operand may arrive untransposed (OpArgs::transposed): BLAS reads it through its trans flag.
    const bool ta = a.transposed[0], tb = a.transposed[1];
    const int lda = static_cast<int>(ta ? m : k), ldb = static_cast<int>(tb ? k : n);
    auto rows = [&](int64_t b, int64_t r0, int64_t r1) {
      const float* A = reinterpret_cast<const float*>(a.in[0]) + b * m * k + (ta ? r0 : r0 * k);
      const float* B = reinterpret_cast<const float*>(a.in[1]) + b * k * n;
      float* C = reinterpret_cast<float*>(a.out[0]) + b * m * n + r0 * n;
      JMP_SGEMM(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(r1 - r0),
                static_cast<int>(n), static_cast<int>(k), 1.0f, A, lda, B, ldb, 0.0f, C, static_cast<int>(n));
    };
    // Split across the host threads: by matrices when there are several, else by rows of C.
    constexpr int64_t kFlopsPerTask = int64_t{1} << 18;
    if (batch > 1) {
      ParallelFor(batch, std::max<int64_t>(1, kFlopsPerTask / (m * n * k)), [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) rows(b, 0, m);
      });
    } else {
      ParallelFor(m, std::max<int64_t>(8, kFlopsPerTask / (n * k)), [&](int64_t r0, int64_t r1) { rows(0, r0, r1); });
    }
    return Status::Ok();
  }
  if (t == DType::kC64) {
    const c64 one(1, 0), zero(0, 0);
    for (int64_t b = 0; b < batch; ++b) {
      const c64* A = reinterpret_cast<const c64*>(a.in[0]) + b * m * k;
      const c64* B = reinterpret_cast<const c64*>(a.in[1]) + b * k * n;
      c64* C = reinterpret_cast<c64*>(a.out[0]) + b * m * n;
      JMP_CGEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
                &one, A, static_cast<int>(k), B, static_cast<int>(n), &zero, C, static_cast<int>(n));
    }
    return Status::Ok();
  }
  return Dispatch(t, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16>) {
      // Products accumulate in f32 (op_kinds.def: MatMul), then round once.
      std::vector<float> A(static_cast<size_t>(batch * m * k)), B(static_cast<size_t>(batch * k * n)), C(static_cast<size_t>(batch * m * n));
      const T* ai = reinterpret_cast<const T*>(a.in[0]);
      const T* bi = reinterpret_cast<const T*>(a.in[1]);
      for (size_t i = 0; i < A.size(); ++i) A[i] = Num<T>::Load(ai[i]);
      for (size_t i = 0; i < B.size(); ++i) B[i] = Num<T>::Load(bi[i]);
      for (int64_t b = 0; b < batch; ++b)
        JMP_SGEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
                  1.0f, A.data() + b * m * k, static_cast<int>(k), B.data() + b * k * n, static_cast<int>(n), 0.0f,
                  C.data() + b * m * n, static_cast<int>(n));
      T* ci = reinterpret_cast<T*>(a.out[0]);
      for (size_t i = 0; i < C.size(); ++i) ci[i] = Num<T>::Store(C[i]);
      return Status::Ok();
    } else if constexpr (kIsInt<T>) {
      using UT = std::make_unsigned_t<T>;
      const T* A = reinterpret_cast<const T*>(a.in[0]);
      const T* B = reinterpret_cast<const T*>(a.in[1]);
      T* C = reinterpret_cast<T*>(a.out[0]);
      std::vector<uint64_t> row(static_cast<size_t>(n));
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t i = 0; i < m; ++i) {
          std::fill(row.begin(), row.end(), 0);
          for (int64_t p = 0; p < k; ++p) {
            uint64_t av = static_cast<uint64_t>(static_cast<int64_t>(A[b * m * k + i * k + p]));
            const T* brow = B + b * k * n + p * n;
            for (int64_t j = 0; j < n; ++j) row[static_cast<size_t>(j)] += av * static_cast<uint64_t>(static_cast<int64_t>(brow[j]));
          }
          for (int64_t j = 0; j < n; ++j) C[b * m * n + i * n + j] = static_cast<T>(static_cast<UT>(row[static_cast<size_t>(j)]));
        }
      return Status::Ok();
    } else {
      return a.Unsupported("is not defined for this type");
    }
  });
}

// ---- scans and sorts, along one axis: viewed as [outer, n, inner].

namespace {

void AxisView(const Shape& shape, int64_t axis, int64_t* outer, int64_t* n, int64_t* inner) {
  *outer = 1;
  *inner = 1;
  for (int64_t d = 0; d < axis; ++d) *outer *= shape[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d) *inner *= shape[d];
  *n = shape[static_cast<size_t>(axis)];
}

}  // namespace

// Sums and products that wrap around for integers (no signed overflow), plain for floats.
template <typename C>
C Wrap(C a, C b, bool add) {
  if constexpr (std::is_integral_v<C> && !std::is_same_v<C, bool>) {
    using UC = std::make_unsigned_t<C>;
    uint64_t r = add ? static_cast<uint64_t>(static_cast<UC>(a)) + static_cast<UC>(b)
                     : static_cast<uint64_t>(static_cast<UC>(a)) * static_cast<UC>(b);
    return static_cast<C>(static_cast<UC>(r));
  } else {
    return add ? a + b : a * b;
  }
}

Status RunCumulative(const OpArgs& a, Reduction how) {
  int64_t outer, n, inner;
  const mps::CumulativeAttrs at = mps::CumulativeAttrs::Of(a.op);
  AxisView(a.InType(0).shape, at.axis, &outer, &n, &inner);
  const bool exclusive = at.exclusive, reverse = at.reverse;
  if (how == Reduction::kAnd || how == Reduction::kOr) return a.Unsupported("has no cumulative and/or");
  return Dispatch(a.InType(0).dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (kIsComplex<T> || kIsBool<T>) {
      return a.Unsupported("is not defined for this type");
    } else {
      using N = Num<T>;
      using R = Reduction;
      using C = std::conditional_t<kIsFloat<T>, double, typename N::C>;
      const T* x = reinterpret_cast<const T*>(a.in[0]);
      T* y = reinterpret_cast<T*>(a.out[0]);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t in = 0; in < inner; ++in) {
          C acc = C(0);
          switch (how) {
            case R::kSum: case R::kOr: acc = C(0); break;
            case R::kProduct: case R::kAnd: acc = C(1); break;
            case R::kMaximum: acc = kIsFloat<T> ? C(-INFINITY) : C(std::numeric_limits<typename N::C>::lowest()); break;
            case R::kMinimum: acc = kIsFloat<T> ? C(INFINITY) : C(std::numeric_limits<typename N::C>::max()); break;
          }
          for (int64_t s = 0; s < n; ++s) {
            int64_t i = reverse ? n - 1 - s : s;
            int64_t at = (o * n + i) * inner + in;
            C v = static_cast<C>(N::Load(x[at]));
            if (exclusive) y[at] = N::Store(static_cast<typename N::C>(acc));
            switch (how) {
              case R::kSum: case R::kOr: acc = Wrap<C>(acc, v, true); break;  // kOr, kAnd: refused above
              case R::kProduct: case R::kAnd: acc = Wrap<C>(acc, v, false); break;
              case R::kMaximum: acc = (v != v || v > acc) ? v : acc; break;
              case R::kMinimum: acc = (v != v || v < acc) ? v : acc; break;
            }
            if constexpr (kIsInt<T>) acc = static_cast<C>(static_cast<typename N::C>(acc));
            if (!exclusive) y[at] = N::Store(static_cast<typename N::C>(acc));
          }
        }
      return Status::Ok();
    }
  });
}

// Stable, ascending or descending; the lowering never passes NaN keys.
Status RunSort(const OpArgs& a) {
  int64_t outer, n, inner;
  const mps::SortAttrs at = mps::SortAttrs::Of(a.op);
  AxisView(a.InType(0).shape, at.axis, &outer, &n, &inner);
  const bool descending = at.descending;
  bool arg = a.op.kind == K::kArgSort;
  return Dispatch(a.InType(0).dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (kIsComplex<T>) {
      return a.Unsupported("is not defined for complex values");
    } else {
      using N = Num<T>;
      const T* x = reinterpret_cast<const T*>(a.in[0]);
      std::vector<int64_t> perm(static_cast<size_t>(n));
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t in = 0; in < inner; ++in) {
          auto key = [&](int64_t i) { return N::Load(x[(o * n + i) * inner + in]); };
          std::iota(perm.begin(), perm.end(), 0);
          std::stable_sort(perm.begin(), perm.end(), [&](int64_t p, int64_t q) {
            return descending ? key(q) < key(p) : key(p) < key(q);
          });
          for (int64_t i = 0; i < n; ++i) {
            int64_t at = (o * n + i) * inner + in;
            if (arg) reinterpret_cast<int32_t*>(a.out[0])[at] = static_cast<int32_t>(perm[static_cast<size_t>(i)]);
            else reinterpret_cast<T*>(a.out[0])[at] = x[(o * n + perm[static_cast<size_t>(i)]) * inner + in];
          }
        }
      return Status::Ok();
    }
  });
}

// Largest k along the last axis, ties to the smaller index.
Status RunTopK(const OpArgs& a) {
  const Shape& s = a.InType(0).shape;
  if (s.empty()) return a.Unsupported("needs rank >= 1");
  int64_t n = s.back(), k = mps::TopKAttrs::Of(a.op).k, rows = a.InType(0).NumElements() / std::max<int64_t>(n, 1);
  if (k > n || k < 0) return a.Unsupported("has k larger than the axis");
  return Dispatch(a.InType(0).dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (kIsComplex<T>) {
      return a.Unsupported("is not defined for complex values");
    } else {
      using N = Num<T>;
      const T* x = reinterpret_cast<const T*>(a.in[0]);
      T* values = reinterpret_cast<T*>(a.out[0]);
      int32_t* indices = reinterpret_cast<int32_t*>(a.out[1]);
      std::vector<int64_t> perm(static_cast<size_t>(n));
      for (int64_t r = 0; r < rows; ++r) {
        const T* row = x + r * n;
        std::iota(perm.begin(), perm.end(), 0);
        std::stable_sort(perm.begin(), perm.end(), [&](int64_t p, int64_t q) { return N::Load(row[q]) < N::Load(row[p]); });
        for (int64_t i = 0; i < k; ++i) {
          values[r * k + i] = row[perm[static_cast<size_t>(i)]];
          indices[r * k + i] = static_cast<int32_t>(perm[static_cast<size_t>(i)]);
        }
      }
      return Status::Ok();
    }
  });
}

}  // namespace jmp::exec::host
