// A small unit-test harness for the C++ core, run through pytest (tests/tooling/test_cpp_units.py calls
// jax_metal_plugin._core.run_unit_test per registered test), so the README's one test command runs
// these too and each C++ test is reported by name. No third-party test framework: nothing to fetch.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "support/status.h"

namespace jmp::unit {

class Context {
 public:
  void Fail(const char* file, int line, const std::string& what) {
    std::ostringstream s;
    s << file << ":" << line << ": " << what << "\n";
    failures_ += s.str();
  }
  bool failed() const { return !failures_.empty(); }
  const std::string& failures() const { return failures_; }

 private:
  std::string failures_;
};

using TestFn = void (*)(Context&);

std::vector<std::pair<std::string, TestFn>>& Registry();

struct Register {
  Register(const char* name, TestFn fn) { Registry().emplace_back(name, fn); }
};

std::vector<std::string> TestNames();
// Runs one test; (passed, what failed). An exception escaping the test is a failure, never a crash.
std::pair<bool, std::string> RunTest(const std::string& name);

inline Status StatusOf(const Status& s) { return s; }
template <typename T>
Status StatusOf(const StatusOr<T>& s) {
  return s.status();
}

template <typename T>
std::string Show(const T& v) {
  std::ostringstream s;
  if constexpr (std::is_same_v<T, uint8_t> || std::is_same_v<T, int8_t>) {
    s << static_cast<int>(v);
  } else if constexpr (std::is_arithmetic_v<T>) {
    s.precision(17);
    s << v;
  } else {
    s << "[";
    for (size_t i = 0; i < v.size(); ++i) s << (i ? ", " : "") << Show(v[i]);
    s << "]";
  }
  return s.str();
}

// Bitwise equality for floats (so NaN == NaN and -0 != +0 where a test says so), == otherwise.
template <typename T>
bool Same(const T& a, const T& b) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::memcmp(&a, &b, sizeof(T)) == 0;
  } else if constexpr (std::is_arithmetic_v<T>) {
    return a == b;
  } else {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!Same(a[i], b[i])) return false;
    return true;
  }
}

}  // namespace jmp::unit

#define JMP_TEST(suite, name)                                                                \
  static void suite##_##name(::jmp::unit::Context& jmp_test_);                               \
  static ::jmp::unit::Register suite##_##name##_register(#suite "." #name, &suite##_##name); \
  static void suite##_##name(::jmp::unit::Context& jmp_test_)

#define EXPECT_TRUE(cond)                                               \
  do {                                                                  \
    if (!(cond)) jmp_test_.Fail(__FILE__, __LINE__, "expected " #cond); \
  } while (0)

// Bitwise for floats: the tests state exact results (signs of zero, NaN) on purpose.
#define EXPECT_SAME(actual, expected)                                                                         \
  do {                                                                                                        \
    const auto& jmp_a_ = (actual);                                                                            \
    const auto& jmp_e_ = (expected);                                                                          \
    if (!::jmp::unit::Same(jmp_a_, jmp_e_))                                                                   \
      jmp_test_.Fail(__FILE__, __LINE__,                                                                      \
                     #actual " is " + ::jmp::unit::Show(jmp_a_) + ", expected " + ::jmp::unit::Show(jmp_e_)); \
  } while (0)

// Stops the test when a Status/StatusOr is an error.
#define ASSERT_OK(expr)                                                         \
  do {                                                                          \
    ::jmp::Status jmp_s_ = ::jmp::unit::StatusOf(expr);                         \
    if (!jmp_s_.ok()) {                                                         \
      jmp_test_.Fail(__FILE__, __LINE__, #expr " failed: " + jmp_s_.message()); \
      return;                                                                   \
    }                                                                           \
  } while (0)

// The Status is an error whose message contains `part`.
#define EXPECT_ERROR(expr, part)                                                                     \
  do {                                                                                               \
    ::jmp::Status jmp_s_ = (expr);                                                                   \
    if (jmp_s_.ok())                                                                                 \
      jmp_test_.Fail(__FILE__, __LINE__, #expr " succeeded, expected an error with \"" part "\"");   \
    else if (jmp_s_.message().find(part) == std::string::npos)                                       \
      jmp_test_.Fail(__FILE__, __LINE__, #expr ": \"" + jmp_s_.message() + "\" lacks \"" part "\""); \
  } while (0)
