// The factorisations MPSGraph has no float64 or complex kernels for, as the host-only LAPACK rows of
// op_kinds.def: stablehlo.cholesky and triangular_solve, XLA's Qr, ProductOfElementaryHouseholderReflectors
// and Eigh custom calls (their float32 forms stay on the MPS decompositions of lower_linalg.cc and
// lower_eigh.cc, which run on the GPU), and the plugin's own custom calls for lu, svd, eigh and eig (for
// every dtype LAPACK serves: the Python side sends float32 eigh and svd here from a size on), tridiagonal, pivoted QR
// and tridiagonal_solve (for every dtype: JAX lowers those three for CPU and GPU only), which
// jax_metal_plugin/_linalg_lowerings.py emits.
#include "lower/lower_lapack.h"

#include "lower/custom_call_config.h"
#include "mps/lapack_types.h"

#include <algorithm>
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

// The op's backend_config, typed by stablehlo/custom_calls.def.
StatusOr<CustomCallConfig> Config(LowerContext& cx) {
  StatusOr<CustomCallConfig> config = CustomCallConfig::Of(cx.op());
  if (!config.ok()) return cx.Unsupported(config.status().message());
  return config;
}

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

// Emits `kind` with these flags, its results typed as mps/lapack_types.h says (what the verifier
// checks), and binds the op's results to its outputs in order.
Status EmitAndBind(LowerContext& cx, OpKind kind, std::vector<int> inputs, const LapackAttrs& flags) {
  std::vector<TensorType> input_types;
  for (int v : inputs) input_types.push_back(cx.Type(v));
  StatusOr<std::vector<TensorType>> outputs = LapackResultTypes(kind, input_types, flags);
  if (!outputs.ok()) return cx.Unsupported(outputs.status().message());
  if (cx.op().results.size() != outputs->size())
    return cx.Unsupported("has " + std::to_string(cx.op().results.size()) + " results, expected " +
                          std::to_string(outputs->size()));
  Op op = cx.NewOp(kind, std::move(inputs));
  op.attrs = flags;
  std::vector<int> out = cx.EmitOp(std::move(op), *outputs);
  for (size_t i = 0; i < out.size(); ++i) cx.Bind(i, out[i]);
  return Status::Ok();
}

// jax_metal.lapack.lu: (a) -> (lu, pivots int32, permutation int32), as lax.linalg.lu_p.
Status Lu(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int a, cx.In(0));
  JMP_RETURN_IF_ERROR(Config(cx).status());
  JMP_RETURN_IF_ERROR(MatrixOperand(cx, a, false).status());
  return EmitAndBind(cx, OpKind::kLapackLu, {a}, {});
}

// jax_metal.lapack.svd {full_matrices, compute_uv}: (a) -> (s) or (s, u, vt).
Status Svd(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int a, cx.In(0));
  JMP_ASSIGN_OR_RETURN(CustomCallConfig config, Config(cx));
  JMP_RETURN_IF_ERROR(MatrixOperand(cx, a, false).status());
  LapackAttrs f;
  f.full_matrices = config.Bool("full_matrices", false);
  f.compute_uv = config.Bool("compute_uv", false);
  return EmitAndBind(cx, OpKind::kLapackSvd, {a}, f);
}

// jax_metal.lapack.eig {compute_left_eigenvectors, compute_right_eigenvectors}: (a) -> (w, vl, vr), complex.
Status Eig(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int a, cx.In(0));
  JMP_ASSIGN_OR_RETURN(CustomCallConfig config, Config(cx));
  JMP_RETURN_IF_ERROR(MatrixOperand(cx, a, true).status());
  LapackAttrs f;
  f.compute_left = config.Bool("compute_left_eigenvectors", false);
  f.compute_right = config.Bool("compute_right_eigenvectors", false);
  return EmitAndBind(cx, OpKind::kLapackEig, {a}, f);
}

// jax_metal.lapack.tridiagonal {lower}: (a) -> (packed, d, e, taus), as lax.linalg.tridiagonal_p; LAPACK
// for float32 too (no MPS kernel).
Status Tridiagonal(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int a, cx.In(0));
  JMP_ASSIGN_OR_RETURN(CustomCallConfig config, Config(cx));
  JMP_RETURN_IF_ERROR(MatrixOperand(cx, a, true).status());
  LapackAttrs f;
  f.lower = config.Bool("lower", false);
  return EmitAndBind(cx, OpKind::kLapackTridiagonal, {a}, f);
}

// jax_metal.lapack.geqp3: (a, jpvt int32) -> (factored, jpvt, taus), as lax.linalg.geqp3_p (the
// pivoted QR of qr(pivoting=True)); LAPACK for float32 too (no MPS kernel).
Status PivotedQr(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int a, cx.In(0));
  JMP_ASSIGN_OR_RETURN(int jpvt, cx.In(1));
  JMP_RETURN_IF_ERROR(Config(cx).status());
  JMP_RETURN_IF_ERROR(MatrixOperand(cx, a, false).status());
  return EmitAndBind(cx, OpKind::kLapackPivotedQr, {a, jpvt}, {});
}

// jax_metal.lapack.tridiagonal_solve {perturb_singular}: (dl, d, du, b) -> x, as
// lax.linalg.tridiagonal_solve_p; on the host for float32 too (MPSGraph has no banded solver, and JAX's
// generic lowering does not pivot).
Status TridiagonalSolve(LowerContext& cx) {
  if (cx.op().operands.size() != 4) return cx.Unsupported("needs dl, d, du and b");
  JMP_ASSIGN_OR_RETURN(CustomCallConfig config, Config(cx));
  std::vector<int> in;
  for (size_t i = 0; i < 4; ++i) {
    JMP_ASSIGN_OR_RETURN(int v, cx.In(i));
    in.push_back(v);
  }
  JMP_RETURN_IF_ERROR(MatrixOperand(cx, in[3], false).status());
  LapackAttrs f;
  f.perturb_singular = config.Bool("perturb_singular", false);
  return EmitAndBind(cx, OpKind::kLapackTridiagonalSolve, in, f);
}

}  // namespace

Status LapackCholesky(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int a, cx.In(0));
  JMP_RETURN_IF_ERROR(MatrixOperand(cx, a, true).status());
  LapackAttrs f;
  f.lower = FlagAttr(cx, "lower", true);
  return EmitAndBind(cx, OpKind::kLapackCholesky, {a}, f);
}

Status LapackTriangularSolve(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int a, cx.In(0));
  JMP_ASSIGN_OR_RETURN(int b, cx.In(1));
  JMP_RETURN_IF_ERROR(MatrixOperand(cx, a, true).status());
  LapackAttrs f;
  f.left_side = FlagAttr(cx, "left_side", false);
  f.lower = FlagAttr(cx, "lower", false);
  f.unit_diagonal = FlagAttr(cx, "unit_diagonal", false);
  const shlo::Attr* tr = cx.op().Find("transpose_a");
  f.transpose = tr && (tr->s == "TRANSPOSE" || tr->s == "ADJOINT");
  f.conjugate = tr && tr->s == "ADJOINT";
  return EmitAndBind(cx, OpKind::kLapackTriangularSolve, {a, b}, f);
}

Status LapackQr(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int a, cx.In(0));
  JMP_RETURN_IF_ERROR(MatrixOperand(cx, a, false).status());
  return EmitAndBind(cx, OpKind::kLapackQr, {a}, {});
}

Status LapackHouseholderProduct(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int a, cx.In(0));
  JMP_ASSIGN_OR_RETURN(int taus, cx.In(1));
  JMP_RETURN_IF_ERROR(MatrixOperand(cx, a, false).status());
  return EmitAndBind(cx, OpKind::kLapackHouseholderProduct, {a, taus}, {});
}

// XLA's Eigh (JAX's positional "lower,sort_eigenvalues,max_sweeps,tol") or jax_metal.lapack.eigh {lower}:
// LAPACK sorts the eigenvalues either way.
Status LapackEigh(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int a, cx.In(0));
  JMP_ASSIGN_OR_RETURN(CustomCallConfig config, Config(cx));
  JMP_RETURN_IF_ERROR(MatrixOperand(cx, a, true).status());
  LapackAttrs f;
  f.lower = config.Bool("lower", true);
  f.sort = true;
  return EmitAndBind(cx, OpKind::kLapackEigh, {a}, f);
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
