// Conv2D (NHWC x HWIO, strides, dilations, explicit padding, groups) as im2col + one sgemm per group;
// f16/bf16 computed in f32 and rounded once, as op_kinds.def assumes of MPSGraph.
#include <cstring>
#include <vector>

#include "exec/host/host_kernels.h"
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
  int64_t OH = os[1], OW = os[2], groups = a.op.int_attr > 0 ? a.op.int_attr : 1;
  if (C != Cg * groups || O % groups) return a.Unsupported("has channels that do not match its groups");
  int64_t Og = O / groups;
  int64_t sh = a.op.strides.at(0), sw = a.op.strides.at(1), dh = a.op.axes.at(0), dw = a.op.axes.at(1);
  int64_t ph = a.op.starts.at(0), pw = a.op.starts.at(1);
  DType t = a.OutType().dtype;
  std::vector<float> x, w;
  switch (t) {
    case DType::kF32: x = ToFloat<float>(a.in[0], a.InType(0).NumElements()); w = ToFloat<float>(a.in[1], a.InType(1).NumElements()); break;
    case DType::kF16: x = ToFloat<f16>(a.in[0], a.InType(0).NumElements()); w = ToFloat<f16>(a.in[1], a.InType(1).NumElements()); break;
    case DType::kBF16: x = ToFloat<bf16>(a.in[0], a.InType(0).NumElements()); w = ToFloat<bf16>(a.in[1], a.InType(1).NumElements()); break;
    default: return a.Unsupported("is defined for float types only");
  }
  int64_t rows = N * OH * OW, depth = KH * KW * Cg;
  std::vector<float> cols(static_cast<size_t>(rows * depth)), wg(static_cast<size_t>(depth * Og)),
      out(static_cast<size_t>(rows * Og)), y(static_cast<size_t>(rows * O));
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t n = 0; n < N; ++n)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          float* col = cols.data() + ((n * OH + oh) * OW + ow) * depth;
          for (int64_t kh = 0; kh < KH; ++kh) {
            int64_t ih = oh * sh + kh * dh - ph;
            for (int64_t kw = 0; kw < KW; ++kw) {
              int64_t iw = ow * sw + kw * dw - pw;
              float* dst = col + (kh * KW + kw) * Cg;
              if (ih < 0 || ih >= H || iw < 0 || iw >= W) {
                std::memset(dst, 0, static_cast<size_t>(Cg) * sizeof(float));
              } else {
                std::memcpy(dst, x.data() + ((n * H + ih) * W + iw) * C + g * Cg, static_cast<size_t>(Cg) * sizeof(float));
              }
            }
          }
        }
    for (int64_t k = 0; k < depth; ++k)
      std::memcpy(wg.data() + k * Og, w.data() + k * O + g * Og, static_cast<size_t>(Og) * sizeof(float));
    if (rows && Og && depth)
      JMP_SGEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(rows), static_cast<int>(Og), static_cast<int>(depth),
                1.0f, cols.data(), static_cast<int>(depth), wg.data(), static_cast<int>(Og), 0.0f, out.data(), static_cast<int>(Og));
    else
      std::fill(out.begin(), out.end(), 0.0f);
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(y.data() + r * O + g * Og, out.data() + r * Og, static_cast<size_t>(Og) * sizeof(float));
  }
  int64_t total = rows * O;
  switch (t) {
    case DType::kF32: std::memcpy(a.out[0], y.data(), static_cast<size_t>(total) * 4); break;
    case DType::kF16: for (int64_t i = 0; i < total; ++i) reinterpret_cast<f16*>(a.out[0])[i] = Num<f16>::Store(y[static_cast<size_t>(i)]); break;
    default: for (int64_t i = 0; i < total; ++i) reinterpret_cast<bf16*>(a.out[0])[i] = Num<bf16>::Store(y[static_cast<size_t>(i)]); break;
  }
  return Status::Ok();
}

}  // namespace jmp::exec::host
