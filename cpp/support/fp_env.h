// The floating-point environment of the threads that run kernels.
#pragma once

#include <cfenv>

namespace jmp {

// A new thread inherits its creator's floating-point control state. XLA:CPU flushes subnormals on
// threads it runs computations on, and a thread of ours created from such a thread would read
// subnormal operands as zero: call this first thing on every thread that runs host kernels, so that
// results never depend on which thread made it.
inline void UseDefaultFloatingPoint() { std::fesetenv(FE_DFL_ENV); }

}  // namespace jmp
