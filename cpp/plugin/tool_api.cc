// The reader and the lowering for Python's tools (jax_metal_plugin/_native.py binds them with ctypes).
// They live in the plugin library rather than a Python extension so that one macOS wheel serves every
// Python version. Nothing is thrown across this boundary: every call returns a status code and a text,
// the result or the error message, which the caller frees with jmp_tool_free.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <new>
#include <string>

#include "exec/capabilities.h"
#include "exec/placement.h"
#include "lower/custom_call_config.h"
#include "lower/lower.h"
#include "mps/graph.h"
#include "plugin/export.h"
#include "stablehlo/ir.h"
#include "support/dtype.h"

namespace {

// Status codes of the tool calls: the caller raises ValueError for bad input, RuntimeError otherwise.
constexpr int32_t kToolOk = 0;
constexpr int32_t kToolBadInput = 1;
constexpr int32_t kToolInternal = 2;

// A malloc'd NUL-terminated copy (the caller may not share our allocator's new/delete); null when out of
// memory, which the caller reports.
char* CopyText(const std::string& text) {
  char* out = static_cast<char*>(std::malloc(text.size() + 1));
  if (out == nullptr) return nullptr;
  std::memcpy(out, text.data(), text.size());
  out[text.size()] = '\0';
  return out;
}

int32_t Finish(int32_t code, const std::string& text, char** out) {
  *out = CopyText(text);
  return *out == nullptr ? kToolInternal : code;
}

int32_t FromStatus(const jmp::Status& status, char** out) {
  return Finish(status.code() == jmp::StatusCode::kInternal ? kToolInternal : kToolBadInput, status.message(), out);
}

// Runs `body` (which returns the result text or a Status) with every C++ exception caught here.
template <typename Body>
int32_t Guarded(char** out, Body body) {
  if (out == nullptr) return kToolInternal;
  *out = nullptr;
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return Finish(kToolInternal, "jax-metal-plugin: out of memory", out);
  } catch (const std::exception& e) {
    return Finish(kToolInternal, std::string("jax-metal-plugin: internal error: ") + e.what(), out);
  } catch (...) {
    return Finish(kToolInternal, "jax-metal-plugin: internal error (unknown exception)", out);
  }
}

int32_t Lower(const uint8_t* data, int64_t size, bool placed, char** out) {
  return Guarded(out, [&] {
    if (data == nullptr && size != 0) return Finish(kToolBadInput, "no artifact data", out);
    jmp::StatusOr<jmp::shlo::Module> module = jmp::shlo::ReadArtifact(data, static_cast<size_t>(size));
    if (!module.ok()) return FromStatus(module.status(), out);
    jmp::StatusOr<jmp::mps::LoweredProgram> lowered = jmp::mps::LowerModule(*module);
    if (!lowered.ok()) return FromStatus(lowered.status(), out);
    const jmp::mps::Graph& graph = lowered->graph;
    if (!placed) return Finish(kToolOk, graph.ToString(), out);
    return Finish(kToolOk, jmp::mps::PlacementToString(graph, jmp::mps::PlaceGraph(graph)), out);
  });
}

std::string_view ClassName(jmp::DTypeClass cls) {
  using C = jmp::DTypeClass;
  switch (cls) {
    case C::kBool: return "bool";
    case C::kSignedInt: return "signed";
    case C::kUnsignedInt: return "unsigned";
    case C::kFloat: return "float";
    case C::kComplex: return "complex";
    case C::kSubByteSigned: return "subbyte_signed";
    case C::kSubByteUnsigned: return "subbyte_unsigned";
    case C::kNarrowFloat: return "narrow_float";
  }
  return "?";
}

}  // namespace

// The newest StableHLO version our reader accepts, as three numbers.
JMP_EXPORT void jmp_tool_stablehlo_newest_version(int64_t* major, int64_t* minor, int64_t* patch) {
  *major = jmp::shlo::kNewestVersion[0];
  *minor = jmp::shlo::kNewestVersion[1];
  *patch = jmp::shlo::kNewestVersion[2];
}

// Reads a VHLO portable artifact; *out gets our StableHLO IR as text, or the error.
JMP_EXPORT int32_t jmp_tool_parse_artifact(const uint8_t* data, int64_t size, char** out) {
  return Guarded(out, [&] {
    if (data == nullptr && size != 0) return Finish(kToolBadInput, "no artifact data", out);
    jmp::StatusOr<jmp::shlo::Module> module = jmp::shlo::ReadArtifact(data, static_cast<size_t>(size));
    if (!module.ok()) return FromStatus(module.status(), out);
    return Finish(kToolOk, jmp::shlo::PrintModule(*module), out);
  });
}

// Reads and lowers a VHLO portable artifact; *out gets the MPS op graph as text, or the error.
JMP_EXPORT int32_t jmp_tool_lower_artifact(const uint8_t* data, int64_t size, char** out) {
  return Lower(data, size, /*placed=*/false, out);
}

// As jmp_tool_lower_artifact, segment by segment, each op marked with the executor placement gives it.
JMP_EXPORT int32_t jmp_tool_place_artifact(const uint8_t* data, int64_t size, char** out) {
  return Lower(data, size, /*placed=*/true, out);
}

// The MPS op table, one op kind a line: "name<TAB>MPSGraph selector<TAB>macOS version" (1100 = 11.0).
JMP_EXPORT int32_t jmp_tool_op_kinds(char** out) {
  return Guarded(out, [&] {
    std::string text;
    for (jmp::mps::OpKind kind : jmp::mps::kAllOpKinds) {
      text += std::string(jmp::mps::OpKindName(kind)) + "\t" + std::string(jmp::mps::OpKindSelector(kind)) + "\t" +
              std::to_string(jmp::mps::OpKindMacOS(kind)) + "\n";
    }
    return Finish(kToolOk, text, out);
  });
}

// The dtype table (support/dtype.def), one dtype a line: "NumPy name<TAB>MLIR name<TAB>bytes<TAB>class<TAB>MSL
// type" (class: bool, signed, unsigned, float, complex, subbyte_signed, subbyte_unsigned, narrow_float; the
// MSL type empty where Metal has none).
JMP_EXPORT int32_t jmp_tool_dtypes(char** out) {
  return Guarded(out, [&] {
    std::string text;
    for (jmp::DType d : jmp::kAllDTypes)
      text += std::string(jmp::JaxDTypeName(d)) + "\t" + std::string(jmp::DTypeName(d)) + "\t" +
              std::to_string(jmp::ByteSize(d)) + "\t" + std::string(ClassName(jmp::ClassOf(d))) + "\t" +
              std::string(jmp::MslTypeName(d)) + "\n";
    return Finish(kToolOk, text, out);
  });
}

// The custom-call targets the lowering knows (stablehlo/custom_calls.def), one fact a line:
// "pass_through<TAB>target", "call<TAB>target<TAB>named|positional" and "attr<TAB>target<TAB>name<TAB>type"
// (type: bool, int, float).
JMP_EXPORT int32_t jmp_tool_custom_calls(char** out) {
  return Guarded(out, [&] {
    std::string text;
    std::map<std::string, std::string> targets;
#define JMP_PASS_THROUGH_TARGET(target) text += std::string("pass_through\t") + target + "\n";
#define JMP_CUSTOM_CALL(id, target, format) \
  targets[#id] = target;                    \
  text +=                                   \
      std::string("call\t") + target + "\t" + (std::string_view(#format) == "kNamed" ? "named" : "positional") + "\n";
#define JMP_CUSTOM_CALL_ATTR(id, name, type)             \
  text += "attr\t" + targets.at(#id) + "\t" #name "\t" + \
          std::string(jmp::mps::CustomCallAttrTypeName(jmp::mps::CustomCallAttrType::type)) + "\n";
#include "stablehlo/custom_calls.def"
    return Finish(kToolOk, text, out);
  });
}

// What Metal segments run on in this process: "metal", "standin", "placed" or "host" (JAX_METAL_EXECUTOR).
JMP_EXPORT int32_t jmp_tool_metal_side(char** out) {
  return Guarded(out, [&] {
    auto side = jmp::exec::MetalSideName();
    return side.ok() ? Finish(kToolOk, *side, out) : FromStatus(side.status(), out);
  });
}

// Frees a text any jmp_tool_* call returned (null is allowed).
JMP_EXPORT void jmp_tool_free(char* text) { std::free(text); }
