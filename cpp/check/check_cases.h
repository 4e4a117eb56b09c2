// The case builders of the self-check, one file per family of rows.
#pragma once

#include "check/check.h"

namespace jmp::check {

// Each returns false when the kind is not of its family (the case is left untouched).
bool BuildElementwise(mps::OpKind kind, DType dtype, bool quick, Case& c);   // check_elementwise.cc
bool BuildDataMovement(mps::OpKind kind, DType dtype, bool quick, Case& c);  // check_movement.cc
bool BuildComputing(mps::OpKind kind, DType dtype, bool quick, Case& c);     // check_computing.cc

Tolerance ElementwiseTolerance(mps::OpKind kind, DType dtype);

}  // namespace jmp::check
