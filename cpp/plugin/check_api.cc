// The self-check's entry points in the plugin library, for jax_metal_plugin/_check.py (ctypes): the
// library is all a wheel carries, whatever the Python, so nothing here goes through a Python module.
#include <cstdlib>
#include <cstring>
#include <string>

#include "check/check.h"
#include "exec/capabilities.h"

#define JMP_EXPORT extern "C" __attribute__((visibility("default")))

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

// Runs the self-check (cpp/check/check.h) and returns its JSON report, which the caller frees with
// jmp_check_free. quick: a subset in seconds; only: "Op:dtype,..." or empty for all. Never throws.
JMP_EXPORT char* jmp_check_run(int32_t quick, const char* only) {
  try {
    return Copy(jmp::check::RunCheck(quick != 0, only ? only : ""));
  } catch (const std::exception& e) {
    return Copy(std::string("{\"error\": \"self-check failed: ") + e.what() + "\"}");
  } catch (...) {
    return Copy("{\"error\": \"self-check failed\"}");
  }
}

JMP_EXPORT void jmp_check_free(char* report) { std::free(report); }
