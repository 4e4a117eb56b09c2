// Running the self-check: each case's programs on the Metal side and on the host executor, compared,
// reported as JSON (jax_metal_plugin/_check.py prints the table and keeps the record).
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <sstream>

#include "check/check_cases.h"
#include "exec/capabilities.h"
#include "exec/executor.h"
#include "mps/verify.h"

namespace jmp::check {

namespace {

using Results = std::vector<std::vector<uint8_t>>;

StatusOr<Results> Run(exec::Executor& executor, const Program& p) {
  JMP_ASSIGN_OR_RETURN(std::unique_ptr<exec::Executable> executable, executor.Compile(p.graph));
  std::vector<std::shared_ptr<exec::DeviceMemory>> keep;
  std::vector<exec::DeviceMemory*> in, out;
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    const size_t bytes = p.graph.type(p.graph.inputs[i]).ByteSize();
    if (p.inputs[i].size() != bytes) return Internal("self-check: input " + std::to_string(i) + " has the wrong size");
    JMP_ASSIGN_OR_RETURN(auto m, executor.Allocate(bytes));
    if (bytes) std::memcpy(m->data(), p.inputs[i].data(), bytes);
    in.push_back(m.get());
    keep.push_back(std::move(m));
  }
  for (int v : p.graph.outputs) {
    JMP_ASSIGN_OR_RETURN(auto m, executor.Allocate(p.graph.type(v).ByteSize()));
    out.push_back(m.get());
    keep.push_back(std::move(m));
  }
  JMP_RETURN_IF_ERROR(executable->Run(in, out));
  Results results;
  for (exec::DeviceMemory* m : out) {
    const uint8_t* d = static_cast<const uint8_t*>(m->data());
    results.emplace_back(d, d + m->size());
  }
  return results;
}

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

std::string Number(double v) {
  if (std::isinf(v)) return "\"inf\"";
  if (std::isnan(v)) return "\"nan\"";
  std::ostringstream s;
  s.precision(4);
  s << v;
  return s.str();
}

// Whether the program holds a zero-element value: placement never gives such an op to Metal, so the
// program runs as a user's would, through the segment runner, which sends that op to the host.
bool HoldsEmpty(const mps::Graph& g) {
  for (const mps::TensorType& t : g.values)
    if (t.NumElements() == 0) return true;
  return false;
}

// One case's JSON object.
std::string RunCase(exec::Executor& metal, exec::Executor& placed, exec::Executor& host, const Case& c) {
  const auto start = std::chrono::steady_clock::now();
  std::string status = "ok", message, bound = "exact";
  double worst = 0, worst_ratio = -1;
  std::vector<std::string> failures;
  for (const Program& p : c.programs) {
    if (Status valid = mps::VerifyGraph(p.graph); !valid.ok()) {  // the check's own mistake, never Metal's
      status = "error";
      message = "self-check program " + p.what + " is not a valid MPS graph: " + valid.message();
      break;
    }
    auto expected = Run(host, p);
    auto got = expected.ok() ? Run(HoldsEmpty(p.graph) ? placed : metal, p) : StatusOr<Results>(expected.status());
    if (!expected.ok() || !got.ok()) {
      status = "error";
      message = (expected.ok() ? "metal side: " : "host executor: ") + std::string(p.what) + ": " +
                (expected.ok() ? got.status() : expected.status()).message();
      break;
    }
    bool alternative = false;
    for (const Results& alt : p.alternatives) alternative = alternative || alt == *got;
    for (size_t o = 0; o < expected->size(); ++o) {
      const Tolerance& tol = p.tolerance[p.tolerance.size() == 1 ? 0 : o];
      const DType t = p.graph.type(p.graph.outputs[o]).dtype;
      double error = 0;
      const bool agree = Agree(t, (*expected)[o], (*got)[o], tol, error) || alternative;
      const double ratio = tol.bound > 0 ? error / tol.bound : error;
      if (ratio > worst_ratio) {
        worst_ratio = ratio;
        worst = error;
        bound = tol.Describe();
      }
      if (!agree) {
        if (status == "ok") status = "mismatch";
        if (failures.size() < 4)
          failures.push_back(Quote(p.what + ", output " + std::to_string(o) + ": error " + Number(error) + " (" +
                                   tol.Describe() + ")"));
      }
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::ostringstream j;
  j << "{\"op\": " << Quote(std::string(mps::OpKindName(c.kind)))
    << ", \"dtype\": " << Quote(std::string(JaxDTypeName(c.dtype))) << ", \"status\": " << Quote(status)
    << ", \"worst_error\": " << Number(worst) << ", \"bound\": " << Quote(bound)
    << ", \"programs\": " << c.programs.size() << ", \"seconds\": " << Number(seconds);
  if (!c.probe.empty()) j << ", \"probe\": " << Quote(c.probe);
  if (!message.empty()) j << ", \"message\": " << Quote(message);
  j << ", \"failures\": [";
  for (size_t i = 0; i < failures.size(); ++i) j << (i ? ", " : "") << failures[i];
  j << "]}";
  return j.str();
}

bool InQuickSet(DType d, const std::vector<DType>& domain) {
  for (DType q : {DType::kF16, DType::kBF16, DType::kF32, DType::kI32, DType::kBool, DType::kC64})
    if (q == d) return true;
  return domain.front() == d && (domain.size() == 1 || !IsInteger(d));
}

}  // namespace

Status BuildSweepCase(mps::OpKind kind, DType dtype, bool quick, Case& c) {
  c.kind = kind;
  c.dtype = dtype;
  if (BuildElementwise(kind, dtype, quick, c) || BuildDataMovement(kind, dtype, quick, c) ||
      BuildComputing(kind, dtype, quick, c))
    return Status::Ok();
  return Internal("self-check: no case builder for " + std::string(mps::OpKindName(kind)));
}

std::string RunCheck(bool quick, const std::string& only) {
  const auto start = std::chrono::steady_clock::now();
  std::string side;
  auto metal = exec::CreateMetalSideExecutor(&side);
  const bool is_metal = side == "metal";
  if (!metal.ok()) return "{\"error\": " + Quote(metal.status().message()) + "}";
  std::unique_ptr<exec::Executor> host = exec::CreateHostExecutor();
  auto placed_device = exec::CreateMetalSideExecutor();
  if (!placed_device.ok()) return "{\"error\": " + Quote(placed_device.status().message()) + "}";
  std::unique_ptr<exec::Executor> placed =
      exec::CreateSegmentedExecutor(std::move(placed_device).value(), exec::CreateHostExecutor());
  std::set<exec::OpDTypePair> selected;
  if (!only.empty()) {
    auto parsed = exec::ParsePairs(only);
    if (!parsed.ok()) return "{\"error\": " + Quote(parsed.status().message()) + "}";
    selected = parsed.value();
  }
  auto wanted = [&](mps::OpKind k, DType d) { return selected.empty() || selected.count({k, d}) > 0; };
  std::ostringstream j;
  j << "{\"metal\": " << (is_metal ? "true" : "false") << ", \"executor\": " << Quote(side) << ", \"cases\": [";
  bool first = true;
  auto emit = [&](const std::string& s) {
    j << (first ? "\n" : ",\n") << s;
    first = false;
  };
  for (mps::OpKind kind : mps::kAllOpKinds) {
    const std::vector<DType> domain = MetalDTypes(kind);
    for (DType d : domain) {
      if (!wanted(kind, d) || (quick && selected.empty() && !InQuickSet(d, domain))) continue;
      Case c;
      Status built = BuildSweepCase(kind, d, quick, c);
      if (!built.ok()) {
        emit("{\"op\": " + Quote(std::string(mps::OpKindName(kind))) +
             ", \"dtype\": " + Quote(std::string(JaxDTypeName(d))) +
             ", \"status\": \"error\", \"message\": " + Quote(built.message()) + "}");
        continue;
      }
      emit(RunCase(**metal, *placed, *host, c));
    }
  }
  for (const Case& c : AssumptionProbes())
    if (wanted(c.kind, c.dtype)) emit(RunCase(**metal, *placed, *host, c));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  j << "\n], \"seconds\": " << Number(seconds) << "}";
  return j.str();
}

}  // namespace jmp::check
