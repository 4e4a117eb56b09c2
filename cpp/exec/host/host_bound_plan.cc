// Bound plans (host_plan.h): a while loop runs its condition and body thousands of times over the same
// few buffers, and a loop of scalar bookkeeping spends its time finding those buffers, not computing.
// A binding finds, once, where every op reads and writes and which outputs need a copy; a run then only
// calls kernels. Only the ops that read a block at indices known at run time (a dynamic slice view, a
// carry update made in place) find their buffers again every run.
#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "exec/host/host_memory.h"
#include "exec/host/host_plan.h"
#include "exec/host/host_profile.h"

namespace jmp::exec::host {

namespace {

// Whether value v lives in the same place in every run over the same buffers: it is no block at indices
// read at run time.
bool FixedPlace(const Plan& plan, int v, bool writable_carries) {
  v = Root(plan, v);
  if (int s = plan.slice_view[static_cast<size_t>(v)]; s >= 0) {
    const SliceView& view = plan.slice_views[static_cast<size_t>(s)];
    return view.indices < 0 && FixedPlace(plan, view.data, writable_carries);
  }
  return !(writable_carries && plan.made_in_carry[static_cast<size_t>(v)] >= 0);
}

// Elements above which an op keeps its generic kernel: its dispatch costs little next to its work, and
// the generic kernel may split the work over threads.
constexpr int64_t kSmallElements = 4096;

}  // namespace

struct BoundPlan::Binding {
  Binding(const std::vector<const uint8_t*>& in, const std::vector<uint8_t*>& out, uint8_t* arena, bool writable)
      : inputs(in), outputs(out), memory{arena, inputs, &outputs, writable} {}
  std::vector<const uint8_t*> inputs;
  std::vector<uint8_t*> outputs;
  RunMemory memory;  // over the two above

  struct SmallStep {
    SmallKernel kernel;
    int64_t count;
    const uint8_t* in[3];
    uint8_t* out;
  };
  enum class Kind { kSmall, kOp, kDynamicOp, kFused };
  struct Step {
    Kind kind = Kind::kOp;
    int index = 0;                 // the op, or the fused group
    size_t small = 0;              // kSmall: its index in `small`
    std::unique_ptr<OpArgs> args;  // kOp: bound; kDynamicOp: bound again every run
  };
  std::vector<Step> steps;
  std::vector<SmallStep> small;
  // Every step is small and every copy fixed (and no profile is kept): a run is one tight loop over
  // `small` and `copies`.
  bool fast = true;

  // Outputs not made in place, copied last; `value` >= 0: a source found again every run.
  struct Copy {
    uint8_t* dst;
    const uint8_t* src;
    size_t bytes;
    int value;
  };
  std::vector<Copy> copies;
};

BoundPlan::BoundPlan(const Plan& plan, bool writable_carries)
    : plan_(plan), writable_carries_(writable_carries), profile_(ProfilingEnabled()) {}
BoundPlan::~BoundPlan() = default;

Status BoundPlan::Bind(int b, const std::vector<const uint8_t*>& inputs, const std::vector<uint8_t*>& outputs) {
  const mps::Graph& g = *plan_.graph;
  if (inputs.size() != g.inputs.size() || outputs.size() != g.outputs.size())
    return Internal("wrong number of inputs or outputs");
  if (!arena_) {
    arena_ = std::make_unique<ArenaLease>(plan_.arena_bytes);
    if (!arena_->ok()) return ResourceExhausted("host executor: out of memory");
  }
  const bool writable = writable_carries_;
  auto binding = std::make_unique<Binding>(inputs, outputs, arena_->get(), writable);
  const RunMemory& memory = binding->memory;
  for (int step : plan_.steps) {
    Binding::Step s;
    if (step < 0) {
      s.kind = Binding::Kind::kFused;
      s.index = -1 - step;
      binding->steps.push_back(std::move(s));
      continue;
    }
    const size_t i = static_cast<size_t>(step);
    if (writable && plan_.skipped_scatter[i]) continue;  // its update is made in the carry
    const mps::Op& op = g.ops[i];
    s.index = step;
    bool fixed = true;
    for (size_t j = 0; j < op.inputs.size(); ++j) fixed = fixed && FixedPlace(plan_, ReadRoot(plan_, i, j), writable);
    for (int v : op.outputs) fixed = fixed && FixedPlace(plan_, v, writable);
    if (int v = plan_.matmul_addend[i]; v >= 0) fixed = fixed && FixedPlace(plan_, v, writable);  // read as C
    s.args = std::make_unique<OpArgs>(OpArgs{op, g, {}, {}});
    if (!fixed) {  // its indices are not computed yet
      s.kind = Binding::Kind::kDynamicOp;
      binding->steps.push_back(std::move(s));
      continue;
    }
    BindOperands(plan_, memory, i, *s.args);
    int64_t count = 0;
    SmallKernel kernel = SmallKernelFor(g, op, &count);
    if (kernel && op.inputs.size() <= 3 && g.type(op.outputs[0]).NumElements() <= kSmallElements) {
      Binding::SmallStep small{kernel, count, {nullptr, nullptr, nullptr}, s.args->out[0]};
      for (size_t j = 0; j < op.inputs.size(); ++j) small.in[j] = s.args->in[j];
      s.kind = Binding::Kind::kSmall;
      s.small = binding->small.size();
      s.args.reset();
      binding->small.push_back(small);
    }
    binding->steps.push_back(std::move(s));
  }
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const size_t bytes = plan_.output_bytes[i];
    if (!bytes) continue;
    const uint8_t* src = nullptr;
    int value = -1;
    if (writable && i < inputs.size() && plan_.in_place_carry_op[i] >= 0)
      src = inputs[i];
    else if (FixedPlace(plan_, g.outputs[i], writable))
      src = ValuePtr(plan_, memory, g.outputs[i]);
    else
      value = g.outputs[i];
    if (value >= 0 || src != outputs[i]) binding->copies.push_back({outputs[i], src, bytes, value});
  }
  binding->fast = !profile_;
  for (const Binding::Step& s : binding->steps) binding->fast = binding->fast && s.kind == Binding::Kind::kSmall;
  for (const Binding::Copy& c : binding->copies) binding->fast = binding->fast && c.value < 0;
  bindings_[b] = std::move(binding);
  return Status::Ok();
}

namespace {

inline void RunFast(const BoundPlan::Binding& binding) {
  for (const BoundPlan::Binding::SmallStep& s : binding.small) s.kernel(s.in, s.out, s.count);
  for (const BoundPlan::Binding::Copy& c : binding.copies)
    if (c.src != c.dst) std::memmove(c.dst, c.src, c.bytes);
}

}  // namespace

Status BoundPlan::RunLoop(BoundPlan& cond, BoundPlan& body, const std::vector<const uint8_t*> (&inputs)[2],
                          const std::vector<uint8_t*> (&outputs)[2], const std::vector<uint8_t*>& pred_out,
                          const uint8_t& pred, int* parity) {
  int p = 0;
  for (;;) {
    if (!cond.bindings_[p]) JMP_RETURN_IF_ERROR(cond.Bind(p, inputs[p], pred_out));
    if (cond.bindings_[p]->fast)
      RunFast(*cond.bindings_[p]);
    else
      JMP_RETURN_IF_ERROR(cond.RunSlow(*cond.bindings_[p]));
    if (!pred) break;
    if (!body.bindings_[p]) JMP_RETURN_IF_ERROR(body.Bind(p, inputs[p], outputs[p]));
    if (body.bindings_[p]->fast)
      RunFast(*body.bindings_[p]);
    else
      JMP_RETURN_IF_ERROR(body.RunSlow(*body.bindings_[p]));
    p = 1 - p;
  }
  *parity = p;
  return Status::Ok();
}

Status BoundPlan::RunSlow(Binding& binding) {
  const mps::Graph& g = *plan_.graph;
  const bool profile = profile_;
  auto bind = [&](Binding::Step& s) {
    if (s.kind != Binding::Kind::kDynamicOp) return;
    s.args->in.clear();
    s.args->out.clear();
    BindOperands(plan_, binding.memory, static_cast<size_t>(s.index), *s.args);
  };
  for (size_t k = 0; k < binding.steps.size(); ++k) {
    Binding::Step& s = binding.steps[k];
    if (s.kind == Binding::Kind::kFused) {
      JMP_RETURN_IF_ERROR(RunFused(plan_, plan_.fused[static_cast<size_t>(s.index)], binding.memory));
      continue;
    }
    const size_t i = static_cast<size_t>(s.index);
    const auto start = profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    if (s.kind == Binding::Kind::kSmall) {
      const Binding::SmallStep& small = binding.small[s.small];
      small.kernel(small.in, small.out, small.count);
    } else if (plan_.paired_matmul[i] && s.args && k + 1 < binding.steps.size() && binding.steps[k + 1].args) {
      Binding::Step& second = binding.steps[++k];
      bind(s);
      bind(second);
      JMP_RETURN_IF_ERROR(RunMatMulPair(*s.args, *second.args));
      if (profile) {  // each product is charged half the pair's time
        const auto half =
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start) / 2;
        RecordOpTime(g.ops[i], g, half);
        RecordOpTime(g.ops[static_cast<size_t>(second.index)], g, half);
      }
      continue;
    } else {
      bind(s);
      JMP_RETURN_IF_ERROR(RunOp(*s.args, plan_, i));
    }
    if (profile && g.ops[i].subgraphs.empty()) RecordOpTime(g.ops[i], g, std::chrono::steady_clock::now() - start);
  }
  for (const Binding::Copy& c : binding.copies) {
    const uint8_t* src = c.value >= 0 ? ValuePtr(plan_, binding.memory, c.value) : c.src;
    if (src != c.dst) std::memmove(c.dst, src, c.bytes);
  }
  return Status::Ok();
}

}  // namespace jmp::exec::host
