// Generated from op_kinds.def's domain column: every row with every dtype of its domain runs on the
// host executor (the self-check's one-op programs for it, which the Metal side runs against the host
// on a Mac), and with any other dtype the verifier refuses the op, naming it and the dtype, before an
// executor sees it.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "check/check.h"
#include "exec/executor.h"
#include "mps/verify.h"
#include "unit_tests/unit_test.h"

namespace jmp::unit {
namespace {

using mps::OpKind;

Status RunProgramOnHost(exec::Executor& host, const check::Program& p) {
  JMP_RETURN_IF_ERROR(mps::VerifyGraph(p.graph));
  JMP_ASSIGN_OR_RETURN(std::unique_ptr<exec::Executable> executable, host.Compile(p.graph));
  std::vector<std::shared_ptr<exec::DeviceMemory>> keep;
  std::vector<exec::DeviceMemory*> in, out;
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    JMP_ASSIGN_OR_RETURN(auto m, host.Allocate(p.inputs[i].size()));
    if (!p.inputs[i].empty()) std::memcpy(m->data(), p.inputs[i].data(), p.inputs[i].size());
    in.push_back(m.get());
    keep.push_back(std::move(m));
  }
  for (int v : p.graph.outputs) {
    JMP_ASSIGN_OR_RETURN(auto m, host.Allocate(p.graph.type(v).ByteSize()));
    out.push_back(m.get());
    keep.push_back(std::move(m));
  }
  return executable->Run(in, out);
}

// The dtypes a graph can hold (narrow types live only in StableHLO and buffers).
std::vector<DType> GraphDTypes() {
  std::vector<DType> v;
  for (DType d : kAllDTypes)
    if (!IsNarrow(d)) v.push_back(d);
  return v;
}

// Rows the self-check has no one-op programs for: their kernels' own tests cover their dtypes
// (test_host_lapack.cc, test_host_random.cc, tests/runtime/test_callbacks.py, tests/ops/test_metal_kernel.py).
bool HasNoSweep(OpKind kind) { return mps::OpKindHostOnly(kind) || kind == OpKind::kMetalKernel; }

JMP_TEST(OpDomains, EveryRowRunsEveryDTypeOfItsDomainOnTheHost) {
  std::unique_ptr<exec::Executor> host = exec::CreateHostExecutor();
  int cases = 0;
  for (OpKind kind : mps::kAllOpKinds) {
    const std::string row(mps::OpKindName(kind));
    const mps::DTypeDomain domain = mps::OpKindDomain(kind);
    for (DType d : GraphDTypes()) {
      if (!domain.Has(d)) continue;
      const std::string what = row + " on " + std::string(DTypeName(d));
      check::Case c;
      Status built = check::BuildSweepCase(kind, d, /*quick=*/true, c);
      if (HasNoSweep(kind)) {
        if (built.ok()) jmp_test_.Fail(__FILE__, __LINE__, what + ": a sweep now exists, test it here");
        continue;
      }
      if (!built.ok() || c.programs.empty()) {
        jmp_test_.Fail(__FILE__, __LINE__, what + ": no program: " + built.message());
        continue;
      }
      for (const check::Program& p : c.programs) {
        Status ran = RunProgramOnHost(*host, p);
        if (!ran.ok()) jmp_test_.Fail(__FILE__, __LINE__, what + " (" + p.what + "): " + ran.message());
      }
      ++cases;
    }
  }
  EXPECT_TRUE(cases > 300);  // every dtype of every row with a sweep, not a handful
}

JMP_TEST(OpDomains, TheVerifierRefusesEveryDTypeOutsideARowsDomain) {
  int refused = 0;
  for (OpKind kind : mps::kAllOpKinds) {
    if (HasNoSweep(kind)) continue;
    const mps::DTypeDomain domain = mps::OpKindDomain(kind);
    DType inside = DType::kF32;
    for (DType d : GraphDTypes())
      if (domain.Has(d)) inside = d;
    check::Case c;
    ASSERT_OK(check::BuildSweepCase(kind, inside, /*quick=*/true, c));
    for (DType d : GraphDTypes()) {
      if (domain.Has(d)) continue;
      // The row's program with every value of the dtype it was built for retyped: whatever else it
      // breaks, the domain is checked first.
      mps::Graph g = c.programs.at(0).graph;
      for (mps::TensorType& t : g.values)
        if (t.dtype == inside) t.dtype = d;
      for (mps::Op& op : g.ops) op.location = "loc(\"row.py\":1:2)";
      const Status s = mps::VerifyGraph(g);
      const std::string want = std::string(mps::OpKindName(kind)) + ": is not defined for " + std::string(DTypeName(d));
      if (s.ok() || s.message().find(want) == std::string::npos || s.message().find("row.py") == std::string::npos)
        jmp_test_.Fail(__FILE__, __LINE__, want + ": " + (s.ok() ? "verified" : s.message()));
      ++refused;
    }
  }
  EXPECT_TRUE(refused > 300);
}

}  // namespace
}  // namespace jmp::unit
