// The self-check's entry points in the plugin library, for jax_metal_plugin/_check.py (ctypes): the
// library is all a wheel carries, whatever the Python, so nothing here goes through a Python module.
#include <cstdlib>
#include <cstring>
#include <string>

#include "check/check.h"
#include "exec/capabilities.h"
#include "plugin/export.h"

#ifndef JMP_BUILD_COMMIT
#define JMP_BUILD_COMMIT "unknown"
#endif

namespace {

char* Copy(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out) std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

}  // namespace

// The git commit the library was built from ("unknown" outside a git checkout).
JMP_EXPORT const char* jmp_build_commit() { return JMP_BUILD_COMMIT; }

namespace {

template <typename F>
char* Guarded(F&& make) {
  try {
    return Copy(make());
  } catch (const std::exception& e) {
    return Copy(std::string("{\"error\": \"self-check failed: ") + e.what() + "\"}");
  } catch (...) {
    return Copy("{\"error\": \"self-check failed\"}");
  }
}

}  // namespace

// The self-check's cases as JSON (cpp/check/check.h ListCases), which the caller frees with
// jmp_check_free. quick: a subset in seconds; only: "Op:dtype,..." or empty for all. Never throws.
JMP_EXPORT char* jmp_check_cases(int32_t quick, const char* only) {
  return Guarded([&] { return jmp::check::ListCases(quick != 0, only ? only : ""); });
}

// Runs one of those cases (RunListedCase), journaling its programs to journal_fd (-1: none); index -1
// makes the process's executors and names their Metal side.
JMP_EXPORT char* jmp_check_case(int32_t quick, const char* only, int32_t index, int32_t journal_fd) {
  return Guarded([&] { return jmp::check::RunListedCase(quick != 0, only ? only : "", index, journal_fd); });
}

JMP_EXPORT void jmp_check_free(char* report) { std::free(report); }
