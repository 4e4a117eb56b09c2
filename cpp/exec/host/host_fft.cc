// FFT, RealToHermiteanFFT and HermiteanToRealFFT on pocketfft (the FFT library numpy uses), with
// the scaling op_kinds.def gives each: forward unscaled, inverse scaled by 1/N.
#include <complex>
#include <vector>

#include "exec/host/host_kernels.h"
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

// R: float for complex64/float32, double for complex128/float64 (pocketfft computes in R).
template <typename R>
Status RunFFTOf(const OpArgs& a, FFTKind kind, const pocketfft::shape_t& axes) {
  using c = std::complex<R>;
  const auto& in = a.InType(0).shape;
  const auto& out = a.OutType().shape;
  switch (kind) {
    case FFTKind::kComplex: {
      bool inverse = a.op.Attrs<mps::FFTAttrs>().inverse;
      R scale = 1;
      if (inverse)
        for (size_t ax : axes) scale /= static_cast<R>(in[ax]);
      pocketfft::c2c<R>(Dims(in), ByteStrides(in, sizeof(c)), ByteStrides(out, sizeof(c)), axes, !inverse,
                        reinterpret_cast<const c*>(a.in[0]), reinterpret_cast<c*>(a.out[0]), scale);
      return Status::Ok();
    }
    case FFTKind::kRealToHermitean:
      pocketfft::r2c<R>(Dims(in), ByteStrides(in, sizeof(R)), ByteStrides(out, sizeof(c)), axes, true,
                        reinterpret_cast<const R*>(a.in[0]), reinterpret_cast<c*>(a.out[0]), R(1));
      return Status::Ok();
    case FFTKind::kHermiteanToReal: {
      R scale = 1;
      for (size_t ax : axes) scale /= static_cast<R>(out[ax]);
      pocketfft::c2r<R>(Dims(out), ByteStrides(in, sizeof(c)), ByteStrides(out, sizeof(R)), axes, false,
                        reinterpret_cast<const c*>(a.in[0]), reinterpret_cast<R*>(a.out[0]), scale);
      return Status::Ok();
    }
  }
  return Internal("unknown FFT kind");
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
