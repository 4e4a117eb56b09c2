// Reading a manual computation: its form, shardings, mesh and manual axes, and the copies (devices)
// its body is lowered for.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "lower/lower_context.h"
#include "lower/lower_families.h"
#include "lower/lower_manual.h"
#include "lower/sharding.h"

namespace jmp::mps::manual {

StatusOr<Copies> CopiesOf(const Mesh& mesh, const std::vector<int>& manual_axes) {
  Copies c;
  const int64_t n = mesh.size();
  c.copy_of_device.assign(static_cast<size_t>(n), -1);
  const size_t axes = mesh.axis_sizes.size();
  for (int64_t position = 0; position < n; ++position) {
    bool representative = true;
    for (size_t a = axes, rest = static_cast<size_t>(position); a-- > 0;) {
      const size_t coord = rest % static_cast<size_t>(mesh.axis_sizes[a]);
      rest /= static_cast<size_t>(mesh.axis_sizes[a]);
      const bool manual = std::find(manual_axes.begin(), manual_axes.end(), static_cast<int>(a)) != manual_axes.end();
      if (!manual && coord != 0) representative = false;
    }
    if (!representative) continue;
    c.copy_of_device[static_cast<size_t>(mesh.DeviceAt(position))] = static_cast<int>(c.device.size());
    c.device.push_back(mesh.DeviceAt(position));
  }
  return c;
}

bool IsManualOp(const shlo::Op& op) {
  if (op.name == "sdy.manual_computation") return true;
  const shlo::Attr* callee = op.name == "func.call" ? op.Find("callee") : nullptr;
  return callee && IsManualComputationBody(callee->s);
}

namespace {

// A frontend attribute of the op being lowered, as text.
StatusOr<std::string> Frontend(LowerContext& cx, const char* name) {
  const shlo::Attr* attrs = cx.op().Find("mhlo.frontend_attributes");
  if (attrs && attrs->kind == shlo::Attr::Kind::kDict) {
    auto it = attrs->dict.find(name);
    if (it != attrs->dict.end() && it->second.kind == shlo::Attr::Kind::kString) return it->second.s;
  }
  return cx.Unsupported(std::string("manual computation without its ") + name);
}

// "#sdy<manual_axes{\"x\", \"y\"}>": the axes' indices in `mesh`.
StatusOr<std::vector<int>> ManualAxes(LowerContext& cx, const std::string& text, const Mesh& mesh) {
  std::vector<int> axes;
  size_t at = text.find('{');
  const size_t end = text.rfind('}');
  if (at == std::string::npos || end == std::string::npos || end < at) return cx.Unsupported("malformed manual_axes");
  while (true) {
    size_t open = text.find('"', at);
    if (open == std::string::npos || open > end) break;
    size_t close = text.find('"', open + 1);
    if (close == std::string::npos || close > end) return cx.Unsupported("malformed manual_axes");
    std::string name = text.substr(open + 1, close - open - 1);
    if (!name.empty() && name.back() == '\\') name.pop_back();
    const int k = mesh.AxisIndex(name);
    if (k < 0) return cx.Unsupported("manual axis '" + name + "' is not an axis of the mesh");
    axes.push_back(k);
    at = close + 1;
  }
  return axes;
}

// The op's attribute `name` as text (Shardy's attributes arrive as their text).
StatusOr<std::string> TextAttr(LowerContext& cx, const char* name) {
  const shlo::Attr* a = cx.op().Find(name);
  if (a && a->kind == shlo::Attr::Kind::kString) return a->s;
  return cx.Unsupported(std::string("manual computation without its ") + name);
}

}  // namespace

StatusOr<ManualOp> ReadManualOp(LowerContext& cx) {
  const shlo::Op& op = cx.op();
  ManualOp m;
  std::string in_text, out_text, axes_text;
  if (op.name == "sdy.manual_computation") {
    if (op.regions.size() != 1 || op.regions[0].blocks.size() != 1)
      return cx.Unsupported("a manual computation without one body");
    JMP_ASSIGN_OR_RETURN(in_text, TextAttr(cx, "in_shardings"));
    JMP_ASSIGN_OR_RETURN(out_text, TextAttr(cx, "out_shardings"));
    JMP_ASSIGN_OR_RETURN(axes_text, TextAttr(cx, "manual_axes"));
  } else {
    const shlo::Attr* callee_attr = op.Find("callee");
    m.body = callee_attr ? cx.module().FindFunc(callee_attr->s) : nullptr;
    if (!m.body) return cx.Unsupported("call to an unknown function");
    JMP_ASSIGN_OR_RETURN(in_text, Frontend(cx, "xla.sdy.in_shardings"));
    JMP_ASSIGN_OR_RETURN(out_text, Frontend(cx, "xla.sdy.out_shardings"));
    JMP_ASSIGN_OR_RETURN(axes_text, Frontend(cx, "xla.sdy.manual_axes"));
  }
  Meshes meshes;
  if (!cx.module().sdy_meshes.empty()) {
    StatusOr<Meshes> parsed = ParseSdyMeshes(cx.module().sdy_meshes);
    if (!parsed.ok()) return cx.Unsupported(parsed.status().message());
    meshes = std::move(*parsed);
  }
  StatusOr<std::vector<SdySharding>> ins = ParseSdyShardings(in_text, meshes);
  if (!ins.ok()) return cx.Unsupported(ins.status().message());
  StatusOr<std::vector<SdySharding>> outs = ParseSdyShardings(out_text, meshes);
  if (!outs.ok()) return cx.Unsupported(outs.status().message());
  m.ins = std::move(*ins);
  m.outs = std::move(*outs);
  if (m.ins.size() != op.operands.size() || m.outs.size() != op.results.size())
    return cx.Unsupported("a manual computation's shardings do not match its operands and results");
  // The mesh: the shardings', else the module's only one.
  if (!m.ins.empty()) {
    m.mesh = m.ins[0].mesh;
  } else if (!m.outs.empty()) {
    m.mesh = m.outs[0].mesh;
  } else if (meshes.size() == 1) {
    m.mesh = meshes.begin()->second;
  } else {
    return cx.Unsupported("a manual computation without a mesh");
  }
  const int64_t devices = cx.partitioning().num_devices();
  if (m.mesh.size() != devices)
    return cx.Unsupported("a manual computation over " + std::to_string(m.mesh.size()) +
                          " devices in a program compiled for " + std::to_string(devices));
  JMP_ASSIGN_OR_RETURN(m.manual_axes, ManualAxes(cx, axes_text, m.mesh));
  return m;
}

}  // namespace jmp::mps::manual
