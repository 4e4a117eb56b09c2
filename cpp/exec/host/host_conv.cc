// Conv2D (NHWC x HWIO, strides, dilations, explicit padding, groups) as im2col + sgemm per block of
// output positions and group, the blocks split across threads;
// f16/bf16 computed in f32 and rounded once, as op_kinds.def assumes of MPSGraph.
#include <algorithm>
#include <cstring>
#include <vector>

#include "exec/host/host_kernels.h"
#include "exec/host/host_parallel.h"
#include "exec/host/host_types.h"

#if defined(JMP_BLAS_ACCELERATE)
#include <Accelerate/Accelerate.h>
#define JMP_SGEMM cblas_sgemm
#elif defined(JMP_BLAS_SCIPY_OPENBLAS)
#include <cblas.h>
#define JMP_SGEMM scipy_cblas_sgemm
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

}  // namespace

Status RunConv2D(const OpArgs& a) {
  const auto& xs = a.InType(0).shape;  // N H W C
  const auto& ws = a.InType(1).shape;  // KH KW Cg O
  const auto& os = a.OutType().shape;  // N OH OW O
  if (xs.size() != 4 || ws.size() != 4 || os.size() != 4) return a.Unsupported("needs rank-4 NHWC and HWIO tensors");
  int64_t N = xs[0], H = xs[1], W = xs[2], C = xs[3], KH = ws[0], KW = ws[1], Cg = ws[2], O = ws[3];
  const mps::Conv2DAttrs at = mps::Conv2DAttrs::Of(a.op);
  if (at.strides.size() != 2 || at.dilations.size() != 2 || at.pad_low.size() != 2)
    return a.Unsupported("needs 2-D strides, dilations and padding");
  int64_t OH = os[1], OW = os[2], groups = at.groups;
  if (C != Cg * groups || O % groups || os[0] != N || os[3] != O)
    return a.Unsupported("has channels that do not match its groups");
  int64_t Og = O / groups;
  int64_t sh = at.strides[0], sw = at.strides[1], dh = at.dilations[0], dw = at.dilations[1];
  int64_t ph = at.pad_low[0], pw = at.pad_low[1];
  DType t = a.OutType().dtype;
  // float32 is read in place; f16/bf16 are widened once and the result rounded once.
  std::vector<float> x_wide, w_wide, y_wide;
  const float* x = reinterpret_cast<const float*>(a.in[0]);
  const float* w = reinterpret_cast<const float*>(a.in[1]);
  float* y = reinterpret_cast<float*>(a.out[0]);
  switch (t) {
    case DType::kF32: break;
    case DType::kF16:
      x_wide = ToFloat<f16>(a.in[0], a.InType(0).NumElements());
      w_wide = ToFloat<f16>(a.in[1], a.InType(1).NumElements());
      break;
    case DType::kBF16:
      x_wide = ToFloat<bf16>(a.in[0], a.InType(0).NumElements());
      w_wide = ToFloat<bf16>(a.in[1], a.InType(1).NumElements());
      break;
    default: return a.Unsupported("is defined for float types only");
  }
  int64_t rows = N * OH * OW, depth = KH * KW * Cg, total = rows * O;
  if (t != DType::kF32) {
    x = x_wide.data();
    w = w_wide.data();
    y_wide.resize(static_cast<size_t>(total));
    y = y_wide.data();
  }
  if (depth == 0) {
    std::fill(y, y + total, 0.0f);
  } else if (rows > 0 && O > 0) {
    // A 1x1 window at stride 1 without padding reads the input rows as they are.
    bool pointwise = KH == 1 && KW == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0 && OH == H && OW == W;
    // Blocks of output positions: im2col of the block (per group), then one sgemm writing the block's
    // rows of every output channel of the group in place (ldb/ldc = O step over the other groups).
    constexpr int64_t kBlockBytes = 256 << 10;
    int64_t block = std::max<int64_t>(16, kBlockBytes / static_cast<int64_t>(sizeof(float) * depth));
    ParallelFor(rows, block, [&](int64_t r0, int64_t r1) {
      std::vector<float> cols(pointwise && groups == 1 ? 0 : static_cast<size_t>((r1 - r0) * depth));
      for (int64_t g = 0; g < groups; ++g) {
        const float* lhs;
        int lda;
        if (pointwise && groups == 1) {
          lhs = x + r0 * C;
          lda = static_cast<int>(C);
        } else {
          for (int64_t r = r0; r < r1; ++r) {
            int64_t n = r / (OH * OW), oh = r / OW % OH, ow = r % OW;
            float* col = cols.data() + (r - r0) * depth;
            for (int64_t kh = 0; kh < KH; ++kh) {
              int64_t ih = oh * sh + kh * dh - ph;
              for (int64_t kw = 0; kw < KW; ++kw) {
                int64_t iw = ow * sw + kw * dw - pw;
                float* dst = col + (kh * KW + kw) * Cg;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                  std::memset(dst, 0, static_cast<size_t>(Cg) * sizeof(float));
                else
                  std::memcpy(dst, x + ((n * H + ih) * W + iw) * C + g * Cg, static_cast<size_t>(Cg) * sizeof(float));
              }
            }
          }
          lhs = cols.data();
          lda = static_cast<int>(depth);
        }
        if (Og > 0)
          JMP_SGEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(r1 - r0), static_cast<int>(Og),
                    static_cast<int>(depth), 1.0f, lhs, lda, w + g * Og, static_cast<int>(O), 0.0f, y + r0 * O + g * Og,
                    static_cast<int>(O));
      }
    });
  }
  if (t == DType::kF16)
    for (int64_t i = 0; i < total; ++i) reinterpret_cast<f16*>(a.out[0])[i] = Num<f16>::Store(y[i]);
  else if (t == DType::kBF16)
    for (int64_t i = 0; i < total; ++i) reinterpret_cast<bf16*>(a.out[0])[i] = Num<bf16>::Store(y[i]);
  return Status::Ok();
}

}  // namespace jmp::exec::host
