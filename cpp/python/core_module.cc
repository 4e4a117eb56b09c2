// jax_metal_plugin._core: the reader and the lowering, for tools and tests, and the C++ unit tests.
// Status errors become ValueError (bad input) or RuntimeError (our own failure); nothing here touches
// PJRT.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "exec/placement.h"
#include "lower/lower.h"
#include "mps/graph.h"
#include "stablehlo/ir.h"
#include "unit_tests/unit_test.h"

namespace py = pybind11;

namespace {

[[noreturn]] void Raise(const jmp::Status& status) {
  if (status.code() == jmp::StatusCode::kInternal) throw std::runtime_error(status.message());
  throw py::value_error(status.message());
}

jmp::shlo::Module Read(py::bytes data) {
  std::string bytes = data;
  jmp::StatusOr<jmp::shlo::Module> module = [&] {
    py::gil_scoped_release release;
    return jmp::shlo::ReadArtifact(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }();
  if (!module.ok()) Raise(module.status());
  return std::move(module).value();
}

std::string ParseArtifact(py::bytes data) { return jmp::shlo::PrintModule(Read(data)); }

std::string LowerArtifact(py::bytes data) {
  jmp::shlo::Module module = Read(data);
  auto lowered = jmp::mps::LowerModule(module);
  if (!lowered.ok()) Raise(lowered.status());
  const jmp::mps::Graph& graph = lowered->graph;
  return jmp::mps::PlacementToString(graph, jmp::mps::PlaceGraph(graph));
}

py::list OpKinds() {
  py::list kinds;
  for (jmp::mps::OpKind kind : jmp::mps::kAllOpKinds) {
    kinds.append(py::make_tuple(std::string(jmp::mps::OpKindName(kind)), std::string(jmp::mps::OpKindSelector(kind)),
                                jmp::mps::OpKindMacOS(kind)));
  }
  return kinds;
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "The jax-metal-plugin reader and lowering, exposed for tools and tests.";
  m.def("parse_artifact", &ParseArtifact, py::arg("data"),
        "Reads a VHLO portable artifact; returns our StableHLO IR as text. ValueError on bad input.");
  m.def("lower_artifact", &LowerArtifact, py::arg("data"),
        "Reads and lowers a VHLO portable artifact; returns the MPS op graph as text, segment by segment,\n"
        "each op marked with the executor placement gives it (@metal or @host).");
  m.def("op_kinds", &OpKinds, "The MPS op table: (name, MPSGraph selector, macOS version) per op kind.");
  m.def("unit_tests", &jmp::unit::TestNames, "Names of the C++ unit tests (cpp/unit_tests).");
  m.def(
      "run_unit_test",
      [](const std::string& name) {
        py::gil_scoped_release release;
        return jmp::unit::RunTest(name);
      },
      py::arg("name"), "Runs one C++ unit test: (passed, what failed).");
  m.attr("stablehlo_newest_version") =
      py::make_tuple(jmp::shlo::kNewestVersion[0], jmp::shlo::kNewestVersion[1], jmp::shlo::kNewestVersion[2]);
}
