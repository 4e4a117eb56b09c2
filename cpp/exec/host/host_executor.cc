// The host executor: compiles an MPS op graph into a plan once (buffer sizes, constants), then runs
// it with every intermediate in one per-run arena, so several threads can run one executable at once.
// This file sends each op to its kernel (RunOp), runs a whole plan (ExecutePlan) and is the Executor;
// the plan is built in host_plan.cc, buffers and arenas come from host_memory.h.
#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>

#include <unistd.h>

#include "exec/executor.h"
#include "exec/host/host_kernels.h"
#include "exec/host/host_memory.h"
#include "exec/host/host_plan.h"
#include "exec/host/host_profile.h"

namespace jmp::exec {

namespace host {

Status OpArgs::Unsupported(const char* what) const {
  std::string dtypes;
  for (size_t i = 0; i < op.inputs.size(); ++i) dtypes += (i ? ", " : "") + InType(i).ToString();
  return Unimplemented(std::string("host executor: ") + std::string(mps::OpKindName(op.kind)) + " " + what + " (" +
                       dtypes + ")" + (op.location.empty() ? "" : " at " + op.location));
}

namespace {

Status RunConstant(const OpArgs& a) {
  size_t bytes = a.OutType().ByteSize();
  const std::vector<uint8_t>& data = a.op.Attrs<mps::ConstantAttrs>().data;
  if (data.size() != bytes) return Internal("constant has the wrong number of bytes");
  if (bytes) std::memcpy(a.out[0], data.data(), bytes);
  return Status::Ok();
}

}  // namespace

Status RunOp(const OpArgs& a, const Plan& plan, size_t op_index) {
  using K = mps::OpKind;
  switch (a.op.kind) {
    case K::kConstant: return RunConstant(a);
    case K::kCoordinateAlongAxis: return RunCoordinate(a);
    case K::kReshape:
    case K::kReinterpretCast: return RunCopyLike(a);
#define JMP_MPS_UNARY(Name, macos, selector, domain) \
  case K::k##Name: return RunUnary(a, mps::UnaryOp::k##Name);
#define JMP_MPS_BINARY(Name, macos, primary, secondary, domain) \
  case K::k##Name: return RunBinary(a, mps::BinaryOp::k##Name);
#include "mps/op_kinds.def"
    case K::kSelect: return RunSelect(a);
    case K::kClamp: return RunClamp(a);
    case K::kMultiplyAdd: return RunMultiplyAdd(a);
    case K::kCast: return RunCast(a);
    case K::kTranspose: return RunTranspose(a);
    case K::kBroadcast: return RunBroadcast(a);
    case K::kSlice: return RunSlice(a);
    case K::kConcat: return RunConcat(a);
    case K::kPad: return RunPad(a);
    case K::kReverse: return RunReverse(a);
    case K::kMatMul:
    case K::kIntegerMatMul: return RunMatMul(a);
    case K::kReductionSum: return RunReduction(a, Reduction::kSum);
    case K::kReductionProduct: return RunReduction(a, Reduction::kProduct);
    case K::kReductionMaximum: return RunReduction(a, Reduction::kMaximum);
    case K::kReductionMinimum: return RunReduction(a, Reduction::kMinimum);
    case K::kReductionAnd: return RunReduction(a, Reduction::kAnd);
    case K::kReductionOr: return RunReduction(a, Reduction::kOr);
    case K::kReductionArgMaximum:
    case K::kReductionArgMinimum: return RunArgReduction(a);
    case K::kFFT: return RunFFT(a, FFTKind::kComplex);
    case K::kRealToHermiteanFFT: return RunFFT(a, FFTKind::kRealToHermitean);
    case K::kHermiteanToRealFFT: return RunFFT(a, FFTKind::kHermiteanToReal);
    case K::kSort:
    case K::kArgSort: return RunSort(a);
    case K::kTopK: return RunTopK(a);
    case K::kCumulativeSum: return RunCumulative(a, Reduction::kSum);
    case K::kCumulativeProduct: return RunCumulative(a, Reduction::kProduct);
    case K::kCumulativeMaximum: return RunCumulative(a, Reduction::kMaximum);
    case K::kCumulativeMinimum: return RunCumulative(a, Reduction::kMinimum);
    case K::kGatherAlongAxis: return RunGatherAlongAxis(a);
    case K::kGatherND: return RunGatherND(a);
    case K::kScatterND: return RunScatterND(a);
    case K::kScatterAlongAxis: return RunScatterAlongAxis(a);
    case K::kConv2D: return RunConv2D(a);
    case K::kMaxPool4D:
    case K::kAvgPool4D: return RunPool4D(a);
    case K::kMaxPool4DGradient: return RunMaxPool4DGradient(a);
    case K::kRngBitGenerator: return RunRngBitGenerator(a);
    case K::kLapackCholesky: return RunLapackCholesky(a);
    case K::kLapackTriangularSolve: return RunLapackTriangularSolve(a);
    case K::kLapackLu: return RunLapackLu(a);
    case K::kLapackQr: return RunLapackQr(a);
    case K::kLapackHouseholderProduct: return RunLapackHouseholderProduct(a);
    case K::kLapackEigh: return RunLapackEigh(a);
    case K::kLapackSvd: return RunLapackSvd(a);
    case K::kLapackEig: return RunLapackEig(a);
    case K::kLapackTridiagonal: return RunLapackTridiagonal(a);
    case K::kLapackPivotedQr: return RunLapackPivotedQr(a);
    case K::kLapackTridiagonalSolve: return RunLapackTridiagonalSolve(a);
    case K::kWhile: {
      size_t first = plan.subplan_first[op_index];
      return RunWhile(a, *plan.subplans[first], *plan.subplans[first + 1], plan);
    }
    case K::kIf: {
      size_t first = plan.subplan_first[op_index];
      return RunIf(a, *plan.subplans[first], *plan.subplans[first + 1]);
    }
    case K::kPythonCallback: return RunPythonCallback(a);
    case K::kAllReduce: return RunAllReduce(a);
    case K::kMetalKernel: return RunMetalKernelReference(a, *plan.subplans[plan.subplan_first[op_index]]);
  }
  return Internal("unknown op kind");
}

void BindOperands(const Plan& plan, const RunMemory& memory, size_t i, OpArgs& a) {
  const mps::Op& op = a.op;
  for (int v : op.inputs) a.in.push_back(ValuePtr(plan, memory, v));
  for (size_t j = 0; j < 2; ++j)
    if (int src = plan.matmul_source[i][j]; src >= 0) {
      a.in[j] = ValuePtr(plan, memory, src);
      const StridedMatrix& how = plan.matmul_strided[i][j];
      if (how.ld > 0)
        a.strided[j] = &how;
      else
        a.transposed[j] = true;
    }
  for (int v : op.outputs) a.out.push_back(ValuePtr(plan, memory, v));
  a.transposed_out = plan.matmul_transposed_out[i] != 0;
  if (int v = plan.matmul_addend[i]; v >= 0) {
    a.addend = ValuePtr(plan, memory, v);
    a.alpha = plan.matmul_alpha[i];
  }
  if (memory.writable_carries && plan.in_place_op_input[i] >= 0)
    a.out[0] = const_cast<uint8_t*>(memory.inputs[static_cast<size_t>(plan.in_place_op_input[i])]);
}

namespace {

struct OperandLists {
  std::vector<const uint8_t*> in, in2;  // in2, out2: a MatMul pair's second
  std::vector<uint8_t*> out, out2;
};

thread_local std::vector<std::unique_ptr<OperandLists>> t_operand_lists;
thread_local size_t t_plan_depth = 0;

struct ScratchLease {
  OperandLists* lists;
  ScratchLease() {
    if (t_operand_lists.size() <= t_plan_depth) t_operand_lists.push_back(std::make_unique<OperandLists>());
    lists = t_operand_lists[t_plan_depth++].get();
  }
  ~ScratchLease() { --t_plan_depth; }
};

}  // namespace

Status ExecutePlan(const Plan& plan, const std::vector<const uint8_t*>& inputs, const std::vector<uint8_t*>& outputs,
                   bool outputs_alias_inputs, bool writable_carries) {
  const mps::Graph& g = *plan.graph;
  if (inputs.size() != g.inputs.size()) return Internal("wrong number of inputs");
  ArenaLease arena(plan.arena_bytes);
  if (!arena.ok()) return ResourceExhausted("host executor: out of memory");
  const bool profile = ProfilingEnabled();
  // Operand lists move into each op's OpArgs and back; their memory is the thread's, one pair per depth
  // of nested plans, so a loop body running its plan every iteration allocates nothing.
  ScratchLease scratch;
  std::vector<const uint8_t*>& in_list = scratch.lists->in;
  std::vector<uint8_t*>& out_list = scratch.lists->out;
  // Results go straight into their outputs unless an output is an input's memory (a donated buffer),
  // which an op could overwrite while a later op still reads the input.
  const RunMemory memory{arena.get(), inputs, outputs_alias_inputs ? nullptr : &outputs, writable_carries};
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    const int step = plan.steps[s];
    if (step < 0) {
      JMP_RETURN_IF_ERROR(RunFused(plan, plan.fused[static_cast<size_t>(-1 - step)], memory));
      continue;
    }
    const size_t i = static_cast<size_t>(step);
    if (writable_carries && plan.skipped_scatter[i]) continue;  // its update was made in the carry
    const mps::Op& op = g.ops[i];
    in_list.clear();
    out_list.clear();
    OpArgs a{op, g, std::move(in_list), std::move(out_list)};
    BindOperands(plan, memory, i, a);
    Status status;
    const auto start = profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    if (plan.paired_matmul[i]) {
      const size_t j = static_cast<size_t>(plan.steps[++s]);
      scratch.lists->in2.clear();
      scratch.lists->out2.clear();
      OpArgs b{g.ops[j], g, std::move(scratch.lists->in2), std::move(scratch.lists->out2)};
      BindOperands(plan, memory, j, b);
      status = RunMatMulPair(a, b);
      if (profile) {  // each product is charged half the pair's time
        const auto half =
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start) / 2;
        RecordOpTime(op, g, half);
        RecordOpTime(g.ops[j], g, half);
      }
      scratch.lists->in2 = std::move(b.in);
      scratch.lists->out2 = std::move(b.out);
    } else {
      status = RunOp(a, plan, i);
      if (profile && op.subgraphs.empty()) RecordOpTime(op, g, std::chrono::steady_clock::now() - start);
    }
    in_list = std::move(a.in);
    out_list = std::move(a.out);
    JMP_RETURN_IF_ERROR(status);
  }
  // Ops only read inputs; outputs are written here, last. An output may be an input's memory (a donated
  // buffer reused): a result read from an input (or a view of one) that another output overwrites is
  // staged first.
  const size_t n = g.outputs.size();
  std::vector<const uint8_t*>& src = in_list;  // its allocation again
  src.assign(n, nullptr);
  std::vector<std::vector<uint8_t>> staged;
  for (size_t i = 0; i < n; ++i) src[i] = ValuePtr(plan, memory, g.outputs[i]);
  if (writable_carries)
    for (size_t i = 0; i < n && i < inputs.size(); ++i)
      if (plan.in_place_carry_op[i] >= 0) src[i] = inputs[i];
  for (size_t i = 0; outputs_alias_inputs && i < n; ++i) {
    size_t bytes = plan.output_bytes[i];
    const int root = Root(plan, g.outputs[i]);
    if (!bytes || src[i] == outputs[i] || plan.input_index[static_cast<size_t>(root)] < 0) continue;
    for (size_t j = 0; j < n; ++j) {
      size_t other = plan.output_bytes[j];
      if (j == i || !other || src[i] >= outputs[j] + other || outputs[j] >= src[i] + bytes) continue;
      staged.emplace_back(src[i], src[i] + bytes);
      src[i] = staged.back().data();
      break;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    size_t bytes = plan.output_bytes[i];
    if (bytes && outputs[i] != src[i]) std::memmove(outputs[i], src[i], bytes);
  }
  return Status::Ok();
}

namespace {

class HostExecutable : public Executable {
 public:
  explicit HostExecutable(const mps::Graph& graph) : graph_(graph), plan_(MakePlan(graph_)) {}
  Status Run(const std::vector<DeviceMemory*>& inputs, const std::vector<DeviceMemory*>& outputs) override {
    if (inputs.size() != graph_.inputs.size() || outputs.size() != graph_.outputs.size())
      return InvalidArgument("executable called with the wrong number of buffers");
    std::vector<const uint8_t*> in;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i]->size() < graph_.type(graph_.inputs[i]).ByteSize())
        return InvalidArgument("input " + std::to_string(i) + " is smaller than its type");
      in.push_back(static_cast<const uint8_t*>(inputs[i]->data()));
    }
    std::vector<uint8_t*> out;
    std::vector<const DeviceMemory*> sorted_inputs(inputs.begin(), inputs.end());
    std::sort(sorted_inputs.begin(), sorted_inputs.end(), std::less<const DeviceMemory*>());
    bool aliased = false;
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (outputs[i]->size() < graph_.type(graph_.outputs[i]).ByteSize())
        return InvalidArgument("output " + std::to_string(i) + " is smaller than its type");
      out.push_back(static_cast<uint8_t*>(outputs[i]->data()));
      aliased = aliased || std::binary_search(sorted_inputs.begin(), sorted_inputs.end(), outputs[i],
                                              std::less<const DeviceMemory*>());
    }
    return ExecutePlan(*plan_, in, out, aliased);
  }
  bool OutputsMayAliasInputs() const override { return true; }  // ExecutePlan writes outputs last

 private:
  mps::Graph graph_;
  std::unique_ptr<Plan> plan_;
};

class HostExecutor : public Executor {
 public:
  HostExecutor() { ConfigureBlasThreads(); }
  std::string name() const override { return "host"; }
  StatusOr<std::shared_ptr<DeviceMemory>> Allocate(size_t bytes) override {
    auto m = std::make_shared<HostMemory>(blocks_, bytes);
    if (!m->ok()) return ResourceExhausted("could not allocate " + std::to_string(bytes) + " bytes");
    return std::shared_ptr<DeviceMemory>(m);
  }
  StatusOr<std::unique_ptr<Executable>> Compile(const mps::Graph& graph) override {
    return std::unique_ptr<Executable>(new HostExecutable(graph));
  }
  PoolStats MemoryPoolStats() override { return blocks_->pool().Stats(); }
  size_t TrimMemoryPool() override { return blocks_->pool().Trim(); }
  int64_t MemoryLimit() override {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
  }

 private:
  std::shared_ptr<BlockCache> blocks_ = SharedBlocks();
};

}  // namespace

}  // namespace host

std::unique_ptr<Executor> CreateHostExecutor() { return std::make_unique<host::HostExecutor>(); }

}  // namespace jmp::exec
