// fft: StableHLO transforms the trailing len(fft_length) dims; MPSGraph transforms named axes within
// the last four, so leading batch dims are merged into one first (rank <= 4) and split afterwards.
#include "mps/lower_families.h"

namespace jmp::mps {

namespace {

Status Fft(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int x, cx.In(0));
  const shlo::Attr* type = cx.op().Find("fft_type");
  JMP_ASSIGN_OR_RETURN(std::vector<int64_t> lengths, cx.IntsAttr("fft_length"));
  if (!type) return cx.Unsupported("fft without fft_type");
  const Shape in = cx.ShapeOf(x);
  const shlo::Type& out_type = cx.OutType(0);
  size_t k = lengths.size();
  if (k < 1 || k > 3 || k > in.size()) return cx.Unsupported("fft over " + std::to_string(k) + " dimensions");
  if (cx.DTypeOf(x) == DType::kC128 || out_type.dtype == DType::kC128) return cx.Unsupported("complex128 FFT");
  // [batch..., n1..nk] -> [B, n1..nk]
  int64_t batch = 1;
  for (size_t d = 0; d + k < in.size(); ++d) batch *= in[d];
  auto merged = [&](const Shape& s) {
    Shape m = {batch};
    m.insert(m.end(), s.end() - static_cast<ptrdiff_t>(k), s.end());
    return m;
  };
  int y = cx.Reshape(x, merged(in));
  std::vector<int64_t> axes;
  for (size_t i = 0; i < k; ++i) axes.push_back(static_cast<int64_t>(1 + i));
  Shape out = merged(out_type.shape);
  const std::string& t = type->s;
  OpKind kind;
  int64_t flags = 0;
  if (t == "FFT" || t == "IFFT") {
    kind = OpKind::kFFT;
    flags = t == "IFFT" ? 1 : 0;
  } else if (t == "RFFT") {
    kind = OpKind::kRealToHermiteanFFT;
    if (cx.DTypeOf(y) != DType::kF32) return cx.Unsupported("RFFT of a non-float32 operand");
  } else if (t == "IRFFT") {
    kind = OpKind::kHermiteanToRealFFT;
    // The input's last axis may carry more bins than n/2+1: the extra ones are unused.
    Shape s = cx.ShapeOf(y);
    int64_t bins = lengths.back() / 2 + 1;
    if (s.back() > bins) {
      Shape starts(s.size(), 0), ends = s;
      ends.back() = bins;
      y = cx.Slice(y, starts, ends);
    } else if (s.back() < bins) {
      return cx.Unsupported("IRFFT input has fewer bins than its length needs");
    }
  } else {
    return cx.Unsupported("unknown fft_type " + t);
  }
  Op& op = cx.Emit(kind, {y}, out_type.dtype, out);
  op.axes = axes;
  op.int_attr = flags;
  cx.Bind(0, cx.Reshape(op.outputs[0], out_type.shape));
  return Status::Ok();
}

}  // namespace

void RegisterFftRules(std::map<std::string, LowerRule>& r) { RegisterRule(r, "stablehlo.fft", &Fft); }

}  // namespace jmp::mps
