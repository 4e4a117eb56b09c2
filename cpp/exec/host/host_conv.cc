// Conv2D (NHWC x HWIO, strides, dilations, explicit padding, groups) as im2col + gemm per block of
// output positions and group, the blocks split across threads; f16/bf16 computed in f32 and rounded
// once, as op_kinds.def assumes of MPSGraph; f64 (host only) with dgemm.
#include <algorithm>
#include <cstring>
#include <vector>

#include "exec/host/host_kernels.h"
#include "exec/host/host_parallel.h"
#include "exec/host/host_types.h"

#if defined(JMP_BLAS_ACCELERATE)
#include <Accelerate/Accelerate.h>
#define JMP_SGEMM cblas_sgemm
#define JMP_DGEMM cblas_dgemm
#elif defined(JMP_BLAS_SCIPY_OPENBLAS)
#include <cblas.h>
#define JMP_SGEMM scipy_cblas_sgemm
#define JMP_DGEMM scipy_cblas_dgemm
#endif

namespace jmp::exec::host {

namespace {

template <typename T>
std::vector<float> ToFloat(const uint8_t* p, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  const T* x = reinterpret_cast<const T*>(p);
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = Num<T>::Load(x[i]);
  return out;
}

void Gemm(int m, int n, int k, const float* A, int lda, const float* B, int ldb, float* C, int ldc) {
  JMP_SGEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, A, lda, B, ldb, 0.0f, C, ldc);
}
void Gemm(int m, int n, int k, const double* A, int lda, const double* B, int ldb, double* C, int ldc) {
  JMP_DGEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0, A, lda, B, ldb, 0.0, C, ldc);
}

struct ConvDims {
  int64_t N, H, W, C, KH, KW, Cg, O, OH, OW, groups, Og, sh, sw, dh, dw, ph, pw;
};

// y = conv(x, w) in R (float for f32/f16/bf16, double for f64).
template <typename R>
void Conv2DIn(const ConvDims& d, const R* x, const R* w, R* y) {
  // Plain locals, not structured bindings: C++17 lambdas cannot capture those.
  const int64_t N = d.N, H = d.H, W = d.W, C = d.C, KH = d.KH, KW = d.KW, Cg = d.Cg, O = d.O, OH = d.OH, OW = d.OW;
  const int64_t groups = d.groups, Og = d.Og, sh = d.sh, sw = d.sw, dh = d.dh, dw = d.dw, ph = d.ph, pw = d.pw;
  int64_t rows = N * OH * OW, depth = KH * KW * Cg, total = rows * O;
  if (depth == 0) {
    std::fill(y, y + total, R(0));
    return;
  }
  if (rows == 0 || O == 0) return;
  // A 1x1 window at stride 1 without padding reads the input rows as they are.
  bool pointwise = KH == 1 && KW == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0 && OH == H && OW == W;
  // Blocks of output positions: im2col of the block (per group), then one gemm writing the block's
  // rows of every output channel of the group in place (ldb/ldc = O step over the other groups).
  constexpr int64_t kBlockBytes = 256 << 10;
  int64_t block = std::max<int64_t>(16, kBlockBytes / static_cast<int64_t>(sizeof(R) * depth));
  ParallelFor(rows, block, [&](int64_t r0, int64_t r1) {
    std::vector<R> cols(pointwise && groups == 1 ? 0 : static_cast<size_t>((r1 - r0) * depth));
    for (int64_t g = 0; g < groups; ++g) {
      const R* lhs;
      int lda;
      if (pointwise && groups == 1) {
        lhs = x + r0 * C;
        lda = static_cast<int>(C);
      } else {
        for (int64_t r = r0; r < r1; ++r) {
          int64_t n = r / (OH * OW), oh = r / OW % OH, ow = r % OW;
          R* col = cols.data() + (r - r0) * depth;
          for (int64_t kh = 0; kh < KH; ++kh) {
            int64_t ih = oh * sh + kh * dh - ph;
            for (int64_t kw = 0; kw < KW; ++kw) {
              int64_t iw = ow * sw + kw * dw - pw;
              R* dst = col + (kh * KW + kw) * Cg;
              if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                std::memset(dst, 0, static_cast<size_t>(Cg) * sizeof(R));
              else
                std::memcpy(dst, x + ((n * H + ih) * W + iw) * C + g * Cg, static_cast<size_t>(Cg) * sizeof(R));
            }
          }
        }
        lhs = cols.data();
        lda = static_cast<int>(depth);
      }
      if (Og > 0)
        Gemm(static_cast<int>(r1 - r0), static_cast<int>(Og), static_cast<int>(depth), lhs, lda, w + g * Og,
             static_cast<int>(O), y + r0 * O + g * Og, static_cast<int>(O));
    }
  });
}

}  // namespace

Status RunConv2D(const OpArgs& a) {
  const auto& xs = a.InType(0).shape;  // N H W C
  const auto& ws = a.InType(1).shape;  // KH KW Cg O
  const auto& os = a.OutType().shape;  // N OH OW O
  if (xs.size() != 4 || ws.size() != 4 || os.size() != 4) return a.Unsupported("needs rank-4 NHWC and HWIO tensors");
  const mps::Conv2DAttrs& at = a.op.Attrs<mps::Conv2DAttrs>();
  if (at.strides.size() != 2 || at.dilations.size() != 2 || at.pad_low.size() != 2)
    return a.Unsupported("needs 2-D strides, dilations and padding");
  ConvDims d{xs[0],         xs[1],         xs[2],           xs[3],           ws[0],         ws[1],
             ws[2],         ws[3],         os[1],           os[2],           at.groups,     0,
             at.strides[0], at.strides[1], at.dilations[0], at.dilations[1], at.pad_low[0], at.pad_low[1]};
  if (d.C != d.Cg * d.groups || d.groups < 1 || d.O % d.groups || os[0] != d.N || os[3] != d.O)
    return a.Unsupported("has channels that do not match its groups");
  d.Og = d.O / d.groups;
  const DType t = a.OutType().dtype;
  const int64_t total = a.OutType().NumElements();
  switch (t) {
    case DType::kF32:
      Conv2DIn(d, reinterpret_cast<const float*>(a.in[0]), reinterpret_cast<const float*>(a.in[1]),
               reinterpret_cast<float*>(a.out[0]));
      return Status::Ok();
    case DType::kF64:
      Conv2DIn(d, reinterpret_cast<const double*>(a.in[0]), reinterpret_cast<const double*>(a.in[1]),
               reinterpret_cast<double*>(a.out[0]));
      return Status::Ok();
    case DType::kF16:
    case DType::kBF16: {
      // Widened once, the result rounded once.
      std::vector<float> y(static_cast<size_t>(total));
      if (t == DType::kF16) {
        Conv2DIn(d, ToFloat<f16>(a.in[0], a.InType(0).NumElements()).data(),
                 ToFloat<f16>(a.in[1], a.InType(1).NumElements()).data(), y.data());
        for (int64_t i = 0; i < total; ++i) reinterpret_cast<f16*>(a.out[0])[i] = Num<f16>::Store(y[i]);
      } else {
        Conv2DIn(d, ToFloat<bf16>(a.in[0], a.InType(0).NumElements()).data(),
                 ToFloat<bf16>(a.in[1], a.InType(1).NumElements()).data(), y.data());
        for (int64_t i = 0; i < total; ++i) reinterpret_cast<bf16*>(a.out[0])[i] = Num<bf16>::Store(y[i]);
      }
      return Status::Ok();
    }
    default: return a.Unsupported("is defined for f16, bf16, f32 and f64");
  }
}

}  // namespace jmp::exec::host
