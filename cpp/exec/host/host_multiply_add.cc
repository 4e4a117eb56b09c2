// MultiplyAdd (op_kinds.def): a * b + c with only the sum rounded, as XLA:CPU computes a multiply whose
// one reader is an add (LLVM contracts the pair into an FMA instruction). std::fma is correctly rounded
// on every target, and one instruction where the CPU has FMA (JMP_FMA_LOOP).
#include <cmath>

#include "exec/host/host_fastmath.h"
#include "exec/host/host_kernels.h"
#include "exec/host/host_parallel.h"

namespace jmp::exec::host {

namespace {

JMP_FMA_LOOP(FmaF32, (const float* a, const float* b, const float* c, float* y, int64_t begin, int64_t end),
             (a, b, c, y, begin, end), {
               for (int64_t i = begin; i < end; ++i) y[i] = std::fma(a[i], b[i], c[i]);
             })

JMP_FMA_LOOP(FmaF64, (const double* a, const double* b, const double* c, double* y, int64_t begin, int64_t end),
             (a, b, c, y, begin, end), {
               for (int64_t i = begin; i < end; ++i) y[i] = std::fma(a[i], b[i], c[i]);
             })

template <typename T, typename Loop>
void Run(const OpArgs& a, Loop loop) {
  const T* x = reinterpret_cast<const T*>(a.in[0]);
  const T* y = reinterpret_cast<const T*>(a.in[1]);
  const T* z = reinterpret_cast<const T*>(a.in[2]);
  T* out = reinterpret_cast<T*>(a.out[0]);
  ParallelFor(a.Count(), GrainFor(2), [&](int64_t begin, int64_t end) { loop(x, y, z, out, begin, end); });
}

}  // namespace

Status RunMultiplyAdd(const OpArgs& a) {
  const DType d = a.OutType().dtype;
  if (d == DType::kF32)
    Run<float>(a, FmaF32);
  else if (d == DType::kF64)
    Run<double>(a, FmaF64);
  else
    return a.Unsupported("takes float32 or float64 only");
  return Status::Ok();
}

}  // namespace jmp::exec::host
