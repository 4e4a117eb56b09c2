// The instruction-set level the host executor's hot loops run at. On x86-64 (GCC, Linux) each such loop
// is built once per level (JMP_VECTOR_LOOP) and the level is picked when the plugin loads: the best the
// CPU has, or a lower one JMP_HOST_ISA asks for (sse2, sse4.2, avx2, avx512), so that a figure can be
// taken at the level another machine has (XLA:CPU's --xla_cpu_max_isa holds its side to one). Apple's
// CPUs have one level, NEON; elsewhere the loops are built for the target's baseline only.
#pragma once

#include <cstdint>
#include <string_view>

namespace jmp::exec::host {

enum class IsaLevel : uint8_t { kBaseline, kSse42, kAvx2, kAvx512 };

// The level the loops run at, chosen once.
IsaLevel HostIsa();
// The best level this CPU runs (what HostIsa is without JMP_HOST_ISA).
IsaLevel CpuIsa();
// "sse2", "sse4.2", "avx2", "avx512"; "neon" or "baseline" for kBaseline off x86-64.
std::string_view IsaName(IsaLevel level);

// Whether the CPU has fused multiply-add instructions (x86-64 from AVX2's generation; every arm64).
bool CpuHasFma();

template <typename F>
F PickByIsa(F avx512, F avx2, F sse42, F baseline) {
  switch (HostIsa()) {
    case IsaLevel::kAvx512: return avx512;
    case IsaLevel::kAvx2: return avx2;
    case IsaLevel::kSse42: return sse42;
    case IsaLevel::kBaseline: return baseline;
  }
  return baseline;
}

// As PickByIsa, and at the SSE4.2 level the build with FMA where the CPU has it.
template <typename F>
F PickByIsaWithFma(F avx512, F avx2, F sse42_fma, F sse42, F baseline) {
  if (HostIsa() == IsaLevel::kSse42 && CpuHasFma()) return sse42_fma;
  return PickByIsa(avx512, avx2, sse42, baseline);
}

}  // namespace jmp::exec::host

// The levels' target attributes, as feature lists (the x86-64-v2, -v3 and -v4 levels) rather than
// arch= names: the function keeps the build's arch and tuning, so that GCC inlines the plain helpers
// the loops call into every level's build.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define JMP_HOST_ISA_LEVELS 1
#define JMP_TARGET_SSE42 __attribute__((target("sse3,ssse3,sse4.1,sse4.2,popcnt,cx16,sahf")))
// GCC's fma implies AVX, whose 256-bit vectors the SSE4.2 level stands for no CPU of: held to 128 bits.
#define JMP_TARGET_SSE42_FMA \
  __attribute__((target("sse3,ssse3,sse4.1,sse4.2,popcnt,cx16,sahf,fma,prefer-vector-width=128")))
#define JMP_TARGET_AVX2                                                              \
  __attribute__((                                                                    \
      target("sse3,ssse3,sse4.1,sse4.2,popcnt,cx16,sahf,avx,avx2,bmi,bmi2,f16c,fma," \
             "lzcnt,movbe,xsave")))
#define JMP_TARGET_AVX512                                                            \
  __attribute__((                                                                    \
      target("sse3,ssse3,sse4.1,sse4.2,popcnt,cx16,sahf,avx,avx2,bmi,bmi2,f16c,fma," \
             "lzcnt,movbe,xsave,avx512f,avx512bw,avx512cd,avx512dq,avx512vl")))
#endif

// Defines `void Name Params`, running the body (the arguments after Args) built for the level HostIsa
// picks. Params is the parenthesised parameter list, Args the parenthesised names passed on. Helpers the
// body calls must be inline (JMP_FASTMATH) to be built for each level with it.
#ifdef JMP_HOST_ISA_LEVELS
// The body built once per level, as Name##Avx512, ##Avx2, ##Sse42 and ##Sse2.
#define JMP_LEVEL_BUILDS(Name, Params, Args, ...)                                                         \
  inline __attribute__((                                                                                  \
      always_inline)) void Name##AnyLevel Params __VA_ARGS__ JMP_TARGET_AVX512 void Name##Avx512 Params { \
    Name##AnyLevel Args;                                                                                  \
  }                                                                                                       \
  JMP_TARGET_AVX2 void Name##Avx2 Params { Name##AnyLevel Args; }                                         \
  JMP_TARGET_SSE42 void Name##Sse42 Params { Name##AnyLevel Args; }                                       \
  void Name##Sse2 Params { Name##AnyLevel Args; }
#define JMP_VECTOR_LOOP(Name, Params, Args, ...)                                                                   \
  JMP_LEVEL_BUILDS(Name, Params, Args, __VA_ARGS__)                                                                \
  void Name Params {                                                                                               \
    static const auto level = ::jmp::exec::host::PickByIsa(&Name##Avx512, &Name##Avx2, &Name##Sse42, &Name##Sse2); \
    level Args;                                                                                                    \
  }
// JMP_VECTOR_LOOP for a loop of fused multiply-adds (std::fma): at the SSE4.2 level it is also built
// with FMA, taken where the CPU has it. The level stands for Apple's CPUs, whose 128-bit NEON has FMA;
// built without the instruction, each std::fma is a call into libm.
#define JMP_FMA_LOOP(Name, Params, Args, ...)                                                                        \
  JMP_LEVEL_BUILDS(Name, Params, Args, __VA_ARGS__)                                                                  \
  JMP_TARGET_SSE42_FMA void Name##Sse42Fma Params { Name##AnyLevel Args; }                                           \
  void Name Params {                                                                                                 \
    static const auto level =                                                                                        \
        ::jmp::exec::host::PickByIsaWithFma(&Name##Avx512, &Name##Avx2, &Name##Sse42Fma, &Name##Sse42, &Name##Sse2); \
    level Args;                                                                                                      \
  }
#elif defined(__GNUC__)
// Kept out of line, as the levels' dispatch keeps them on x86-64: one call per chunk of elements, and
// scripts/check_neon.py finds each loop by name in an arm64 build's object code.
#define JMP_VECTOR_LOOP(Name, Params, Args, ...) __attribute__((noinline)) void Name Params __VA_ARGS__
#else
#define JMP_VECTOR_LOOP(Name, Params, Args, ...) void Name Params __VA_ARGS__
#endif
#ifndef JMP_HOST_ISA_LEVELS
#define JMP_FMA_LOOP JMP_VECTOR_LOOP
#endif
