// The lowering's LAPACK path (lower_lapack.cc): the rules of lower_linalg.cc and lower_eigh.cc hand
// it every dtype the MPS decompositions do not serve.
#pragma once

#include "lower/lower_context.h"

namespace jmp::mps {

// float64, complex64 and complex128 go to LAPACK; float32 (and narrower floats cast to it) to MPS ops.
bool UsesLapack(DType t);

Status LapackCholesky(LowerContext& cx);            // stablehlo.cholesky
Status LapackTriangularSolve(LowerContext& cx);     // stablehlo.triangular_solve
Status LapackQr(LowerContext& cx);                  // custom_call Qr
Status LapackHouseholderProduct(LowerContext& cx);  // custom_call ProductOfElementaryHouseholderReflectors
Status LapackEigh(LowerContext& cx);  // custom_call Eigh ("lower,sort,...") or jax_metal.lapack.eigh ("lower")

}  // namespace jmp::mps
