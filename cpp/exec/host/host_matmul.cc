// MatMul on a BLAS (Accelerate on macOS, scipy-openblas elsewhere), and the BLAS's thread setup.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <optional>
#include <vector>

#include "exec/host/host_kernels.h"
#include "exec/host/host_parallel.h"
#include "exec/host/host_types.h"

#if defined(JMP_BLAS_ACCELERATE)
#include <Accelerate/Accelerate.h>
#define JMP_SGEMM cblas_sgemm
#define JMP_DGEMM cblas_dgemm
#define JMP_CGEMM cblas_cgemm
#define JMP_ZGEMM cblas_zgemm
#elif defined(JMP_BLAS_SCIPY_OPENBLAS)
#include <cblas.h>
#define JMP_SGEMM scipy_cblas_sgemm
#define JMP_DGEMM scipy_cblas_dgemm
#define JMP_CGEMM scipy_cblas_cgemm
#define JMP_ZGEMM scipy_cblas_zgemm
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
using c128 = std::complex<double>;

// One row-major GEMM C = alpha op(A) op(B) + beta C per element type the BLAS has.
void Gemm(bool ta, bool tb, int m, int n, int k, const float* A, int lda, const float* B, int ldb, float* C, int ldc,
          double alpha, double beta) {
  JMP_SGEMM(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k,
            static_cast<float>(alpha), A, lda, B, ldb, static_cast<float>(beta), C, ldc);
}
void Gemm(bool ta, bool tb, int m, int n, int k, const double* A, int lda, const double* B, int ldb, double* C, int ldc,
          double alpha, double beta) {
  JMP_DGEMM(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, A, lda, B,
            ldb, beta, C, ldc);
}
void Gemm(bool ta, bool tb, int m, int n, int k, const c64* A, int lda, const c64* B, int ldb, c64* C, int ldc,
          double alpha, double beta) {
  const c64 al(static_cast<float>(alpha), 0), be(static_cast<float>(beta), 0);
  JMP_CGEMM(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, &al, A, lda, B, ldb,
            &be, C, ldc);
}
void Gemm(bool ta, bool tb, int m, int n, int k, const c128* A, int lda, const c128* B, int ldb, c128* C, int ldc,
          double alpha, double beta) {
  const c128 al(alpha, 0), be(beta, 0);
  JMP_ZGEMM(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, &al, A, lda, B, ldb,
            &be, C, ldc);
}

// A task's share of a product: about this many multiply-adds of real numbers (a complex one is four).
constexpr int64_t kFlopsPerTask = int64_t{1} << 18;

// A product's GEMM calls as `tasks` independent blocks of its result, each run by run(t).
struct ProductTasks {
  int64_t tasks = 1;
  std::function<void(int64_t)> run;
};

// The BLAS types: float32, float64, complex64 and complex128 straight through GEMM, in blocks for up to
// `threads` threads (by matrices when there are several, else by rows or columns of C). An operand may
// arrive untransposed (OpArgs::transposed): BLAS reads it through its trans flag.
template <typename T>
ProductTasks BlasTasks(const OpArgs& a, int64_t batch, int64_t m, int64_t n, int64_t k, int threads) {
  const StridedMatrix* sa = a.strided[0];
  const StridedMatrix* sb = a.strided[1];
  bool ta = sa ? sa->trans : a.transposed[0], tb = sb ? sb->trans : a.transposed[1];
  const uint8_t* in0 = a.in[0];
  const uint8_t* in1 = a.in[1];
  int64_t lda = sa ? sa->ld : (ta ? m : k), ldb = sb ? sb->ld : (tb ? k : n);
  int64_t stride_a = m * k, stride_b = k * n;  // between matrices, when not strided
  if (a.transposed_out) {  // C^T = B^T A^T: the operands swap, each read through the other trans flag
    std::swap(in0, in1);
    std::swap(sa, sb);
    std::swap(m, n);
    std::swap(ta, tb);
    std::swap(lda, ldb);
    std::swap(stride_a, stride_b);
    ta = !ta;
    tb = !tb;
  }
  // Rows [r0, r1) and columns [c0, c1) of matrix b of C.
  auto block = [=, out = a.out[0], addend = a.addend, alpha = a.alpha](int64_t b, int64_t r0, int64_t r1, int64_t c0,
                                                                       int64_t c1) {
    const T* A = reinterpret_cast<const T*>(in0) + (sa ? sa->BatchOffset(b) : b * stride_a) + (ta ? r0 : r0 * lda);
    const T* B = reinterpret_cast<const T*>(in1) + (sb ? sb->BatchOffset(b) : b * stride_b) + (tb ? c0 * ldb : c0);
    T* C = reinterpret_cast<T*>(out) + b * m * n + r0 * n + c0;
    if (addend) {  // the block's part of the addend, copied while the block's GEMM will find it in cache
      const T* add = reinterpret_cast<const T*>(addend) + b * m * n + r0 * n + c0;
      for (int64_t r = 0; r < r1 - r0; ++r)
        std::memcpy(C + r * n, add + r * n, static_cast<size_t>(c1 - c0) * sizeof(T));
    }
    Gemm(ta, tb, static_cast<int>(r1 - r0), static_cast<int>(c1 - c0), static_cast<int>(k), A, static_cast<int>(lda), B,
         static_cast<int>(ldb), C, static_cast<int>(n), alpha, addend ? 1.0 : 0.0);
  };
  constexpr int64_t kScale = kIsComplex<T> ? 4 : 1;
  if (batch > 1) {
    const int64_t tasks =
        std::clamp<int64_t>(kScale * batch * m * n * k / kFlopsPerTask, 1, std::min<int64_t>(batch, 4 * threads));
    return {tasks, [=](int64_t t) {
              for (int64_t b = t * batch / tasks; b < (t + 1) * batch / tasks; ++b) block(b, 0, m, 0, n);
            }};
  }
  // One matrix: one block of C per thread, cut across C's longer side. Each GEMM call packs the whole
  // of the operand it shares with the other blocks (all of B for a block of rows, all of A for a block
  // of columns), so more blocks than threads only repeat that packing, and cutting the longer side
  // repeats the smaller operand. Eight blocks of 8 rows for a 64x256 by 256x256 product packed B eight
  // times: the product took 1.8 times the CPU time of two blocks, and twice as long.
  // A short contraction is bound by writing C, and handing half of it to another thread costs more than
  // it saves: a 128x10 by 10x512 product took 29 us on one thread, 50-60 us over two (XLA:CPU's: 22).
  constexpr int64_t kMinSplitContraction = 32;
  const int64_t tasks = k < kMinSplitContraction ? 1
                                                 : std::clamp<int64_t>(kScale * m * n * k / kFlopsPerTask, 1,
                                                                       std::min<int64_t>(threads, std::max(m, n)));
  if (m >= n) return {tasks, [=](int64_t t) { block(0, t * m / tasks, (t + 1) * m / tasks, 0, n); }};
  return {tasks, [=](int64_t t) { block(0, 0, m, t * n / tasks, (t + 1) * n / tasks); }};
}

// m, n, k and the number of matrices of a MatMul's operands (ranks checked by RunMatMul).
struct ProductDims {
  int64_t batch = 1, m = 0, n = 0, k = 0;
};
ProductDims DimsOf(const OpArgs& a) {
  const Shape& ls = a.InType(0).shape;
  const Shape& rs = a.InType(1).shape;
  const Shape& os = a.OutType().shape;
  const size_t r = ls.size();
  ProductDims d{1, ls[r - 2], rs[r - 1], ls[r - 1]};
  for (size_t i = 0; i + 2 < r; ++i) d.batch *= os[i];
  return d;
}

// A float32, float64, complex64 or complex128 product with no empty dimension, as BLAS blocks.
std::optional<ProductTasks> BlasProduct(const OpArgs& a, int threads) {
  const ProductDims d = DimsOf(a);
  if (d.m == 0 || d.n == 0 || d.k == 0) return std::nullopt;
  switch (a.OutType().dtype) {
    case DType::kF32: return BlasTasks<float>(a, d.batch, d.m, d.n, d.k, threads);
    case DType::kF64: return BlasTasks<double>(a, d.batch, d.m, d.n, d.k, threads);
    case DType::kC64: return BlasTasks<c64>(a, d.batch, d.m, d.n, d.k, threads);
    case DType::kC128: return BlasTasks<c128>(a, d.batch, d.m, d.n, d.k, threads);
    default: return std::nullopt;
  }
}

void RunTasks(const ProductTasks& p) {
  if (p.tasks <= 1) return p.run(0);
  ParallelFor(p.tasks, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) p.run(t);
  });
}

}  // namespace

// Two independent products at once, each over half the threads: two equal products on two threads
// finish sooner side by side than one after the other, each split in two, since a split repeats the
// packing of the operand its blocks share. Anything but two BLAS products runs in turn.
Status RunMatMulPair(const OpArgs& a, const OpArgs& b) {
  auto well_formed = [](const OpArgs& x) {
    const Shape& ls = x.InType(0).shape;
    const Shape& rs = x.InType(1).shape;
    const size_t r = ls.size();
    return r >= 2 && rs.size() == r && x.OutType().shape.size() == r && rs[r - 2] == ls[r - 1];
  };
  const int half = std::max(1, HostThreads() / 2);
  std::optional<ProductTasks> pa, pb;
  if (well_formed(a) && well_formed(b)) {
    pa = BlasProduct(a, half);
    pb = BlasProduct(b, half);
  }
  if (!pa || !pb) {
    JMP_RETURN_IF_ERROR(RunMatMul(a));
    return RunMatMul(b);
  }
  const int64_t first = pa->tasks;
  ParallelFor(pa->tasks + pb->tasks, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) t < first ? pa->run(t) : pb->run(t - first);
  });
  return Status::Ok();
}

Status RunMatMul(const OpArgs& a) {
  const Shape& ls = a.InType(0).shape;
  const Shape& rs = a.InType(1).shape;
  const Shape& os = a.OutType().shape;
  if (ls.size() < 2 || rs.size() != ls.size() || os.size() != ls.size())
    return a.Unsupported("needs operands of one rank >= 2");
  size_t r = ls.size();
  int64_t m = ls[r - 2], k = ls[r - 1], n = rs[r - 1];
  if (rs[r - 2] != k) return a.Unsupported("has mismatched contraction sizes");
  int64_t batch = 1;
  for (size_t i = 0; i + 2 < r; ++i) batch *= os[i];
  DType t = a.OutType().dtype;
  if (m == 0 || n == 0) return Status::Ok();
  if (k == 0) {
    if (a.addend)
      std::memcpy(a.out[0], a.addend, a.OutType().ByteSize());
    else
      std::memset(a.out[0], 0, a.OutType().ByteSize());
    return Status::Ok();
  }
  if (std::optional<ProductTasks> p = BlasProduct(a, HostThreads())) {
    RunTasks(*p);
    return Status::Ok();
  }
  return Dispatch(t, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16>) {
      // Products accumulate in f32 (op_kinds.def: MatMul), then round once.
      std::vector<float> A(static_cast<size_t>(batch * m * k)), B(static_cast<size_t>(batch * k * n)),
          C(static_cast<size_t>(batch * m * n));
      const T* ai = reinterpret_cast<const T*>(a.in[0]);
      const T* bi = reinterpret_cast<const T*>(a.in[1]);
      for (size_t i = 0; i < A.size(); ++i) A[i] = Num<T>::Load(ai[i]);
      for (size_t i = 0; i < B.size(); ++i) B[i] = Num<T>::Load(bi[i]);
      for (int64_t b = 0; b < batch; ++b)
        JMP_SGEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
                  static_cast<int>(k), 1.0f, A.data() + b * m * k, static_cast<int>(k), B.data() + b * k * n,
                  static_cast<int>(n), 0.0f, C.data() + b * m * n, static_cast<int>(n));
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
            for (int64_t j = 0; j < n; ++j)
              row[static_cast<size_t>(j)] += av * static_cast<uint64_t>(static_cast<int64_t>(brow[j]));
          }
          for (int64_t j = 0; j < n; ++j)
            C[b * m * n + i * n + j] = static_cast<T>(static_cast<UT>(row[static_cast<size_t>(j)]));
        }
      return Status::Ok();
    } else {
      return a.Unsupported("is not defined for this type");
    }
  });
}

}  // namespace jmp::exec::host
