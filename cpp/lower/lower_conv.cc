// convolution as MPSGraph's Conv2D (NHWC x HWIO): dimension numbers become transposes, 1-D
// convolutions get a unit height, 3-D ones a sum of 2-D convolutions over the depth taps, lhs dilation
// becomes interior padding, negative padding a slice, and batch groups feature groups. Integer and
// complex convolutions (MPSGraph convolves floats only) become a sum of per-tap batched MatMuls.
#include <algorithm>

#include "lower/lower_families.h"
#include "lower/lower_matmul.h"

namespace jmp::mps {

namespace {

int64_t Attr(const shlo::Op& op, const char* name, int64_t fallback) {
  const shlo::Attr* a = op.Find(name);
  if (!a) return fallback;
  if (a->kind == shlo::Attr::Kind::kInt) return a->i;
  if (a->kind == shlo::Attr::Kind::kInts && a->ints.size() == 1) return a->ints[0];
  return fallback;
}

std::vector<int64_t> Ints(const shlo::Op& op, const char* name, size_t n, int64_t fallback) {
  const shlo::Attr* a = op.Find(name);
  if (a && a->kind == shlo::Attr::Kind::kInts && !a->ints.empty()) return a->ints;
  return std::vector<int64_t>(n, fallback);
}

// Zeros between elements along `axis` (lhs dilation): [.., n, ..] -> [.., (n-1)*d+1, ..].
int DilateAxis(LowerContext& cx, int x, size_t axis, int64_t d) {
  Shape s = cx.ShapeOf(x);
  if (d <= 1 || s[axis] <= 1) return x;
  Shape split = s;
  split.insert(split.begin() + static_cast<ptrdiff_t>(axis) + 1, 1);
  int y = cx.Reshape(x, split);
  Shape grown = split;
  grown[axis + 1] = d;
  Shape lo(split.size(), 0), hi(split.size(), 0);
  hi[axis + 1] = d - 1;
  y = cx.Emit(OpKind::kPad, {y}, cx.DTypeOf(y), grown, PadAttrs{lo, hi, 0});
  Shape merged = s;
  merged[axis] = s[axis] * d;
  y = cx.Reshape(y, merged);
  Shape starts(s.size(), 0), ends = merged;
  ends[axis] = (s[axis] - 1) * d + 1;
  return cx.Slice(y, starts, ends);
}

int ConvByTaps(LowerContext& cx, int x, int w, const std::vector<int64_t>& strides,
               const std::vector<int64_t>& dilation, const std::vector<int64_t>& lo, const std::vector<int64_t>& hi,
               int64_t groups);

// One 2-D convolution: x [N,H,W,C], w [KH,KW,C/groups,O], padding already applied (non-negative).
int Conv2D(LowerContext& cx, int x, int w, const std::vector<int64_t>& strides, const std::vector<int64_t>& dilation,
           const std::vector<int64_t>& lo, const std::vector<int64_t>& hi, int64_t groups) {
  Shape xs = cx.ShapeOf(x), ws = cx.ShapeOf(w);
  if (xs.size() != 4 || ws.size() != 4 || strides.size() != 2 || dilation.size() != 2 || lo.size() != 2 ||
      hi.size() != 2) {
    cx.Fail(cx.Unsupported("inconsistent convolution"));
    return x;
  }
  // Conv2D takes the float types (float64 on the host only); integers run as taps on MatMul.
  if (!IsFloat(cx.DTypeOf(x))) return ConvByTaps(cx, x, w, strides, dilation, lo, hi, groups);
  Shape out = {xs[0], 0, 0, ws[3]};
  for (size_t i = 0; i < 2; ++i) {
    int64_t padded = xs[1 + i] + lo[i] + hi[i];
    int64_t window = (ws[i] - 1) * dilation[i] + 1;
    out[1 + i] = padded < window ? 0 : (padded - window) / strides[i] + 1;
  }
  return cx.Emit(OpKind::kConv2D, {x, w}, cx.DTypeOf(x), out, Conv2DAttrs{strides, dilation, lo, hi, groups});
}

// The same convolution for the types Conv2D does not take (integers, complex): pad, then per kernel tap
// one strided slice times that tap's [C/groups, O] matrix as a batched MatMul over the groups, summed.
// Integer MatMul wraps around, as XLA's integer convolution does; complex sums the taps in its own type.
int ConvByTaps(LowerContext& cx, int x, int w, const std::vector<int64_t>& strides,
               const std::vector<int64_t>& dilation, const std::vector<int64_t>& lo, const std::vector<int64_t>& hi,
               int64_t groups) {
  Shape xs = cx.ShapeOf(x), ws = cx.ShapeOf(w);
  DType t = cx.DTypeOf(x);
  if (xs.size() != 4 || ws.size() != 4 || groups < 1 || xs[3] % groups || ws[3] % groups || ws[2] * groups != xs[3]) {
    cx.Fail(cx.Unsupported("inconsistent convolution"));
    return x;
  }
  if (lo[0] || lo[1] || hi[0] || hi[1]) {
    Shape padded = {xs[0], xs[1] + lo[0] + hi[0], xs[2] + lo[1] + hi[1], xs[3]};
    x = cx.Emit(OpKind::kPad, {x}, t, padded, PadAttrs{{0, lo[0], lo[1], 0}, {0, hi[0], hi[1], 0}, 0});
    xs = padded;
  }
  Shape out = {xs[0], 0, 0, ws[3]};
  for (size_t i = 0; i < 2; ++i) {
    int64_t window = (ws[i] - 1) * dilation[i] + 1;
    out[1 + i] = xs[1 + i] < window ? 0 : (xs[1 + i] - window) / strides[i] + 1;
  }
  if (ws[0] * ws[1] > 4096) {
    cx.Fail(cx.Unsupported("convolution by taps with a kernel of more than 4096 taps"));
    return x;
  }
  int64_t m = out[0] * out[1] * out[2], cg = ws[2], og = ws[3] / groups;
  int acc = -1;
  for (int64_t kh = 0; kh < ws[0]; ++kh)
    for (int64_t kw = 0; kw < ws[1]; ++kw) {
      Shape st = {0, kh * dilation[0], kw * dilation[1], 0};
      Shape en = {xs[0], st[1] + (out[1] - 1) * strides[0] + 1, st[2] + (out[2] - 1) * strides[1] + 1, xs[3]};
      if (out[1] == 0) en[1] = st[1];
      if (out[2] == 0) en[2] = st[2];
      int slab = cx.Slice(x, st, en, {1, strides[0], strides[1], 1});     // [N, OH, OW, C]
      slab = cx.Transpose(cx.Reshape(slab, {m, groups, cg}), {1, 0, 2});  // [G, M, Cg]
      int tap = cx.Slice(w, {kh, kw, 0, 0}, {kh + 1, kw + 1, cg, ws[3]});
      tap = cx.Transpose(cx.Reshape(tap, {cg, groups, og}), {1, 0, 2});  // [G, Cg, Og]
      int prod = MatMul(cx, slab, tap);
      prod = cx.Reshape(cx.Transpose(prod, {1, 0, 2}), out);  // [N, OH, OW, O]
      acc = acc < 0 ? prod : cx.Binary(OpKind::kAdd, acc, prod);
    }
  return acc < 0 ? cx.Splat(t, out, 0) : acc;
}

Status Convolution(LowerContext& cx) {
  const shlo::Op& op = cx.op();
  JMP_ASSIGN_OR_RETURN(int x, cx.In(0));
  JMP_ASSIGN_OR_RETURN(int w, cx.In(1));
  const Shape xs0 = cx.ShapeOf(x);
  size_t s = xs0.size() - 2;
  if (s > 3) return cx.Unsupported(std::to_string(s) + "-D convolution");
  int64_t ib = Attr(op, "input_batch_dimension", 0), ifd = Attr(op, "input_feature_dimension", 1);
  int64_t ki = Attr(op, "kernel_input_feature_dimension", 0), ko = Attr(op, "kernel_output_feature_dimension", 1);
  int64_t ob = Attr(op, "output_batch_dimension", 0), of = Attr(op, "output_feature_dimension", 1);
  std::vector<int64_t> isd = Ints(op, "input_spatial_dimensions", s, 0),
                       ksd = Ints(op, "kernel_spatial_dimensions", s, 0),
                       osd = Ints(op, "output_spatial_dimensions", s, 0);
  std::vector<int64_t> strides = Ints(op, "window_strides", s, 1), lhs_dil = Ints(op, "lhs_dilation", s, 1),
                       rhs_dil = Ints(op, "rhs_dilation", s, 1), padding = Ints(op, "padding", 2 * s, 0);
  if (isd.size() != s || ksd.size() != s || osd.size() != s || strides.size() != s || padding.size() != 2 * s)
    return cx.Unsupported("convolution dimension numbers do not match the rank");
  int64_t fgc = Attr(op, "feature_group_count", 1), bgc = Attr(op, "batch_group_count", 1);
  // Dimension numbers from the artifact must be permutations of the ranks before any indexing.
  auto is_permutation = [](std::vector<int64_t> dims, size_t rank) {
    std::sort(dims.begin(), dims.end());
    for (size_t i = 0; i < dims.size(); ++i)
      if (dims[i] != static_cast<int64_t>(i)) return false;
    return dims.size() == rank;
  };
  std::vector<int64_t> in_dims = {ib, ifd}, k_dims = {ki, ko}, o_dims = {ob, of};
  in_dims.insert(in_dims.end(), isd.begin(), isd.end());
  k_dims.insert(k_dims.end(), ksd.begin(), ksd.end());
  o_dims.insert(o_dims.end(), osd.begin(), osd.end());
  if (!is_permutation(in_dims, s + 2) || !is_permutation(k_dims, cx.ShapeOf(w).size()) ||
      !is_permutation(o_dims, cx.OutType(0).shape.size()) || lhs_dil.size() != s || rhs_dil.size() != s)
    return cx.Unsupported("convolution dimension numbers are not permutations of the ranks");
  for (size_t i = 0; i < s; ++i)
    if (strides[i] < 1 || lhs_dil[i] < 1 || rhs_dil[i] < 1)
      return cx.Unsupported("non-positive convolution stride or dilation");
  if (!Reasonable(strides) || !Reasonable(lhs_dil) || !Reasonable(rhs_dil) || !Reasonable(padding) ||
      !Reasonable({fgc, bgc}))
    return cx.Unsupported("convolution attributes out of range");
  if (fgc < 1 || bgc < 1) return cx.Unsupported("non-positive group count");
  const shlo::Attr* reversal = op.Find("window_reversal");
  if (reversal && reversal->kind == shlo::Attr::Kind::kInts)
    for (int64_t r : reversal->ints)
      if (r) return cx.Unsupported("window reversal in convolution");
  const DType out_type = cx.OutType(0).dtype;
  if (!(IsFloat(out_type) || IsInteger(out_type) || out_type == DType::kBool || IsComplex(out_type)))
    return cx.Unsupported("convolution of this type");
  {
    // An empty result (a zero-size batch, feature or spatial dimension) has nothing to compute.
    const Shape& out = cx.OutType(0).shape;
    int64_t elements = 1;
    for (int64_t d : out) elements *= d;
    if (elements == 0) {
      cx.Bind(0, cx.Splat(out_type, out, 0));
      return Status::Ok();
    }
  }
  // One real convolution of x and w as t, giving [N, spatial..., O]; bool and complex64 are built
  // from it below. It works on its own copies of the window attributes (the 0-D, 1-D and 3-D cases
  // reshape them).
  auto real_conv = [&, strides0 = strides, rhs_dil0 = rhs_dil](int x, int w, DType t) -> StatusOr<int> {
    std::vector<int64_t> strides = strides0, rhs_dil = rhs_dil0;
    x = cx.Cast(x, t);
    w = cx.Cast(w, t);
    // Input to [N, spatial..., C], kernel to [spatial..., I, O].
    std::vector<int64_t> xperm = {ib};
    xperm.insert(xperm.end(), isd.begin(), isd.end());
    xperm.push_back(ifd);
    x = cx.Transpose(x, xperm);
    std::vector<int64_t> wperm(ksd.begin(), ksd.end());
    wperm.push_back(ki);
    wperm.push_back(ko);
    w = cx.Transpose(w, wperm);
    // lhs dilation, then negative padding as slices.
    for (size_t i = 0; i < s; ++i) x = DilateAxis(cx, x, 1 + i, lhs_dil[i]);
    std::vector<int64_t> lo(s), hi(s);
    {
      Shape xs = cx.ShapeOf(x), starts(xs.size(), 0), ends = xs;
      for (size_t i = 0; i < s; ++i) {
        lo[i] = std::max<int64_t>(padding[2 * i], 0);
        hi[i] = std::max<int64_t>(padding[2 * i + 1], 0);
        if (padding[2 * i] < 0) starts[1 + i] = -padding[2 * i];
        if (padding[2 * i + 1] < 0) ends[1 + i] += padding[2 * i + 1];
      }
      x = cx.Slice(x, starts, ends);
    }
    // 0-D (a matrix product with groups): unit height and width. 1-D: unit height. 3-D: handled
    // below as depth taps.
    if (s == 0) {
      Shape xs = cx.ShapeOf(x), ws = cx.ShapeOf(w);
      x = cx.Reshape(x, {xs[0], 1, 1, xs[1]});
      w = cx.Reshape(w, {1, 1, ws[0], ws[1]});
      strides = rhs_dil = {1, 1};
      lo = hi = {0, 0};
    }
    if (s == 1) {
      Shape xs = cx.ShapeOf(x), ws = cx.ShapeOf(w);
      x = cx.Reshape(x, {xs[0], 1, xs[1], xs[2]});
      w = cx.Reshape(w, {1, ws[0], ws[1], ws[2]});
      strides.insert(strides.begin(), 1);
      rhs_dil.insert(rhs_dil.begin(), 1);
      lo.insert(lo.begin(), 0);
      hi.insert(hi.begin(), 0);
    }
    auto conv2d = [&](int xin, int win) -> StatusOr<int> {
      if (bgc == 1) return Conv2D(cx, xin, win, strides, rhs_dil, lo, hi, fgc);
      // Batch groups (weight gradients of grouped convolutions): group g pairs batch slice g with
      // output-feature slice g. Moving the batch groups next to the channels makes that a feature-
      // grouped convolution with the same kernel: [G*n, H, W, C] -> [n, H, W, G*C], groups G.
      Shape xs = cx.ShapeOf(xin), ws = cx.ShapeOf(win);
      if (xs[0] % bgc || ws[3] % bgc) return cx.Unsupported("batch_group_count does not divide batch and features");
      int64_t n = xs[0] / bgc, o = ws[3] / bgc;
      if (fgc == 1) {
        int g = cx.Reshape(xin, {bgc, n, xs[1], xs[2], xs[3]});
        g = cx.Transpose(g, {1, 2, 3, 0, 4});
        g = cx.Reshape(g, {n, xs[1], xs[2], bgc * xs[3]});
        return Conv2D(cx, g, win, strides, rhs_dil, lo, hi, bgc);
      }
      // Both kinds of groups (StableHLO does not allow it, but be safe): one convolution per batch group.
      std::vector<int> parts;
      for (int64_t g = 0; g < bgc; ++g) {
        Shape xst(4, 0), xen = xs, wst(4, 0), wen = ws;
        xst[0] = g * n;
        xen[0] = (g + 1) * n;
        wst[3] = g * o;
        wen[3] = (g + 1) * o;
        parts.push_back(Conv2D(cx, cx.Slice(xin, xst, xen), cx.Slice(win, wst, wen), strides, rhs_dil, lo, hi, fgc));
      }
      Shape ps = cx.ShapeOf(parts[0]);
      ps[3] *= bgc;
      return cx.Emit(OpKind::kConcat, parts, t, ps, AxisAttrs{3});
    };
    int y;
    if (s == 3) {
      // Sum over the depth taps of 2-D convolutions on strided depth slices.
      Shape xs = cx.ShapeOf(x), ws = cx.ShapeOf(w);
      int64_t depth = xs[1] + lo[0] + hi[0], kd = ws[0];
      int64_t od = depth < (kd - 1) * rhs_dil[0] + 1 ? 0 : (depth - (kd - 1) * rhs_dil[0] - 1) / strides[0] + 1;
      // Pad depth explicitly so every tap is a plain strided slice.
      if (lo[0] || hi[0]) {
        Shape padded = xs;
        padded[1] = depth;
        Shape plo(5, 0), phi(5, 0);
        plo[1] = lo[0];
        phi[1] = hi[0];
        x = cx.Emit(OpKind::kPad, {x}, t, padded, PadAttrs{plo, phi, 0});
        xs = padded;
      }
      if (kd > 4096) return cx.Unsupported("3-D convolution with more than 4096 depth taps");
      int64_t stride_d = strides[0], dil_d = rhs_dil[0];
      strides = {strides[1], strides[2]};
      rhs_dil = {rhs_dil[1], rhs_dil[2]};
      lo = {lo[1], lo[2]};
      hi = {hi[1], hi[2]};
      int acc = -1;
      for (int64_t k = 0; k < kd && od > 0; ++k) {
        Shape st(5, 0), en = xs, sd = {1, stride_d, 1, 1, 1};
        st[1] = k * dil_d;
        en[1] = st[1] + (od - 1) * stride_d + 1;
        int slab = cx.Slice(x, st, en, sd);  // [N, od, H, W, C]
        Shape ss = cx.ShapeOf(slab);
        int flat = cx.Reshape(slab, {ss[0] * ss[1], ss[2], ss[3], ss[4]});
        Shape wst(5, 0), wen = ws;
        wst[0] = k;
        wen[0] = k + 1;
        int tap = cx.Reshape(cx.Slice(w, wst, wen), {ws[1], ws[2], ws[3], ws[4]});
        JMP_ASSIGN_OR_RETURN(int part, conv2d(flat, tap));
        // Batch groups shrink the batch (N*od -> N/groups*od); od stays the inner factor.
        Shape ps = cx.ShapeOf(part);
        part = cx.Reshape(part, {ps[0] / ss[1], ss[1], ps[1], ps[2], ps[3]});
        acc = acc < 0 ? part : cx.Binary(OpKind::kAdd, acc, part);
      }
      if (acc < 0) return cx.Unsupported("empty 3-D convolution");
      y = acc;
    } else {
      JMP_ASSIGN_OR_RETURN(y, conv2d(x, w));
    }
    if (s == 1) {
      Shape ys = cx.ShapeOf(y);
      y = cx.Reshape(y, {ys[0], ys[2], ys[3]});
    }
    if (s == 0) {
      Shape ys = cx.ShapeOf(y);
      y = cx.Reshape(y, {ys[0], ys[3]});
    }
    return y;
  };
  int y;
  if (out_type == DType::kBool) {
    // An OR of ANDs: the integer sum of 0/1 products is nonzero exactly when one product is 1.
    JMP_ASSIGN_OR_RETURN(int sum, real_conv(x, w, DType::kI32));
    y = cx.Compare(OpKind::kNotEqual, sum, cx.Splat(DType::kI32, cx.ShapeOf(sum), 0));
  } else if (IsComplex(out_type)) {
    // (a + bi) * (c + di) summed: real ac - bd, imaginary ad + bc, four real convolutions (float32 ones
    // run as MPSGraph convolutions; complex128's parts are float64, on the host).
    const DType part = RealOf(out_type);
    auto re = [&](int v) { return cx.Emit(OpKind::kRealPart, {cx.Cast(v, out_type)}, part, cx.ShapeOf(v)); };
    auto im = [&](int v) { return cx.Emit(OpKind::kImaginaryPart, {cx.Cast(v, out_type)}, part, cx.ShapeOf(v)); };
    int a = re(x), b = im(x), c = re(w), d = im(w);
    JMP_ASSIGN_OR_RETURN(int ac, real_conv(a, c, part));
    JMP_ASSIGN_OR_RETURN(int bd, real_conv(b, d, part));
    JMP_ASSIGN_OR_RETURN(int ad, real_conv(a, d, part));
    JMP_ASSIGN_OR_RETURN(int bc, real_conv(b, c, part));
    int real = cx.Binary(OpKind::kSubtract, ac, bd), imag = cx.Binary(OpKind::kAdd, ad, bc);
    y = cx.Emit(OpKind::kComplexFromParts, {real, imag}, out_type, cx.ShapeOf(real));
  } else {
    JMP_ASSIGN_OR_RETURN(y, real_conv(x, w, out_type));
  }
  // [N, spatial..., O] -> the output's dimension order.
  const Shape& out = cx.OutType(0).shape;
  std::vector<int64_t> perm(out.size());
  perm[static_cast<size_t>(ob)] = 0;
  for (size_t i = 0; i < s; ++i) perm[static_cast<size_t>(osd[i])] = static_cast<int64_t>(1 + i);
  perm[static_cast<size_t>(of)] = static_cast<int64_t>(1 + s);
  y = cx.Transpose(y, perm);
  if (cx.ShapeOf(y) != out) return cx.Unsupported("convolution output shape mismatch");
  cx.Bind(0, y);
  return Status::Ok();
}

}  // namespace

void RegisterConvRules(std::map<std::string, LowerRule>& r) { RegisterRule(r, "stablehlo.convolution", &Convolution); }

}  // namespace jmp::mps
