// The factorisations MPSGraph has no float64 or complex kernels for, as the host-only LAPACK rows of
// op_kinds.def: stablehlo.cholesky and triangular_solve, XLA's Qr, ProductOfElementaryHouseholderReflectors
// and Eigh custom calls (their float32 forms stay on the MPS decompositions of lower_linalg.cc and
// lower_eigh.cc, which run on the GPU), and the plugin's own custom calls for lu, svd, eigh and eig (for
// every dtype LAPACK serves: the Python side sends float32 eigh and svd here from a size on), tridiagonal, pivoted QR
// and tridiagonal_solve (for every dtype: JAX lowers those three for CPU and GPU only), which
// jax_metal_plugin/_linalg_lowerings.py emits.
#include "lower/lower_lapack.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace jmp::mps {

bool UsesLapack(DType t) { return t == DType::kF64 || t == DType::kC64 || t == DType::kC128; }

namespace {

bool FlagAttr(LowerContext& cx, const char* name, bool absent) {
  const shlo::Attr* a = cx.op().Find(name);
  if (!a) return absent;
  return a->kind == shlo::Attr::Kind::kBool && a->b;
}

// backend_config "1,0,...": the op's flags in order (missing ones false).
std::vector<bool> ConfigFlags(LowerContext& cx) {
  const shlo::Attr* attr = cx.op().Find("backend_config");
  std::vector<bool> flags;
  std::stringstream in(attr && attr->kind == shlo::Attr::Kind::kString ? attr->s : "");
  for (std::string f; std::getline(in, f, ',');) flags.push_back(std::atoi(f.c_str()) != 0);
  return flags;
}
bool Flag(const std::vector<bool>& flags, size_t i) { return i < flags.size() && flags[i]; }

StatusOr<Shape> MatrixOperand(LowerContext& cx, int v, bool square) {
  Shape s = cx.ShapeOf(v);
  const DType t = cx.DTypeOf(v);
  if (t != DType::kF32 && !UsesLapack(t)) {
    const shlo::Attr* target = cx.op().Find("call_target_name");
    std::string what = target && !target->s.empty() ? target->s + " " : "";
    return cx.Unsupported(what + "runs on LAPACK for float32, float64, complex64 and complex128 only, not " +
                          std::string(DTypeName(t)));
  }
  if (s.size() < 2) return cx.Unsupported("needs matrices (rank >= 2)");
  if (square && s[s.size() - 1] != s[s.size() - 2]) return cx.Unsupported("needs square matrices");
  return s;
}

Shape With(Shape s, size_t drop, std::initializer_list<int64_t> tail) {
  s.resize(s.size() - drop);
  s.insert(s.end(), tail);
  return s;
}

// Emits `kind` with these flags and output types and binds the op's results to its outputs in order.
Status EmitAndBind(LowerContext& cx, OpKind kind, std::vector<int> inputs, const LapackAttrs& flags,
                   const std::vector<TensorType>& outputs) {
  if (cx.op().results.size() != outputs.size())
    return cx.Unsupported("has " + std::to_string(cx.op().results.size()) + " results, expected " +
                          std::to_string(outputs.size()));
  Op op = cx.NewOp(kind, std::move(inputs));
  op.attrs = flags;
  std::vector<int> out = cx.EmitOp(std::move(op), outputs);
  for (size_t i = 0; i < out.size(); ++i) cx.Bind(i, out[i]);
  return Status::Ok();
}

// jax_metal.lapack.lu: (a) -> (lu, pivots int32, permutation int32), as lax.linalg.lu_p.
Status Lu(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int a, cx.In(0));
  JMP_ASSIGN_OR_RETURN(Shape s, MatrixOperand(cx, a, false));
  const int64_t m = s[s.size() - 2], n = s.back();
  return EmitAndBind(cx, OpKind::kLapackLu, {a}, {},
                     {cx.Type(a), {DType::kI32, With(s, 2, {std::min(m, n)})}, {DType::kI32, With(s, 2, {m})}});
}

// jax_metal.lapack.svd, backend_config "full_matrices,compute_uv": (a) -> (s) or (s, u, vt).
Status Svd(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int a, cx.In(0));
  JMP_ASSIGN_OR_RETURN(Shape s, MatrixOperand(cx, a, false));
  const std::vector<bool> config = ConfigFlags(cx);
  LapackAttrs f;
  f.full_matrices = Flag(config, 0);
  f.compute_uv = Flag(config, 1);
  const int64_t m = s[s.size() - 2], n = s.back(), k = std::min(m, n);
  const DType t = cx.DTypeOf(a);
  std::vector<TensorType> outs = {{RealOf(t), With(s, 2, {k})}};
  if (f.compute_uv) {
    outs.push_back({t, With(s, 2, {m, f.full_matrices ? m : k})});
    outs.push_back({t, With(s, 2, {f.full_matrices ? n : k, n})});
  }
  return EmitAndBind(cx, OpKind::kLapackSvd, {a}, f, outs);
}

// jax_metal.lapack.eig, backend_config "compute_left,compute_right": (a) -> (w, vl, vr), complex.
Status Eig(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int a, cx.In(0));
  JMP_ASSIGN_OR_RETURN(Shape s, MatrixOperand(cx, a, true));
  const std::vector<bool> config = ConfigFlags(cx);
  LapackAttrs f;
  f.compute_left = Flag(config, 0);
  f.compute_right = Flag(config, 1);
  const DType c = ComplexOf(cx.DTypeOf(a));
  return EmitAndBind(cx, OpKind::kLapackEig, {a}, f, {{c, With(s, 1, {})}, {c, s}, {c, s}});
}

// jax_metal.lapack.tridiagonal, backend_config "lower": (a) -> (packed, d, e, taus), as
// lax.linalg.tridiagonal_p; LAPACK for float32 too (no MPS kernel).
Status Tridiagonal(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int a, cx.In(0));
  JMP_ASSIGN_OR_RETURN(Shape s, MatrixOperand(cx, a, true));
  const int64_t n = s.back();
  if (n < 1) return cx.Unsupported("needs matrices of at least 1x1");
  LapackAttrs f;
  f.lower = Flag(ConfigFlags(cx), 0);
  const DType t = cx.DTypeOf(a), r = RealOf(t);
  return EmitAndBind(cx, OpKind::kLapackTridiagonal, {a}, f,
                     {cx.Type(a), {r, With(s, 2, {n})}, {r, With(s, 2, {n - 1})}, {t, With(s, 2, {n - 1})}});
}

// jax_metal.lapack.geqp3: (a, jpvt int32) -> (factored, jpvt, taus), as lax.linalg.geqp3_p (the
// pivoted QR of qr(pivoting=True)); LAPACK for float32 too (no MPS kernel).
Status PivotedQr(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int a, cx.In(0));
  JMP_ASSIGN_OR_RETURN(int jpvt, cx.In(1));
  JMP_ASSIGN_OR_RETURN(Shape s, MatrixOperand(cx, a, false));
  const int64_t k = std::min(s[s.size() - 2], s.back());
  if (cx.DTypeOf(jpvt) != DType::kI32 || cx.ShapeOf(jpvt) != With(s, 2, {s.back()}))
    return cx.Unsupported("needs jpvt int32 [..., n] for a [..., m, n]");
  return EmitAndBind(cx, OpKind::kLapackPivotedQr, {a, jpvt}, {},
                     {cx.Type(a), cx.Type(jpvt), {cx.DTypeOf(a), With(s, 2, {k})}});
}

// jax_metal.lapack.tridiagonal_solve, backend_config "perturb_singular": (dl, d, du, b) -> x, as
// lax.linalg.tridiagonal_solve_p; on the host for float32 too (MPSGraph has no banded solver, and JAX's
// generic lowering does not pivot).
Status TridiagonalSolve(LowerContext& cx) {
  if (cx.op().operands.size() != 4) return cx.Unsupported("needs dl, d, du and b");
  std::vector<int> in;
  for (size_t i = 0; i < 4; ++i) {
    JMP_ASSIGN_OR_RETURN(int v, cx.In(i));
    in.push_back(v);
  }
  JMP_ASSIGN_OR_RETURN(Shape s, MatrixOperand(cx, in[3], false));
  for (size_t i = 0; i < 3; ++i)
    if (cx.DTypeOf(in[i]) != cx.DTypeOf(in[3]) || cx.ShapeOf(in[i]) != With(s, 1, {}))
      return cx.Unsupported("needs diagonals [..., n] of b's type for b [..., n, k]");
  LapackAttrs f;
  f.perturb_singular = Flag(ConfigFlags(cx), 0);
  return EmitAndBind(cx, OpKind::kLapackTridiagonalSolve, in, f, {cx.Type(in[3])});
}

}  // namespace

Status LapackCholesky(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int a, cx.In(0));
  JMP_RETURN_IF_ERROR(MatrixOperand(cx, a, true).status());
  LapackAttrs f;
  f.lower = FlagAttr(cx, "lower", true);
  return EmitAndBind(cx, OpKind::kLapackCholesky, {a}, f, {cx.Type(a)});
}

Status LapackTriangularSolve(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int a, cx.In(0));
  JMP_ASSIGN_OR_RETURN(int b, cx.In(1));
  JMP_ASSIGN_OR_RETURN(Shape as, MatrixOperand(cx, a, true));
  const Shape bs = cx.ShapeOf(b);
  LapackAttrs f;
  f.left_side = FlagAttr(cx, "left_side", false);
  f.lower = FlagAttr(cx, "lower", false);
  f.unit_diagonal = FlagAttr(cx, "unit_diagonal", false);
  const shlo::Attr* tr = cx.op().Find("transpose_a");
  f.transpose = tr && (tr->s == "TRANSPOSE" || tr->s == "ADJOINT");
  f.conjugate = tr && tr->s == "ADJOINT";
  const size_t r = as.size();
  if (bs.size() != r || cx.DTypeOf(b) != cx.DTypeOf(a) || bs[f.left_side ? r - 2 : r - 1] != as.back() ||
      !std::equal(as.begin(), as.end() - 2, bs.begin()))
    return cx.Unsupported("needs b of a's type and batch, matching a");
  return EmitAndBind(cx, OpKind::kLapackTriangularSolve, {a, b}, f, {cx.Type(b)});
}

Status LapackQr(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int a, cx.In(0));
  JMP_ASSIGN_OR_RETURN(Shape s, MatrixOperand(cx, a, false));
  const int64_t k = std::min(s[s.size() - 2], s.back());
  return EmitAndBind(cx, OpKind::kLapackQr, {a}, {}, {cx.Type(a), {cx.DTypeOf(a), With(s, 2, {k})}});
}

Status LapackHouseholderProduct(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int a, cx.In(0));
  JMP_ASSIGN_OR_RETURN(int taus, cx.In(1));
  JMP_ASSIGN_OR_RETURN(Shape s, MatrixOperand(cx, a, false));
  const Shape ts = cx.ShapeOf(taus);
  if (s[s.size() - 2] < s.back() || ts.size() + 1 != s.size() || ts.back() > s.back() ||
      cx.DTypeOf(taus) != cx.DTypeOf(a))
    return cx.Unsupported("needs a [..., m, n] with m >= n and taus [..., k], k <= n, of a's type");
  return EmitAndBind(cx, OpKind::kLapackHouseholderProduct, {a, taus}, {}, {cx.Type(a)});
}

Status LapackEigh(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int a, cx.In(0));
  JMP_ASSIGN_OR_RETURN(Shape s, MatrixOperand(cx, a, true));
  LapackAttrs f;
  f.lower = Flag(ConfigFlags(cx), 0) || ConfigFlags(cx).empty();
  f.sort = true;
  return EmitAndBind(cx, OpKind::kLapackEigh, {a}, f, {cx.Type(a), {RealOf(cx.DTypeOf(a)), With(s, 1, {})}});
}

void RegisterLapackRules(std::map<std::string, LowerRule>& r) {
  RegisterRule(r, "custom_call:jax_metal.lapack.lu", &Lu);
  RegisterRule(r, "custom_call:jax_metal.lapack.svd", &Svd);
  RegisterRule(r, "custom_call:jax_metal.lapack.eigh", &LapackEigh);
  RegisterRule(r, "custom_call:jax_metal.lapack.eig", &Eig);
  RegisterRule(r, "custom_call:jax_metal.lapack.tridiagonal", &Tridiagonal);
  RegisterRule(r, "custom_call:jax_metal.lapack.geqp3", &PivotedQr);
  RegisterRule(r, "custom_call:jax_metal.lapack.tridiagonal_solve", &TridiagonalSolve);
}

}  // namespace jmp::mps
