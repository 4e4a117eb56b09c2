#include "exec/host/host_isa.h"

#include <cstdlib>
#include <string>

namespace jmp::exec::host {

IsaLevel CpuIsa() {
#ifdef JMP_HOST_ISA_LEVELS
  __builtin_cpu_init();
  const bool v2 =
      __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("popcnt") && __builtin_cpu_supports("ssse3");
  const bool v3 = v2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                  __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("f16c");
  const bool v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
                  __builtin_cpu_supports("avx512vl");
  return v4 ? IsaLevel::kAvx512 : v3 ? IsaLevel::kAvx2 : v2 ? IsaLevel::kSse42 : IsaLevel::kBaseline;
#else
  return IsaLevel::kBaseline;
#endif
}

bool CpuHasFma() {
#ifdef JMP_HOST_ISA_LEVELS
  __builtin_cpu_init();
  return __builtin_cpu_supports("fma");
#elif defined(__aarch64__)
  return true;
#else
  return false;
#endif
}

namespace {

// JMP_HOST_ISA's level, held to what the CPU runs (a higher one would fault); unset or unknown: the CPU's.
IsaLevel ChooseIsa() {
  const IsaLevel cpu = CpuIsa();
  const char* env = std::getenv("JMP_HOST_ISA");
  if (!env) return cpu;
  const std::string asked(env);
  for (IsaLevel level : {IsaLevel::kBaseline, IsaLevel::kSse42, IsaLevel::kAvx2, IsaLevel::kAvx512})
    if (asked == IsaName(level)) return level < cpu ? level : cpu;
  return cpu;
}

}  // namespace

IsaLevel HostIsa() {
  static const IsaLevel level = ChooseIsa();
  return level;
}

std::string_view IsaName(IsaLevel level) {
  switch (level) {
    case IsaLevel::kAvx512: return "avx512";
    case IsaLevel::kAvx2: return "avx2";
    case IsaLevel::kSse42: return "sse4.2";
    case IsaLevel::kBaseline:
#if defined(__x86_64__)
      return "sse2";
#elif defined(__aarch64__)
      return "neon";
#else
      return "baseline";
#endif
  }
  return "baseline";
}

}  // namespace jmp::exec::host
