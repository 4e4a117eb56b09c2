// jax_metal_plugin._core: the C++ unit tests (cpp/unit_tests), which pytest runs (tests/test_cpp_units.py).
// Developer builds only: what the package itself needs from C++ goes through the plugin library's C
// symbols (cpp/plugin/tool_api.cc), so that one library serves every Python version.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>

#include "unit_tests/unit_test.h"

namespace py = pybind11;

PYBIND11_MODULE(_core, m) {
  m.doc() = "The jax-metal-plugin C++ unit tests, run by pytest on developer builds.";
  m.def("unit_tests", &jmp::unit::TestNames, "Names of the C++ unit tests (cpp/unit_tests).");
  m.def(
      "run_unit_test",
      [](const std::string& name) {
        py::gil_scoped_release release;
        return jmp::unit::RunTest(name);
      },
      py::arg("name"), "Runs one C++ unit test: (passed, what failed).");
}
