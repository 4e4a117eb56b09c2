#include "unit_tests/unit_test.h"

#include <exception>

namespace jmp::unit {

std::vector<std::pair<std::string, TestFn>>& Registry() {
  static std::vector<std::pair<std::string, TestFn>> tests;
  return tests;
}

std::vector<std::string> TestNames() {
  std::vector<std::string> names;
  for (const auto& [name, fn] : Registry()) names.push_back(name);
  return names;
}

std::pair<bool, std::string> RunTest(const std::string& name) {
  for (const auto& [test, fn] : Registry()) {
    if (test != name) continue;
    Context context;
    try {
      fn(context);
    } catch (const std::exception& e) {
      context.Fail(__FILE__, __LINE__, std::string("exception: ") + e.what());
    }
    return {!context.failed(), context.failures()};
  }
  return {false, "no unit test named " + name};
}

}  // namespace jmp::unit
