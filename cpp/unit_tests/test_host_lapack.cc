// The LAPACK rows of op_kinds.def on the host executor, for the dtypes a JAX program on this branch
// cannot send yet (float64, complex128): small matrices whose decompositions are known in closed form,
// each result checked against that (or, where phases are free, against its defining identity).
#include <cmath>
#include <complex>
#include <vector>

#include "mps/op_attrs.h"
#include "mps/verify.h"
#include "unit_tests/host_graph.h"
#include "unit_tests/unit_test.h"

namespace jmp::unit {
namespace {

using mps::OpKind;
using c128 = std::complex<double>;

// One LAPACK op with these flags and output types, run on the host; its outputs' bytes.
StatusOr<std::vector<std::vector<uint8_t>>> RunLapack(OpKind kind, const std::vector<mps::TensorType>& inputs,
                                                      const std::vector<std::vector<uint8_t>>& data,
                                                      const std::vector<mps::TensorType>& outputs,
                                                      const mps::LapackAttrs& flags) {
  GraphBuilder b;
  mps::Op op;
  op.kind = kind;
  for (const mps::TensorType& t : inputs) op.inputs.push_back(b.Input(t.dtype, t.shape));
  mps::Graph& g = b.mutable_graph();
  for (const mps::TensorType& t : outputs) op.outputs.push_back(g.AddValue(t.dtype, t.shape));
  op.attrs = flags;
  g.outputs = op.outputs;
  g.ops.push_back(op);
  Status verified = mps::VerifyGraph(g);
  if (!verified.ok()) return verified;
  return RunOnHost(g, data);
}

bool Near(double a, double b, double tol = 1e-12) { return std::abs(a - b) <= tol; }
bool Near(c128 a, c128 b, double tol = 1e-12) { return std::abs(a - b) <= tol; }

JMP_TEST(HostLapack, Float64CholeskyLowerAndUpper) {
  const std::vector<double> a = {4, 2, 2, 3};
  mps::LapackAttrs lower;
  lower.lower = true;
  auto l = RunLapack(OpKind::kLapackCholesky, {{DType::kF64, {2, 2}}}, {Bytes(a)}, {{DType::kF64, {2, 2}}}, lower);
  ASSERT_OK(l);
  std::vector<double> lv = Values<double>(l.value()[0]);
  EXPECT_TRUE(Near(lv[0], 2) && Near(lv[1], 0) && Near(lv[2], 1) && Near(lv[3], std::sqrt(2.0)));
  auto u = RunLapack(OpKind::kLapackCholesky, {{DType::kF64, {2, 2}}}, {Bytes(a)}, {{DType::kF64, {2, 2}}}, {});
  ASSERT_OK(u);
  std::vector<double> uv = Values<double>(u.value()[0]);
  EXPECT_TRUE(Near(uv[0], 2) && Near(uv[1], 1) && Near(uv[2], 0) && Near(uv[3], std::sqrt(2.0)));
  // Not positive definite: NaN throughout.
  auto bad = RunLapack(OpKind::kLapackCholesky, {{DType::kF64, {2, 2}}}, {Bytes(std::vector<double>{1, 2, 2, 1})},
                       {{DType::kF64, {2, 2}}}, lower);
  ASSERT_OK(bad);
  for (double x : Values<double>(bad.value()[0])) EXPECT_TRUE(std::isnan(x));
}

JMP_TEST(HostLapack, Complex128TriangularSolveAdjointRightSide) {
  // x a^H = b for lower a: checked by multiplying back.
  const std::vector<c128> a = {{2, 0}, {9, 9}, {1, 1}, {3, -1}};  // a[0][1] above the diagonal: never read
  const std::vector<c128> b = {{1, 2}, {3, 4}};
  mps::LapackAttrs f;
  f.lower = true;
  f.transpose = f.conjugate = true;
  auto r = RunLapack(OpKind::kLapackTriangularSolve, {{DType::kC128, {2, 2}}, {DType::kC128, {1, 2}}},
                     {Bytes(a), Bytes(b)}, {{DType::kC128, {1, 2}}}, f);
  ASSERT_OK(r);
  std::vector<c128> x = Values<c128>(r.value()[0]);
  // (x a^H)_j = sum_k x_k conj(a[j][k]) over the lower triangle.
  c128 b0 = x[0] * std::conj(a[0]);
  c128 b1 = x[0] * std::conj(a[2]) + x[1] * std::conj(a[3]);
  EXPECT_TRUE(Near(b0, b[0]) && Near(b1, b[1]));
}

JMP_TEST(HostLapack, Float64LuPivotsAndPermutation) {
  auto r = RunLapack(OpKind::kLapackLu, {{DType::kF64, {2, 2}}}, {Bytes(std::vector<double>{1, 2, 3, 4})},
                     {{DType::kF64, {2, 2}}, {DType::kI32, {2}}, {DType::kI32, {2}}}, {});
  ASSERT_OK(r);
  std::vector<double> lu = Values<double>(r.value()[0]);
  EXPECT_TRUE(Near(lu[0], 3) && Near(lu[1], 4) && Near(lu[2], 1.0 / 3) && Near(lu[3], 2.0 / 3));
  EXPECT_SAME(Values<int32_t>(r.value()[1]), (std::vector<int32_t>{1, 1}));
  EXPECT_SAME(Values<int32_t>(r.value()[2]), (std::vector<int32_t>{1, 0}));
}

JMP_TEST(HostLapack, Float64QrThenHouseholderProductReconstructs) {
  const std::vector<double> a = {3, 1, 4, 2, 0, 5};  // 3 x 2
  auto qr = RunLapack(OpKind::kLapackQr, {{DType::kF64, {3, 2}}}, {Bytes(a)},
                      {{DType::kF64, {3, 2}}, {DType::kF64, {2}}}, {});
  ASSERT_OK(qr);
  auto q = RunLapack(OpKind::kLapackHouseholderProduct, {{DType::kF64, {3, 2}}, {DType::kF64, {2}}},
                     {qr.value()[0], qr.value()[1]}, {{DType::kF64, {3, 2}}}, {});
  ASSERT_OK(q);
  std::vector<double> f = Values<double>(qr.value()[0]), qv = Values<double>(q.value()[0]);
  // A = Q R with R the upper triangle of the factored matrix; |R_00| = ||A[:, 0]|| = 5.
  EXPECT_TRUE(Near(std::abs(f[0]), 5));
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) {
      double s = 0;
      for (int k = 0; k <= j; ++k) s += qv[i * 2 + k] * f[k * 2 + j];
      EXPECT_TRUE(Near(s, a[i * 2 + j], 1e-12));
    }
}

JMP_TEST(HostLapack, Complex128EighReadsOneTriangle) {
  // [[2, i], [-i, 2]]: eigenvalues 1 and 3; the unread triangle holds garbage.
  const std::vector<c128> lower_only = {{2, 0}, {99, 99}, {0, -1}, {2, 0}};
  mps::LapackAttrs f;
  f.lower = f.sort = true;
  auto r = RunLapack(OpKind::kLapackEigh, {{DType::kC128, {2, 2}}}, {Bytes(lower_only)},
                     {{DType::kC128, {2, 2}}, {DType::kF64, {2}}}, f);
  ASSERT_OK(r);
  std::vector<double> w = Values<double>(r.value()[1]);
  EXPECT_TRUE(Near(w[0], 1) && Near(w[1], 3));
  std::vector<c128> v = Values<c128>(r.value()[0]);
  const c128 a[2][2] = {{{2, 0}, {0, 1}}, {{0, -1}, {2, 0}}};
  for (int j = 0; j < 2; ++j)
    for (int i = 0; i < 2; ++i) EXPECT_TRUE(Near(a[i][0] * v[0 * 2 + j] + a[i][1] * v[1 * 2 + j], w[j] * v[i * 2 + j]));
}

JMP_TEST(HostLapack, Float64SvdFullAndValuesOnly) {
  const std::vector<double> a = {0, -2, 3, 0};  // singular values 3, 2
  mps::LapackAttrs f;
  f.compute_uv = f.full_matrices = true;
  auto r = RunLapack(OpKind::kLapackSvd, {{DType::kF64, {2, 2}}}, {Bytes(a)},
                     {{DType::kF64, {2}}, {DType::kF64, {2, 2}}, {DType::kF64, {2, 2}}}, f);
  ASSERT_OK(r);
  std::vector<double> s = Values<double>(r.value()[0]), u = Values<double>(r.value()[1]),
                      vt = Values<double>(r.value()[2]);
  EXPECT_TRUE(Near(s[0], 3) && Near(s[1], 2));
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      EXPECT_TRUE(Near(u[i * 2] * s[0] * vt[j] + u[i * 2 + 1] * s[1] * vt[2 + j], a[i * 2 + j]));
  auto values = RunLapack(OpKind::kLapackSvd, {{DType::kF64, {1, 2, 2}}}, {Bytes(a)}, {{DType::kF64, {1, 2}}}, {});
  ASSERT_OK(values);
  EXPECT_TRUE(Near(Values<double>(values.value()[0])[1], 2));
}

JMP_TEST(HostLapack, Float64AndComplex128EigOfARotation) {
  // [[0, -1], [1, 0]]: eigenvalues +-i, the real input's conjugate pair unpacked into two vectors.
  mps::LapackAttrs f;
  f.compute_left = f.compute_right = true;
  const std::vector<mps::TensorType> outs = {{DType::kC128, {2}}, {DType::kC128, {2, 2}}, {DType::kC128, {2, 2}}};
  auto real =
      RunLapack(OpKind::kLapackEig, {{DType::kF64, {2, 2}}}, {Bytes(std::vector<double>{0, -1, 1, 0})}, outs, f);
  ASSERT_OK(real);
  auto cplx = RunLapack(OpKind::kLapackEig, {{DType::kC128, {2, 2}}},
                        {Bytes(std::vector<c128>{{0, 0}, {-1, 0}, {1, 0}, {0, 0}})}, outs, f);
  ASSERT_OK(cplx);
  for (const auto* r : {&real.value(), &cplx.value()}) {
    std::vector<c128> w = Values<c128>((*r)[0]), vr = Values<c128>((*r)[2]), vl = Values<c128>((*r)[1]);
    EXPECT_TRUE(Near(std::abs(w[0].imag()), 1) && Near(w[0], std::conj(w[1])) && Near(w[0].real(), 0));
    for (int j = 0; j < 2; ++j) {
      // a v = w v, and u^H a = w u^H, i.e. a^T conj(u) = w conj(u).
      EXPECT_TRUE(Near(-vr[2 + j], w[j] * vr[j]) && Near(vr[j], w[j] * vr[2 + j]));
      EXPECT_TRUE(Near(std::conj(vl[2 + j]), w[j] * std::conj(vl[j])) &&
                  Near(-std::conj(vl[j]), w[j] * std::conj(vl[2 + j])));
      EXPECT_TRUE(Near(std::norm(vr[j]) + std::norm(vr[2 + j]), 1));
    }
  }
}

JMP_TEST(HostLapack, VerifierRejectsWrongShapes) {
  mps::LapackAttrs f;
  f.compute_uv = true;
  auto r = RunLapack(OpKind::kLapackSvd, {{DType::kF64, {3, 2}}}, {Bytes(std::vector<double>(6))},
                     {{DType::kF64, {2}}, {DType::kF64, {3, 3}}, {DType::kF64, {2, 2}}}, f);  // u is [3, 2]
  EXPECT_ERROR(r.status(), "LapackSvd");
  auto t = RunLapack(OpKind::kLapackEig, {{DType::kI32, {2, 2}}}, {Bytes(std::vector<int32_t>(4))},
                     {{DType::kC64, {2}}, {DType::kC64, {2, 2}}, {DType::kC64, {2, 2}}}, {});
  EXPECT_ERROR(t.status(), "is not defined for i32");  // the row's domain
}

}  // namespace
}  // namespace jmp::unit
