// The floating-point environment host kernels run in.
#pragma once

#include <cfenv>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

namespace jmp {

// A new thread inherits its creator's floating-point control state. XLA:CPU flushes subnormals on
// threads it runs computations on, and a thread of ours created from such a thread would read
// subnormal operands as zero: call this first thing on every thread that runs host kernels, so that
// results never depend on which thread made it.
inline void UseDefaultFloatingPoint() { std::fesetenv(FE_DFL_ENV); }

// While it lives, the calling thread computes in the default environment, and the caller's is back
// afterwards. Every PJRT entry point holds one: JAX may call in from a thread that flushes
// subnormals (a Python callback of an XLA:CPU program compiling or running a metal program), and
// what the plugin computes there (folded constants, a run on the caller's thread, the caller's share
// of a parallel loop) must not change with it.
class DefaultFloatingPointScope {
 public:
#if defined(__x86_64__)
  // SSE's control bits (rounding, flush-to-zero, denormals-are-zero, exception masks) decide every
  // kernel's results; x87's serve only long double. Left alone when they are already the default.
  DefaultFloatingPointScope() : saved_(_mm_getcsr()) {
    if ((saved_ & ~kFlags) != kDefault) _mm_setcsr(kDefault);
  }
  ~DefaultFloatingPointScope() {
    if ((saved_ & ~kFlags) != kDefault) _mm_setcsr(saved_);
  }

 private:
  static constexpr unsigned kDefault = 0x1F80;  // round to nearest, subnormals kept, exceptions masked
  static constexpr unsigned kFlags = 0x3F;      // sticky exception flags: not control
  unsigned saved_;
#else
  DefaultFloatingPointScope() {
    std::fegetenv(&saved_);
    std::fesetenv(FE_DFL_ENV);
  }
  ~DefaultFloatingPointScope() { std::fesetenv(&saved_); }

 private:
  std::fenv_t saved_;
#endif

 public:
  DefaultFloatingPointScope(const DefaultFloatingPointScope&) = delete;
  DefaultFloatingPointScope& operator=(const DefaultFloatingPointScope&) = delete;
};

}  // namespace jmp
