// One probe per ASSUMPTION row of op_kinds.def: inputs chosen so that a Metal side behaving otherwise
// than the row assumes gives a different result from the host executor, which implements the row.
#include <cmath>

#include "check/check_builder.h"

namespace jmp::check {

namespace {

using K = mps::OpKind;
using D = DType;
const double kNaN = std::nan("");

Case Probe(K kind, D dtype, std::string what) {
  Case c;
  c.kind = kind;
  c.dtype = dtype;
  c.probe = std::move(what);
  return c;
}

// kind(x) or kind(x, y) elementwise over the given values.
Program Elementwise(K kind, D in, D out, const std::vector<double>& x, const std::vector<double>& y = {}) {
  ProgramBuilder b(std::string(DTypeName(in)) + " values");
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<int> ins = {b.In(in, {n}, Encode(in, x))};
  if (!y.empty()) ins.push_back(b.In(in, {n}, Encode(in, y)));
  b.Returning(kind, ins, {out, {n}});
  return b.Done({Exact()});
}

Program OneOp(const std::string& what, K kind, const std::vector<std::pair<mps::TensorType, std::vector<double>>>& ins,
              const std::vector<mps::TensorType>& outs, const std::function<void(mps::Op&)>& attrs,
              std::vector<Tolerance> tol = {Exact(false)}) {
  ProgramBuilder b(what);
  std::vector<int> values;
  for (const auto& [t, v] : ins) values.push_back(b.In(t.dtype, t.shape, Encode(t.dtype, v)));
  for (int v : b.Op(kind, values, outs, attrs)) b.Out(v);
  return b.Done(std::move(tol));
}

}  // namespace

std::vector<Case> AssumptionProbes() {
  std::vector<Case> cases;
  {
    Case c = Probe(K::kSign, D::kF32, "Sign: NaN gives 0, +-0 kept");
    c.programs.push_back(Elementwise(K::kSign, D::kF32, D::kF32, {kNaN, -kNaN, 0.0, -0.0, 3.0, -3.0}));
    cases.push_back(std::move(c));
  }
  {
    Case c = Probe(K::kRound, D::kF32, "Round: half away from zero");
    c.programs.push_back(Elementwise(K::kRound, D::kF32, D::kF32, {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997}));
    cases.push_back(std::move(c));
  }
  {
    Case c = Probe(K::kDivide, D::kI32, "Divide: integer division truncates toward zero");
    c.programs.push_back(Elementwise(K::kDivide, D::kI32, D::kI32, {7, -7, 7, -7, 1, -1}, {2, 2, -2, -2, 3, 3}));
    cases.push_back(std::move(c));
  }
  {
    Case c = Probe(K::kModulo, D::kI32, "Modulo: truncated remainder, the dividend's sign");
    c.programs.push_back(Elementwise(K::kModulo, D::kI32, D::kI32, {7, -7, 7, -7}, {3, 3, -3, -3}));
    cases.push_back(std::move(c));
    Case f = Probe(K::kModulo, D::kF32, "Modulo: C fmod, the dividend's sign");
    f.programs.push_back(
        Elementwise(K::kModulo, D::kF32, D::kF32, {7.5, -7.5, 7.5, -7.5, -0.0, 4.0}, {2, 2, -2, -2, 1, 2}));
    cases.push_back(std::move(f));
  }
  {
    Case c = Probe(K::kBitwiseRightShift, D::kI32, "Shifts: right shift arithmetic for signed types");
    c.programs.push_back(
        Elementwise(K::kBitwiseRightShift, D::kI32, D::kI32, {-8, -1, -2147483648.0, 8}, {1, 31, 4, 1}));
    cases.push_back(std::move(c));
    Case u = Probe(K::kBitwiseRightShift, D::kU32, "Shifts: right shift logical for unsigned types");
    u.programs.push_back(
        Elementwise(K::kBitwiseRightShift, D::kU32, D::kU32, {2147483648.0, 4294967295.0, 8}, {1, 31, 1}));
    cases.push_back(std::move(u));
  }
  {
    Case c = Probe(K::kCast, D::kF32, "Cast: float to int truncates, saturates, NaN to 0; to bool x != 0");
    const std::vector<double> x = {2.7, -2.7, kNaN, 3e9, -3e9, HUGE_VAL, -HUGE_VAL, 0.5, -0.0};
    for (D to : {D::kI32, D::kU8, D::kI64, D::kU32, D::kBool})
      c.programs.push_back(Elementwise(K::kCast, D::kF32, to, x));
    c.programs.push_back(Elementwise(K::kCast, D::kBool, D::kF32, {0, 1}));
    cases.push_back(std::move(c));
  }
  for (D d : {D::kF16, D::kBF16}) {  // 1 + 8 * 2^-12: an f16/bf16 accumulator loses the small terms
    const double tiny = d == D::kF16 ? 0x1p-12 : 0x1p-9;
    Case c = Probe(K::kMatMul, d, "MatMul: f16/bf16 products accumulate in f32");
    std::vector<double> a = {1, tiny, tiny, tiny, tiny, tiny, tiny, tiny, tiny};
    c.programs.push_back(OneOp("[1,9] x [9,1]", K::kMatMul,
                               {{{d, {1, 9}}, a}, {{d, {9, 1}}, std::vector<double>(9, 1)}}, {{d, {1, 1}}}, nullptr));
    cases.push_back(std::move(c));
  }
  for (K k : {K::kReductionArgMaximum, K::kReductionArgMinimum}) {
    Case c = Probe(k, D::kF32, "ArgMax/ArgMin: ties give the smallest index, NaN wins, the first one");
    c.programs.push_back(OneOp("ties", k, {{{D::kF32, {6}}, {1, 3, 3, 0, 0, 2}}}, {{D::kI32, {1}}},
                               [](mps::Op& op) { op.attrs = mps::AxisAttrs{0}; }));
    c.programs.push_back(OneOp("NaNs", k, {{{D::kF32, {6}}, {1, 3, kNaN, 0, kNaN, -HUGE_VAL}}}, {{D::kI32, {1}}},
                               [](mps::Op& op) { op.attrs = mps::AxisAttrs{0}; }));
    cases.push_back(std::move(c));
  }
  {
    Case c = Probe(K::kMultiply, D::kC64, "Multiply: complex product (ac - bd, ad + bc), no Annex G recovery");
    // Interleaved (real, imaginary) parts. The first product's parts are both NaN, which Annex G would
    // turn into (inf, inf); the second has one NaN part, which it leaves alone.
    const double inf = HUGE_VAL;
    ProgramBuilder b("infinite and finite factors");
    b.Returning(K::kMultiply,
                {b.In(D::kC64, {3}, Encode(D::kF32, {inf, inf, inf, 0, 1, 2})),
                 b.In(D::kC64, {3}, Encode(D::kF32, {1, 0, 0, 1, 3, -1}))},
                {D::kC64, {3}});
    c.programs.push_back(b.Done({Exact()}));
    cases.push_back(std::move(c));
  }
  {
    Case c = Probe(K::kHermiteanToRealFFT, D::kC64,
                   "HermiteanToRealFFT: imaginary parts of the zero and Nyquist bins ignored");
    // Interleaved (real, imaginary) parts of 5 bins of an 8-point signal, nonzero imaginary at bins 0 and 4.
    std::vector<double> parts = {1, 0.5, 0.25, -1, 0, 0.5, -0.5, 0.25, 2, -0.75};
    ProgramBuilder b("n = 8");
    b.Returning(K::kHermiteanToRealFFT, {b.In(D::kC64, {5}, Encode(D::kF32, parts))}, {D::kF32, {8}},
                [](mps::Op& op) { op.attrs = mps::FFTAttrs{{0}, true}; });
    c.programs.push_back(b.Done({Scaled(2, 0x1p-23 * 8)}));
    cases.push_back(std::move(c));
  }
  {
    Case c = Probe(K::kSort, D::kF32, "Sort: NaN-free floats (infinities, -0, subnormals) sort correctly");
    const std::vector<double> keys = {HUGE_VAL, -0.0, 1e-45, -HUGE_VAL, 0.0, -1e-45, 2, -2, 1e-38};
    for (bool descending : {false, true})
      c.programs.push_back(OneOp(descending ? "descending" : "ascending", K::kSort, {{{D::kF32, {9}}, keys}},
                                 {{D::kF32, {9}}}, [&](mps::Op& op) { op.attrs = mps::SortAttrs{0, descending}; },
                                 {Ulps(0)}));
    cases.push_back(std::move(c));
  }
  {
    Case c = Probe(K::kArgSort, D::kI32, "ArgSort: stable, ascending and descending");
    const std::vector<double> keys = {2, 1, 2, 1, 0, 2, 1, 0, 2, 2, 1, 0};
    for (bool descending : {false, true})
      c.programs.push_back(OneOp(descending ? "descending" : "ascending", K::kArgSort, {{{D::kI32, {12}}, keys}},
                                 {{D::kI32, {12}}}, [&](mps::Op& op) { op.attrs = mps::SortAttrs{0, descending}; }));
    cases.push_back(std::move(c));
  }
  {
    Case c = Probe(K::kTopK, D::kF32, "TopK: ties keep the smaller index first");
    c.programs.push_back(OneOp("k=3", K::kTopK, {{{D::kF32, {7}}, {3, 1, 3, 2, 3, 3, 0}}},
                               {{D::kF32, {3}}, {D::kI32, {3}}}, [](mps::Op& op) { op.attrs = mps::TopKAttrs{3}; },
                               {Exact()}));
    cases.push_back(std::move(c));
  }
  {
    Case c = Probe(K::kGatherND, D::kF32, "Gather/scatter: indices at both ends of a dimension are in range");
    c.programs.push_back(OneOp("first and last rows", K::kGatherND,
                               {{{D::kF32, {4, 2}}, {1, 2, 3, 4, 5, 6, 7, 8}}, {{D::kI32, {2, 1}}, {3, 0}}},
                               {{D::kF32, {2, 2}}},
                               [](mps::Op& op) { op.attrs = mps::GatherNDAttrs{/*batch_dims=*/0}; }));
    c.programs.push_back(OneOp("along axis, both ends", K::kGatherAlongAxis,
                               {{{D::kF32, {2, 3}}, {1, 2, 3, 4, 5, 6}}, {{D::kI32, {2, 2}}, {2, 0, 0, 2}}},
                               {{D::kF32, {2, 2}}}, [](mps::Op& op) { op.attrs = mps::AxisAttrs{1}; }));
    cases.push_back(std::move(c));
  }
  {
    // (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24 is a tie that rounds to 1 + 2^-11: minus that, an FMA leaves
    // 2^-24 and a rounded product 0; a result that rounds some other way is neither.
    Case c = Probe(K::kMultiplyAdd, D::kF32, "MultiplyAdd: the product rounded once more or not at all");
    const double a = 1 + 0x1p-12, c0 = -(1 + 0x1p-11);
    Program p = OneOp("a tie of a product", K::kMultiplyAdd,
                      {{{D::kF32, {2}}, {a, -a}}, {{D::kF32, {2}}, {a, a}}, {{D::kF32, {2}}, {c0, -c0}}},
                      {{D::kF32, {2}}}, nullptr);
    p.alternatives = {{Encode(D::kF32, {0, 0})}};
    c.programs.push_back(std::move(p));
    cases.push_back(std::move(c));
  }
  {
    Case c = Probe(K::kScatterND, D::kF32, "ScatterND: mode set with duplicate indices leaves one of the updates");
    Program p = OneOp("two updates of row 1", K::kScatterND,
                      {{{D::kF32, {3}}, {0, 0, 0}}, {{D::kF32, {2}}, {10, 20}}, {{D::kI32, {2, 1}}, {1, 1}}},
                      {{D::kF32, {3}}}, [](mps::Op& op) {
                        op.kind = K::kScatterND;
                        op.attrs = mps::ScatterAttrs{mps::ScatterMode::kSet, 0};
                      });
    p.alternatives = {{Encode(D::kF32, {0, 10, 0})}, {Encode(D::kF32, {0, 20, 0})}};
    c.programs.push_back(std::move(p));
    cases.push_back(std::move(c));
  }
  for (D d : {D::kF16, D::kBF16}) {
    const double tiny = d == D::kF16 ? 0x1p-12 : 0x1p-9;
    Case c = Probe(K::kConv2D, d, "Conv2D: f16/bf16 accumulate in f32");
    std::vector<double> x = {1, tiny, tiny, tiny, tiny, tiny, tiny, tiny, tiny};
    c.programs.push_back(OneOp("1x1 kernel over 9 channels", K::kConv2D,
                               {{{d, {1, 1, 1, 9}}, x}, {{d, {1, 1, 9, 1}}, std::vector<double>(9, 1)}},
                               {{d, {1, 1, 1, 1}}},
                               [](mps::Op& op) { op.attrs = mps::Conv2DAttrs{{1, 1}, {1, 1}, {0, 0}, {0, 0}, 1}; }));
    cases.push_back(std::move(c));
  }
  {
    Case c = Probe(K::kMaxPool4D, D::kF32, "MaxPool4D: NaN in a window gives NaN, +0 wins over -0");
    c.programs.push_back(
        OneOp("2x2 windows", K::kMaxPool4D, {{{D::kF32, {1, 2, 4, 1}}, {kNaN, 1, -0.0, 0.0, 2, 3, -0.0, -0.0}}},
              {{D::kF32, {1, 1, 2, 1}}},
              [](mps::Op& op) { op.attrs = mps::Pool4DAttrs{{1, 2, 2, 1}, {1, 2, 2, 1}, {0, 0, 0, 0}, {0, 0, 0, 0}}; },
              {Exact()}));
    cases.push_back(std::move(c));
  }
  {
    Case c = Probe(K::kMaxPool4DGradient, D::kF32, "MaxPool4DGradient: ties go to the first maximum");
    c.programs.push_back(OneOp("tied windows", K::kMaxPool4DGradient,
                               {{{D::kF32, {1, 1, 2, 1}}, {1, 2}}, {{D::kF32, {1, 2, 4, 1}}, {5, 5, 1, 7, 5, 5, 7, 7}}},
                               {{D::kF32, {1, 2, 4, 1}}}, [](mps::Op& op) {
                                 op.attrs = mps::Pool4DAttrs{{1, 2, 2, 1}, {1, 2, 2, 1}, {0, 0, 0, 0}, {0, 0, 0, 0}};
                               }));
    cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace jmp::check
