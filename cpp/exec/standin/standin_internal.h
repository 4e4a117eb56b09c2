// What the stand-in's files share: its tensors (values of a recorded mps::Graph scope), the messages
// of its rules, and the executable that runs a recorded program.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "exec/executor.h"
#include "exec/metal/metal_api.h"
#include "mps/graph.h"
#include "support/status.h"

namespace jmp::exec::metal {

// A recorded graph's value: the scope (the graph or one block of it) that made it, its value id there,
// and the type MPSGraph infers for it.
struct Tensor {
  struct Scope* scope = nullptr;
  int value = -1;
  ShapedType type;
  bool placeholder = false;
  bool poisoned = false;  // made by a call that broke a rule: later calls on it add no second error
};

}  // namespace jmp::exec::metal

namespace jmp::exec::standin {

using metal::DataType;
using metal::Shape;
using metal::ShapedType;

// Errors: every message starts with this, so a test (or a user) sees which side refused.
inline constexpr const char kPrefix[] = "MPSGraph stand-in: ";
Status Violation(const std::string& what);    // a rule of Apple's headers broken
Status Unsupported(const std::string& what);  // a well-formed call the stand-in cannot compute

std::string DataTypeName(DataType t);  // "float32", "invalid (0x0)"
std::string ShapeString(const Shape& s);
std::string TypeString(const ShapedType& t);  // "float32[2,3]"
int64_t ElementCount(const Shape& s);         // 1 for rank 0; -1 when a dimension is negative
size_t ElementBytes(DataType t);              // 0 for an unknown type
// The host's element type for an MPSDataType; an error for one the stand-in cannot hold.
StatusOr<DType> HostDType(DataType t);
DataType MetalDataType(DType t);  // kInvalid where MPSGraph has none

// [[MPSGraph alloc] init] (standin_graph.cc).
std::unique_ptr<metal::Graph> NewStandinGraph();

// A recorded program, as the stand-in compiles it or reads it from a package: an mps::Graph whose
// inputs are the feeds in the executable's feedTensors order and whose outputs are the targets.
struct Program {
  mps::Graph graph;
  std::vector<ShapedType> feeds, targets;
};

// The host executable of a program, with MPSGraph's fused multiply-add modelled (standin_eval.cc).
StatusOr<std::unique_ptr<Executable>> CompileProgram(const mps::Graph& graph);

// A package's bytes (standin_package.cc).
Status WritePackage(const Program& program, const std::string& dir);
StatusOr<Program> ReadPackage(const std::string& dir);

// The executable (standin_runtime.cc): from a compile (with its feed and target tensors) or a package
// (without: the properties are nil).
StatusOr<std::unique_ptr<metal::GraphExecutable>> MakeExecutable(Program program, metal::Tensors feedTensors,
                                                                 metal::Tensors targetTensors);

}  // namespace jmp::exec::standin
