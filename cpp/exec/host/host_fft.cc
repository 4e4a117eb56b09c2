// FFT, RealToHermiteanFFT and HermiteanToRealFFT on pocketfft (the FFT library numpy uses), with
// the scaling op_kinds.def gives each: forward unscaled, inverse scaled by 1/N.
#include <algorithm>
#include <complex>
#include <mutex>
#include <string>
#include <vector>

#include "exec/host/host_kernels.h"
#include "exec/host/host_parallel.h"
#include "pocketfft_hdronly.h"

namespace jmp::exec::host {

namespace {

pocketfft::stride_t ByteStrides(const std::vector<int64_t>& shape, size_t element) {
  pocketfft::stride_t s(shape.size());
  ptrdiff_t acc = static_cast<ptrdiff_t>(element);
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = acc;
    acc *= static_cast<ptrdiff_t>(shape[i]);
  }
  return s;
}

pocketfft::shape_t Dims(const std::vector<int64_t>& shape) { return pocketfft::shape_t(shape.begin(), shape.end()); }

}  // namespace

namespace {

// One pocketfft call over `in` -> `out` (row-major, the transformed axes `axes`), as the op's kind asks.
template <typename R>
void Transform(FFTKind kind, bool inverse, const std::vector<int64_t>& in, const std::vector<int64_t>& out,
               const pocketfft::shape_t& axes, const void* src, void* dst) {
  using c = std::complex<R>;
  switch (kind) {
    case FFTKind::kComplex: {
      R scale = 1;
      if (inverse)
        for (size_t ax : axes) scale /= static_cast<R>(in[ax]);
      pocketfft::c2c<R>(Dims(in), ByteStrides(in, sizeof(c)), ByteStrides(out, sizeof(c)), axes, !inverse,
                        static_cast<const c*>(src), static_cast<c*>(dst), scale);
      return;
    }
    case FFTKind::kRealToHermitean:
      pocketfft::r2c<R>(Dims(in), ByteStrides(in, sizeof(R)), ByteStrides(out, sizeof(c)), axes, true,
                        static_cast<const R*>(src), static_cast<c*>(dst), R(1));
      return;
    case FFTKind::kHermiteanToReal: {
      R scale = 1;
      for (size_t ax : axes) scale /= static_cast<R>(out[ax]);
      pocketfft::c2r<R>(Dims(out), ByteStrides(in, sizeof(c)), ByteStrides(out, sizeof(R)), axes, false,
                        static_cast<const c*>(src), static_cast<R*>(dst), scale);
      return;
    }
  }
}

int64_t Product(const std::vector<int64_t>& shape, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to; ++i) n *= shape[i];
  return n;
}

// R: float for complex64/float32, double for complex128/float64 (pocketfft computes in R). The
// transforms of a batch (the dimensions before the transformed ones, which JAX's FFTs always take last)
// are independent: they are split over the host's threads.
template <typename R>
Status RunFFTOf(const OpArgs& a, FFTKind kind, const pocketfft::shape_t& axes) {
  const size_t in_bytes = kind == FFTKind::kRealToHermitean ? sizeof(R) : sizeof(std::complex<R>);
  const size_t out_bytes = kind == FFTKind::kHermiteanToReal ? sizeof(R) : sizeof(std::complex<R>);
  const std::vector<int64_t>& in = a.InType(0).shape;
  const std::vector<int64_t>& out = a.OutType().shape;
  const bool inverse = kind == FFTKind::kComplex && a.op.Attrs<mps::FFTAttrs>().inverse;
  size_t first = in.size();
  for (size_t ax : axes) first = std::min(first, ax);
  bool trailing = axes.size() == in.size() - first;
  for (size_t k = 0; k < axes.size(); ++k) trailing = trailing && axes[k] == first + k;
  if (!trailing || first == 0) {
    Transform<R>(kind, inverse, in, out, axes, a.in[0], a.out[0]);
    return Status::Ok();
  }
  // As [batch, transformed dims...]: a range of the batch is a contiguous block of each side.
  std::vector<int64_t> in_rows{1}, out_rows{1};
  in_rows.insert(in_rows.end(), in.begin() + static_cast<ptrdiff_t>(first), in.end());
  out_rows.insert(out_rows.end(), out.begin() + static_cast<ptrdiff_t>(first), out.end());
  pocketfft::shape_t row_axes;
  for (size_t k = 0; k < axes.size(); ++k) row_axes.push_back(k + 1);
  const int64_t batch = Product(in, 0, first);
  const int64_t per_in = Product(in, first, in.size()), per_out = Product(out, first, out.size());
  std::mutex mu;
  std::string failure;
  ParallelFor(batch, std::max<int64_t>(1, 16384 / std::max(per_in, per_out)), [&](int64_t b0, int64_t b1) {
    std::vector<int64_t> sub_in = in_rows, sub_out = out_rows;
    sub_in[0] = sub_out[0] = b1 - b0;
    try {
      Transform<R>(kind, inverse, sub_in, sub_out, row_axes, a.in[0] + static_cast<size_t>(b0 * per_in) * in_bytes,
                   a.out[0] + static_cast<size_t>(b0 * per_out) * out_bytes);
    } catch (const std::exception& e) {  // never out of a pool thread
      std::lock_guard<std::mutex> lock(mu);
      if (failure.empty()) failure = e.what();
    }
  });
  if (!failure.empty()) return Internal("pocketfft: " + failure);
  return Status::Ok();
}

}  // namespace

Status RunFFT(const OpArgs& a, FFTKind kind) {
  pocketfft::shape_t axes;
  for (int64_t ax : a.op.Attrs<mps::FFTAttrs>().axes) axes.push_back(static_cast<size_t>(ax));
  if (a.InType(0).NumElements() == 0 || a.OutType().NumElements() == 0) return Status::Ok();
  // The input's type: complex for FFT and HermiteanToRealFFT, real for RealToHermiteanFFT.
  const DType t = a.InType(0).dtype;
  const bool real_in = kind == FFTKind::kRealToHermitean;
  try {
    if (t == (real_in ? DType::kF32 : DType::kC64)) return RunFFTOf<float>(a, kind, axes);
    if (t == (real_in ? DType::kF64 : DType::kC128)) return RunFFTOf<double>(a, kind, axes);
    return a.Unsupported(real_in ? "needs float32 or float64" : "needs complex64 or complex128");
  } catch (const std::exception& e) {
    return Internal(std::string("pocketfft: ") + e.what());
  }
}

}  // namespace jmp::exec::host
