// fft: StableHLO transforms the trailing len(fft_length) dims (1 to 3); MPSGraph transforms named
// axes within the last four, so leading batch dims are merged into one first (rank <= 4) and split
// afterwards. Each MPS op gets the narrowest contract that does the job:
//   FFT / IFFT  one FFT over all the axes (IFFT inverse, scaled 1/N);
//   RFFT        RealToHermiteanFFT on the last axis, then FFT on the others;
//   IRFFT       inverse FFT on the other axes, then HermiteanToRealFFT on the last one, after the
//               imaginary parts of its zero and Nyquist bins are set to 0, which is what C2R
//               transforms (XLA's included) read there: the result never depends on MPSGraph's rule.
#include "lower/lower_families.h"

namespace jmp::mps {

namespace {

// `inverse` is read by FFT only (the Hermitean ops fix their direction and scaling).
int EmitFft(LowerContext& cx, OpKind kind, int x, DType dtype, Shape shape, std::vector<int64_t> axes, bool inverse) {
  return cx.Emit(kind, {x}, dtype, std::move(shape), FFTAttrs{std::move(axes), inverse});
}

// The last axis' bins 0 and n/2 (n even) with their imaginary part 0. Which bins those are depends on
// the last axis alone: the mask is made over one row and broadcast, not compared again per row.
int RealEdgeBins(LowerContext& cx, int z, int64_t n) {
  const Shape shape = cx.ShapeOf(z);
  Shape row(shape.size(), 1);
  row.back() = shape.back();
  int64_t axis = static_cast<int64_t>(shape.size()) - 1;
  int bin = cx.Iota(row, axis);
  int edge = cx.Compare(OpKind::kEqual, bin, cx.Splat(DType::kI32, row, 0));
  if (n % 2 == 0 && n / 2 < shape.back())
    edge = cx.Binary(OpKind::kLogicalOr, edge,
                     cx.Compare(OpKind::kEqual, bin, cx.Splat(DType::kI32, row, static_cast<double>(n / 2))));
  edge = cx.BroadcastTo(edge, shape);
  const DType c = cx.DTypeOf(z), f = RealOf(c);
  int re = cx.Emit(OpKind::kRealPart, {z}, f, shape);
  int im = cx.Emit(OpKind::kImaginaryPart, {z}, f, shape);
  im = cx.Select(edge, cx.Splat(f, shape, 0), im);
  return cx.Emit(OpKind::kComplexFromParts, {re, im}, c, shape);
}

Status Fft(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int x, cx.In(0));
  const shlo::Attr* type = cx.op().Find("fft_type");
  JMP_ASSIGN_OR_RETURN(std::vector<int64_t> lengths, cx.IntsAttr("fft_length"));
  if (!type) return cx.Unsupported("fft without fft_type");
  const Shape in = cx.ShapeOf(x);
  const shlo::Type& out_type = cx.OutType(0);
  size_t k = lengths.size();
  if (k < 1 || k > 3 || k > in.size() || out_type.shape.size() != in.size())
    return cx.Unsupported("fft over " + std::to_string(k) + " dimensions");
  if (!Reasonable(lengths)) return cx.Unsupported("fft_length out of range");
  const std::string& t = type->s;
  bool real_in = t == "RFFT", real_out = t == "IRFFT";
  if (t != "FFT" && t != "IFFT" && !real_in && !real_out) return cx.Unsupported("unknown fft_type " + t);
  // complex64/float32, or complex128/float64 (host only: MPSGraph has no float64).
  const DType c = ComplexOf(cx.DTypeOf(x)), f = RealOf(c);
  DType want_in = real_in ? f : c, want_out = real_out ? f : c;
  if (cx.DTypeOf(x) != want_in || out_type.dtype != want_out)
    return cx.Unsupported(t + " needs " + std::string(DTypeName(want_in)) + " -> " + std::string(DTypeName(want_out)));
  // The transformed dims: fft_length, except IRFFT's input (n/2+1 bins, more are ignored) and
  // RFFT's output (n/2+1 bins) on the last one.
  size_t lead = in.size() - k;
  int64_t n_last = lengths.back();
  for (size_t i = 0; i < k; ++i) {
    bool last = i + 1 == k;
    int64_t in_dim = in[lead + i], out_dim = out_type.shape[lead + i];
    int64_t want_in_dim = last && real_out ? n_last / 2 + 1 : lengths[i];
    int64_t want_out_dim = last && real_in ? n_last / 2 + 1 : lengths[i];
    bool in_ok = last && real_out ? in_dim >= want_in_dim : in_dim == want_in_dim;
    if (!in_ok || out_dim != want_out_dim)
      return cx.Unsupported("fft_length does not match the operand and result shapes");
  }
  for (size_t d = 0; d < lead; ++d)
    if (in[d] != out_type.shape[d]) return cx.Unsupported("fft batch dims differ between operand and result");

  // [batch..., n1..nk] -> [B, n1..nk]
  int64_t batch = 1;
  for (size_t d = 0; d < lead; ++d) batch *= in[d];
  auto merged = [&](const Shape& s) {
    Shape m = {batch};
    m.insert(m.end(), s.end() - static_cast<ptrdiff_t>(k), s.end());
    return m;
  };
  int y = cx.Reshape(x, merged(in));
  Shape out = merged(out_type.shape);
  std::vector<int64_t> all, others;
  for (size_t i = 0; i < k; ++i) all.push_back(static_cast<int64_t>(1 + i));
  others.assign(all.begin(), all.end() - 1);
  int64_t last_axis = static_cast<int64_t>(k);

  int r;
  if (!real_in && !real_out) {
    r = EmitFft(cx, OpKind::kFFT, y, c, out, all, t == "IFFT");
  } else if (real_in) {
    r = EmitFft(cx, OpKind::kRealToHermiteanFFT, y, c, out, {last_axis}, false);
    if (!others.empty()) r = EmitFft(cx, OpKind::kFFT, r, c, out, others, false);
  } else {
    Shape s = cx.ShapeOf(y);
    int64_t bins = n_last / 2 + 1;
    if (s.back() > bins) {  // bins past n/2 are not read
      Shape starts(s.size(), 0), ends = s;
      ends.back() = bins;
      y = cx.Slice(y, starts, ends);
      s.back() = bins;
    }
    if (!others.empty()) y = EmitFft(cx, OpKind::kFFT, y, c, s, others, true);
    r = EmitFft(cx, OpKind::kHermiteanToRealFFT, RealEdgeBins(cx, y, n_last), f, out, {last_axis}, false);
  }
  cx.Bind(0, cx.Reshape(r, out_type.shape));
  return Status::Ok();
}

}  // namespace

void RegisterFftRules(std::map<std::string, LowerRule>& r) { RegisterRule(r, "stablehlo.fft", &Fft); }

}  // namespace jmp::mps
