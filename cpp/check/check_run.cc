// Running the self-check: each case's programs on the Metal side and on the host executor, compared,
// reported as JSON. jax_metal_plugin/_check_runner.py lists the cases here and runs them in child
// processes, one call per case, so that a case that aborts or hangs costs only itself; it prints the
// table and keeps the record.
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <sstream>

#include "check/check_cases.h"
#include "exec/capabilities.h"
#include "exec/executor.h"
#include "mps/verify.h"
#include "support/write_fd.h"

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

// The shape class of the op a program checks (its first op of the case's kind and dtype).
exec::ShapeClass ProgramShape(const Case& c, const Program& p) {
  for (const mps::Op& op : p.graph.ops)
    if (op.kind == c.kind && exec::OpDType(p.graph, op) == c.dtype) return exec::ShapeClassOf(p.graph, op);
  return exec::ShapeClass::kOther;
}

// Appends a line to the journal the check's parent process reads (-1: none), so that it knows which
// program a case was running if the process dies or blocks there. write(2) straight away: nothing is
// left in a buffer when the process dies.
void Journal(int fd, const std::string& line) {
  if (fd >= 0) WriteAllToFd(fd, line.data(), line.size());
}

// One case's JSON object.
std::string RunCase(exec::Executor& metal, exec::Executor& placed, exec::Executor& host, const Case& c,
                    int journal_fd) {
  const auto start = std::chrono::steady_clock::now();
  std::string status = "ok", message, bound = "exact";
  double worst = 0, worst_ratio = -1;
  std::vector<std::string> failures;
  std::vector<size_t> failed_programs;
  for (size_t k = 0; k < c.programs.size(); ++k) {
    const Program& p = c.programs[k];
    const std::string_view shape = exec::ShapeClassName(ProgramShape(c, p));
    Journal(journal_fd, "program " + std::to_string(k) + " " + std::string(shape.empty() ? "-" : shape) + " " +
                            Quote(p.what) + "\n");
    if (Status valid = mps::VerifyGraph(p.graph); !valid.ok()) {  // the check's own mistake, never Metal's
      status = "error";
      message = "self-check program " + p.what + " is not a valid MPS graph: " + valid.message();
      failed_programs.push_back(k);
      break;
    }
    auto expected = Run(host, p);
    auto got = expected.ok() ? Run(HoldsEmpty(p.graph) ? placed : metal, p) : StatusOr<Results>(expected.status());
    if (!expected.ok() || !got.ok()) {
      status = "error";
      message = (expected.ok() ? "metal side: " : "host executor: ") + std::string(p.what) + ": " +
                (expected.ok() ? got.status() : expected.status()).message();
      failed_programs.push_back(k);
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
        if (failed_programs.empty() || failed_programs.back() != k) failed_programs.push_back(k);
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
  j << "], \"program_shapes\": [";
  for (size_t k = 0; k < c.programs.size(); ++k)
    j << (k ? ", " : "") << Quote(std::string(exec::ShapeClassName(ProgramShape(c, c.programs[k]))));
  j << "], \"failed_programs\": [";
  for (size_t i = 0; i < failed_programs.size(); ++i) j << (i ? ", " : "") << failed_programs[i];
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

namespace {

// A case of the sweep, before its programs are built: a sweep pair, or an assumption probe.
struct CaseRef {
  mps::OpKind kind;
  DType dtype;
  int probe = -1;  // index into Probes(), or -1
};

const std::vector<Case>& Probes() {
  static const std::vector<Case> probes = AssumptionProbes();
  return probes;
}

// The cases of a check, in the order they run: the sweep pairs in op-table order, then the probes.
StatusOr<std::vector<CaseRef>> SelectCases(bool quick, const std::string& only) {
  std::set<exec::OpDTypePair> selected;
  if (!only.empty()) {
    JMP_ASSIGN_OR_RETURN(selected, exec::ParsePairs(only));
  }
  auto wanted = [&](mps::OpKind k, DType d) { return selected.empty() || selected.count({k, d}) > 0; };
  std::vector<CaseRef> cases;
  for (mps::OpKind kind : mps::kAllOpKinds) {
    const std::vector<DType> domain = MetalDTypes(kind);
    for (DType d : domain)
      if (wanted(kind, d) && !(quick && selected.empty() && !InQuickSet(d, domain))) cases.push_back({kind, d});
  }
  const std::vector<Case>& probes = Probes();
  for (size_t i = 0; i < probes.size(); ++i)
    if (wanted(probes[i].kind, probes[i].dtype))
      cases.push_back({probes[i].kind, probes[i].dtype, static_cast<int>(i)});
  return cases;
}

std::string CaseName(const CaseRef& c) {
  return "\"op\": " + Quote(std::string(mps::OpKindName(c.kind))) +
         ", \"dtype\": " + Quote(std::string(JaxDTypeName(c.dtype)));
}

// The executors a process's cases run on, made once: its Metal side, the segment runner that programs
// holding a zero-element value go through (as a user's would), and the reference.
struct Executors {
  StatusOr<std::unique_ptr<exec::Executor>> metal = Internal("not made");
  std::unique_ptr<exec::Executor> placed;
  std::unique_ptr<exec::Executor> host;
  std::string side;
};

Executors& ProcessExecutors() {
  static Executors* executors = [] {
    auto* e = new Executors;
    e->metal = exec::CreateMetalSideExecutor(&e->side);
    if (!e->metal.ok()) return e;
    auto placed_device = exec::CreateMetalSideExecutor();
    if (!placed_device.ok()) {
      e->metal = placed_device.status();
      return e;
    }
    e->placed = exec::CreateSegmentedExecutor(std::move(placed_device).value(), exec::CreateHostExecutor());
    e->host = exec::CreateHostExecutor();
    return e;
  }();
  return *executors;
}

}  // namespace

std::string ListCases(bool quick, const std::string& only) {
  auto cases = SelectCases(quick, only);
  if (!cases.ok()) return "{\"error\": " + Quote(cases.status().message()) + "}";
  std::ostringstream j;
  j << "{\"cases\": [";
  for (size_t i = 0; i < cases->size(); ++i) {
    const CaseRef& c = (*cases)[i];
    j << (i ? ",\n" : "\n") << "{" << CaseName(c);
    if (c.probe >= 0) j << ", \"probe\": " << Quote(Probes()[static_cast<size_t>(c.probe)].probe);
    j << "}";
  }
  j << "\n]}";
  return j.str();
}

std::string RunListedCase(bool quick, const std::string& only, int index, int journal_fd) {
  Executors& executors = ProcessExecutors();
  if (!executors.metal.ok()) return "{\"error\": " + Quote(executors.metal.status().message()) + "}";
  if (index < 0) return "{\"side\": " + Quote(executors.side) + "}";
  auto cases = SelectCases(quick, only);
  if (!cases.ok()) return "{\"error\": " + Quote(cases.status().message()) + "}";
  if (static_cast<size_t>(index) >= cases->size())
    return "{\"error\": \"self-check: no case " + std::to_string(index) + "\"}";
  const CaseRef& ref = (*cases)[static_cast<size_t>(index)];
  if (ref.probe >= 0)
    return RunCase(**executors.metal, *executors.placed, *executors.host, Probes()[static_cast<size_t>(ref.probe)],
                   journal_fd);
  Case c;
  Status built = BuildSweepCase(ref.kind, ref.dtype, quick, c);
  if (!built.ok()) return "{" + CaseName(ref) + ", \"status\": \"error\", \"message\": " + Quote(built.message()) + "}";
  return RunCase(**executors.metal, *executors.placed, *executors.host, c, journal_fd);
}

}  // namespace jmp::check
