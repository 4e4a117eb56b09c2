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

Status RunFFT(const OpArgs& a, FFTKind kind) {
  pocketfft::shape_t axes;
  for (int64_t ax : a.op.axes) axes.push_back(static_cast<size_t>(ax));
  const auto& in = a.InType(0).shape;
  const auto& out = a.OutType().shape;
  if (a.InType(0).NumElements() == 0 || a.OutType().NumElements() == 0) return Status::Ok();
  using c = std::complex<float>;
  try {
    switch (kind) {
      case FFTKind::kComplex: {
        if (a.InType(0).dtype != DType::kC64) return a.Unsupported("needs complex64");
        bool inverse = mps::FFTAttrs::Of(a.op).inverse;
        float scale = 1.0f;
        if (inverse)
          for (size_t ax : axes) scale /= static_cast<float>(in[ax]);
        pocketfft::c2c<float>(Dims(in), ByteStrides(in, sizeof(c)), ByteStrides(out, sizeof(c)), axes, !inverse,
                              reinterpret_cast<const c*>(a.in[0]), reinterpret_cast<c*>(a.out[0]), scale);
        return Status::Ok();
      }
      case FFTKind::kRealToHermitean:
        if (a.InType(0).dtype != DType::kF32) return a.Unsupported("needs float32");
        pocketfft::r2c<float>(Dims(in), ByteStrides(in, sizeof(float)), ByteStrides(out, sizeof(c)), axes, true,
                              reinterpret_cast<const float*>(a.in[0]), reinterpret_cast<c*>(a.out[0]), 1.0f);
        return Status::Ok();
      case FFTKind::kHermiteanToReal: {
        if (a.InType(0).dtype != DType::kC64) return a.Unsupported("needs complex64");
        float scale = 1.0f;
        for (size_t ax : axes) scale /= static_cast<float>(out[ax]);
        pocketfft::c2r<float>(Dims(out), ByteStrides(in, sizeof(c)), ByteStrides(out, sizeof(float)), axes, false,
                              reinterpret_cast<const c*>(a.in[0]), reinterpret_cast<float*>(a.out[0]), scale);
        return Status::Ok();
      }
    }
    return Internal("unknown FFT kind");
  } catch (const std::exception& e) {
    return Internal(std::string("pocketfft: ") + e.what());
  }
}

}  // namespace jmp::exec::host
