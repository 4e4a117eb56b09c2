// What cumulative scans and pooling share about reduce_window: its attributes and its body's monoid.
#pragma once

#include "lower/lower_context.h"

namespace jmp::mps {

struct WindowAttrs {
  std::vector<int64_t> dims, strides, base_dilations, window_dilations, pad_low, pad_high;
};

// Reads reduce_window's attributes, filling StableHLO's defaults (strides/dilations 1, padding 0).
StatusOr<WindowAttrs> ReadWindowAttrs(LowerContext& cx, size_t rank);

// The body's single combining op ("stablehlo.add", ...) when it is `return op(arg0, arg1)`, else "".
std::string WindowMonoid(const shlo::Op& op);
std::string BlockMonoid(const shlo::Region* region);  // the same for any single-block region

}  // namespace jmp::mps
