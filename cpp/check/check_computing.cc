// The self-check's computing cases: matrix products, reductions along every axis, cumulative ops,
// FFTs, convolution, pooling and While. Floating results are compared within eps * length * operand
// norm (operands in [-1, 1], so the norm is 1), the order of a sum being the executor's own.
#include <algorithm>
#include <cmath>

#include "check/check_builder.h"
#include "check/check_cases.h"
#include "lower/lower_matmul.h"

namespace jmp::check {

namespace {

using K = mps::OpKind;

bool IsReduction(K k) {
  return k == K::kReductionSum || k == K::kReductionProduct || k == K::kReductionMaximum || k == K::kReductionMinimum ||
         k == K::kReductionAnd || k == K::kReductionOr || k == K::kReductionArgMaximum || k == K::kReductionArgMinimum;
}
bool IsCumulative(K k) {
  return k == K::kCumulativeSum || k == K::kCumulativeProduct || k == K::kCumulativeMaximum ||
         k == K::kCumulativeMinimum;
}

// A sum's bound: 2 eps n max|x| (sum) or 2 n ulps (product); max/min and integers exactly (up to -0/+0).
Tolerance Accumulated(K k, DType d, int64_t n) {
  if (!IsFloat(d) && !IsComplex(d)) return Exact();
  const double len = static_cast<double>(std::max<int64_t>(n, 1));
  if (k == K::kReductionSum || k == K::kCumulativeSum || k == K::kMatMul || k == K::kConv2D || k == K::kAvgPool4D)
    return Scaled(2, Epsilon(d) * len);
  if (k == K::kReductionProduct || k == K::kCumulativeProduct) return Ulps(2 * len);
  return Ulps(0);
}

// Values in [-1, 1] for sums and products (no overflow, so the bound holds); edge values otherwise.
Range OperandRange(K k, DType d) {
  if (!IsFloat(d)) return Range::kEdge;
  if (k == K::kReductionSum || k == K::kReductionProduct || k == K::kCumulativeSum || k == K::kCumulativeProduct ||
      k == K::kMatMul || k == K::kConv2D || k == K::kAvgPool4D)
    return Range::kUnit;
  return Range::kEdge;
}

// a x b as the lowering emits it into g (lower/lower_matmul.h): within MPSGraph's size limits, tiles
// and chunks past them, so the check runs what programs run.
int LoweredMatMul(mps::Graph& g, int a, int b) {
  static const shlo::Module kNoModule;  // only the emitting helpers are used
  mps::LowerContext cx(kNoModule);
  mps::Scope scope;
  scope.graph = &g;
  cx.SwapScope(&scope);
  return mps::MatMul(cx, a, b);
}

}  // namespace

bool BuildComputing(K k, DType d, bool quick, Case& c) {
  const uint32_t seed = static_cast<uint32_t>(k) * 7919 + static_cast<uint32_t>(d);
  const Range range = OperandRange(k, d);
  auto add = [&](ProgramBuilder& b, std::vector<Tolerance> t) { c.programs.push_back(b.Done(std::move(t))); };
  auto operand = [&](const std::vector<int64_t>& shape, uint32_t salt) {
    // Integer sums and products wrap, exactly: small values keep products from being 0 after the wrap.
    return Fill(d, CountOf(shape),
                IsInteger(d) && k != K::kReductionMaximum && k != K::kReductionMinimum && k != K::kCumulativeMaximum &&
                        k != K::kCumulativeMinimum && k != K::kReductionArgMaximum && k != K::kReductionArgMinimum
                    ? Range::kSmallInt
                    : range,
                seed + salt);
  };
  if (k == K::kMatMul) {
    struct Shape {
      std::vector<int64_t> a, b, out;
    };
    std::vector<Shape> shapes = {{{2, 3, 5}, {2, 5, 4}, {2, 3, 4}}, {{4, 0}, {0, 3}, {4, 3}}, {{1, 1}, {1, 1}, {1, 1}}};
    // Past the sizes MPSGraph's matmul gets wrong before macOS 14.4 (op_kinds.def's MatMul row): M or N
    // above 32768, complex K above 2048, as the lowering splits them.
    shapes.push_back({{2, 8}, {8, 40000}, {2, 40000}});
    shapes.push_back({{40000, 8}, {8, 2}, {40000, 2}});
    if (IsComplex(d)) shapes.push_back({{2, 3000}, {3000, 2}, {2, 2}});
    if (!quick) shapes.push_back({{2, 70000}, {70000, 2}, {2, 2}});
    for (const Shape& s : shapes) {
      ProgramBuilder b("[" + std::to_string(s.a.front()) + ",...] x [...," + std::to_string(s.b.back()) + "]");
      const int x = b.In(d, s.a, operand(s.a, 1));
      const int y = b.In(d, s.b, operand(s.b, 2));
      b.Out(LoweredMatMul(b.graph(), x, y));
      add(b, {Accumulated(k, d, s.a.back())});
    }
    return true;
  }
  if (IsReduction(k)) {
    const bool arg = k == K::kReductionArgMaximum || k == K::kReductionArgMinimum;
    const DType out = arg ? DType::kI32 : d;
    std::vector<std::vector<int64_t>> axes_list = {{0}, {1}, {2}};
    if (!arg) axes_list.push_back({0, 1, 2});
    const std::vector<int64_t> shape = {3, 4, 5};
    for (const auto& axes : axes_list) {
      std::vector<int64_t> kept = shape;
      int64_t n = 1;
      for (int64_t a : axes) {
        n *= kept[static_cast<size_t>(a)];
        kept[static_cast<size_t>(a)] = 1;
      }
      ProgramBuilder b("axes " + std::to_string(axes.size() == 3 ? -1 : axes[0]) + " of [3,4,5]");
      b.Returning(k, {b.In(d, shape, operand(shape, 1))}, {out, kept}, [&](mps::Op& op) {
        op.attrs = arg ? mps::OpAttrs{mps::AxisAttrs{axes[0]}} : mps::OpAttrs{mps::AxesAttrs{axes}};
      });
      add(b, {arg ? Exact() : Accumulated(k, d, n)});
    }
    if (IsFloat(d) && !arg) {  // NaN and infinity propagate whatever the order: a NaN row, an inf row
      ProgramBuilder b("NaN and infinity rows");
      std::vector<double> v = {1, std::nan(""), -1, 0.5, HUGE_VAL, 0.25, 1, -0.5};
      b.Returning(k, {b.In(d, {2, 4}, Encode(d, v))}, {out, {2, 1}},
                  [](mps::Op& op) { op.attrs = mps::AxesAttrs{{1}}; });
      add(b, {Accumulated(k, d, 4)});
    }
    if (!arg) {
      ProgramBuilder b("empty axis of [0,4]");
      b.Returning(k, {b.In(d, {0, 4}, {})}, {out, {1, 4}}, [](mps::Op& op) { op.attrs = mps::AxesAttrs{{0}}; });
      add(b, {Exact()});
    }
    if (!quick) {
      ProgramBuilder b("[70000]");
      b.Returning(k, {b.In(d, {70000}, operand({70000}, 2))}, {out, {1}}, [&](mps::Op& op) {
        op.attrs = arg ? mps::OpAttrs{mps::AxisAttrs{0}} : mps::OpAttrs{mps::AxesAttrs{{0}}};
      });
      add(b, {arg ? Exact() : Accumulated(k, d, 70000)});
    }
    return true;
  }
  if (IsCumulative(k)) {
    for (int64_t axis = 0; axis < 2; ++axis)
      for (int flags = 0; flags < 4; ++flags) {
        const bool exclusive = flags & 1, reverse = flags & 2;
        ProgramBuilder b("axis " + std::to_string(axis) + (exclusive ? " exclusive" : "") +
                         (reverse ? " reverse" : ""));
        b.Returning(k, {b.In(d, {4, 6}, operand({4, 6}, 1))}, {d, {4, 6}},
                    [&](mps::Op& op) { op.attrs = mps::CumulativeAttrs{axis, exclusive, reverse}; });
        add(b, {Accumulated(k, d, 6)});
      }
    if (!quick) {
      ProgramBuilder b("[70000]");
      b.Returning(k, {b.In(d, {70000}, operand({70000}, 2))}, {d, {70000}},
                  [](mps::Op& op) { op.attrs = mps::CumulativeAttrs{0, false, false}; });
      add(b, {Accumulated(k, d, 70000)});
    }
    return true;
  }
  if (k == K::kFFT || k == K::kRealToHermiteanFFT || k == K::kHermiteanToRealFFT) {
    struct Variant {
      std::vector<int64_t> in, out, axes;
      bool inverse;
    };
    std::vector<Variant> variants;
    if (k == K::kFFT)
      variants = {{{4, 8}, {4, 8}, {1}, false}, {{4, 8}, {4, 8}, {1}, true}, {{4, 8}, {4, 8}, {0, 1}, false}};
    else if (k == K::kRealToHermiteanFFT)
      variants = {{{4, 8}, {4, 5}, {1}, false}, {{3, 7}, {3, 4}, {1}, false}};
    else
      variants = {{{4, 5}, {4, 8}, {1}, true}, {{3, 4}, {3, 7}, {1}, true}};
    const DType out = k == K::kRealToHermiteanFFT ? ComplexOf(d) : k == K::kHermiteanToRealFFT ? RealOf(d) : d;
    for (const Variant& v : variants) {
      ProgramBuilder b(std::string(v.inverse ? "inverse" : "forward") + " over " + std::to_string(v.axes.size()) +
                       " axes");
      int64_t n = 1;
      for (int64_t a : v.axes) n *= std::max(v.in[static_cast<size_t>(a)], v.out[static_cast<size_t>(a)]);
      std::vector<uint8_t> x = Fill(d, CountOf(v.in), Range::kUnit, seed);
      if (k == K::kHermiteanToRealFFT) {  // a real signal's spectrum: real zero and Nyquist bins
        std::vector<double> parts = Decode(RealOf(d), x);
        const int64_t cols = v.in.back(), n_out = v.out.back();
        for (int64_t r = 0; r < v.in[0]; ++r) {
          parts[static_cast<size_t>(2 * (r * cols) + 1)] = 0;
          if (n_out % 2 == 0) parts[static_cast<size_t>(2 * (r * cols + cols - 1) + 1)] = 0;
        }
        x = Encode(RealOf(d), parts);
      }
      b.Returning(k, {b.In(d, v.in, x)}, {out, v.out},
                  [&](mps::Op& op) { op.attrs = mps::FFTAttrs{v.axes, v.inverse}; });
      add(b, {Scaled(2, Epsilon(d) * static_cast<double>(n))});
    }
    return true;
  }
  if (k == K::kConv2D) {
    struct Variant {
      std::vector<int64_t> w, out, strides;
      int64_t groups, pad;
    };
    for (const Variant& v :
         std::vector<Variant>{{{3, 3, 2, 4}, {1, 5, 5, 4}, {1, 1}, 1, 1}, {{3, 3, 1, 4}, {1, 2, 2, 4}, {2, 2}, 2, 0}}) {
      ProgramBuilder b("groups " + std::to_string(v.groups) + ", stride " + std::to_string(v.strides[0]));
      int x = b.In(d, {1, 5, 5, 2}, operand({1, 5, 5, 2}, 1));
      int w = b.In(d, v.w, operand(v.w, 2));
      b.Returning(k, {x, w}, {d, v.out}, [&](mps::Op& op) {
        op.attrs = mps::Conv2DAttrs{v.strides, {1, 1}, {v.pad, v.pad}, {v.pad, v.pad}, v.groups};
      });
      add(b, {Accumulated(k, d, v.w[0] * v.w[1] * v.w[2])});
    }
    return true;
  }
  if (k == K::kMaxPool4D || k == K::kAvgPool4D) {
    // NaN-free for the max (a NaN in a window is the row's assumption, probed on its own).
    const Range values = k == K::kMaxPool4D ? Range::kFinite : Range::kUnit;
    struct Variant {
      std::vector<int64_t> window, strides, pad, out;
    };
    for (const Variant& v : std::vector<Variant>{{{1, 2, 2, 1}, {1, 2, 2, 1}, {0, 0, 0, 0}, {1, 2, 2, 2}},
                                                 {{1, 3, 3, 1}, {1, 1, 1, 1}, {0, 1, 1, 0}, {1, 4, 4, 2}}}) {
      ProgramBuilder b("window " + std::to_string(v.window[1]));
      b.Returning(k, {b.In(d, {1, 4, 4, 2}, Fill(d, 32, values, seed))}, {d, v.out},
                  [&](mps::Op& op) { op.attrs = mps::Pool4DAttrs{v.window, v.strides, v.pad, v.pad}; });
      add(b, {k == K::kMaxPool4D ? Ulps(0) : Accumulated(k, d, 9)});
    }
    return true;
  }
  if (k == K::kMaxPool4DGradient) {
    ProgramBuilder b("2x2 windows of [1,4,4,1]");
    int g = b.In(d, {1, 2, 2, 1}, Fill(d, 4, Range::kUnit, seed));
    int s = b.In(d, {1, 4, 4, 1}, Fill(d, 16, Range::kUnit, seed + 1));
    b.Returning(k, {g, s}, {d, {1, 4, 4, 1}}, [](mps::Op& op) {
      op.attrs = mps::Pool4DAttrs{{1, 2, 2, 1}, {1, 2, 2, 1}, {0, 0, 0, 0}, {0, 0, 0, 0}};
    });
    add(b, {Ulps(0)});
    return true;
  }
  if (k == K::kWhile) {
    // Three iterations of x <- -x (!x, ~x for bool and unsigned), counted in int32 (x first: the op is
    // judged by its dtype).
    ProgramBuilder b("three negations");
    int x0 = b.In(d, {5}, Fill(d, 5, IsFloat(d) ? Range::kEdge : Range::kSmallInt, seed));
    int i0 = b.In(DType::kI32, {}, Encode(DType::kI32, {0}));
    auto op = [](mps::Graph& g, K kind, std::vector<int> in, int out, std::vector<uint8_t> data = {}) {
      mps::Op o;
      o.kind = kind;
      o.inputs = std::move(in);
      o.outputs = {out};
      if (kind == K::kConstant) o.attrs = mps::ConstantAttrs{std::move(data)};
      g.ops.push_back(std::move(o));
    };
    mps::Graph cond, body;
    for (mps::Graph* g : {&cond, &body}) g->inputs = {g->AddValue(d, {5}), g->AddValue(DType::kI32, {})};
    int three = cond.AddValue(DType::kI32, {}), less = cond.AddValue(DType::kBool, {});
    op(cond, K::kConstant, {}, three, Encode(DType::kI32, {3}));
    op(cond, K::kLessThan, {cond.inputs[1], three}, less);
    cond.outputs = {less};
    int one = body.AddValue(DType::kI32, {}), next = body.AddValue(DType::kI32, {}), negated = body.AddValue(d, {5});
    op(body, K::kConstant, {}, one, Encode(DType::kI32, {1}));
    op(body, K::kAdd, {body.inputs[1], one}, next);
    op(body, d == DType::kBool ? K::kNot : IsUnsignedInt(d) ? K::kBitwiseNot : K::kNegative, {body.inputs[0]}, negated);
    body.outputs = {negated, next};
    auto outs = b.Op(k, {x0, i0}, {{d, {5}}, {DType::kI32, {}}}, [&](mps::Op& o) { o.subgraphs = {cond, body}; });
    b.Out(outs[0]);
    b.Out(outs[1]);
    add(b, {Exact()});
    return true;
  }
  return false;
}

}  // namespace jmp::check
