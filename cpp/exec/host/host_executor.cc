// The host executor: compiles an MPS op graph into a plan once (buffer sizes, constants), then runs
// it with every intermediate in one per-run arena, so several threads can run one executable at once.
#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>

#include "exec/executor.h"
#include "exec/host/host_kernels.h"
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

constexpr size_t kAlign = 64;

size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Device buffers come from a cache of freed blocks in size classes (four per power of two), as GPU
// allocators do: a training step frees and allocates the same sizes every step, and fresh large
// blocks would come from mmap and fault in every page again. At most kMaxCachedBytes stay cached.
class BlockCache {
 public:
  static constexpr size_t kMaxCachedBytes = size_t{512} << 20;

  static size_t SizeClass(size_t n) {
    if (n <= 256) return AlignUp(n);
    size_t top = size_t{1} << (63 - __builtin_clzll(static_cast<unsigned long long>(n - 1)));  // < n <= 2 top
    size_t step = top / 4;
    return (n + step - 1) / step * step;
  }
  uint8_t* Take(size_t cls) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(cls);
      if (it != free_.end()) {
        uint8_t* p = it->second;
        free_.erase(it);
        cached_ -= cls;
        return p;
      }
    }
    return static_cast<uint8_t*>(std::aligned_alloc(kAlign, cls));
  }
  void Give(uint8_t* p, size_t cls) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cached_ + cls <= kMaxCachedBytes) {
        free_.emplace(cls, p);
        cached_ += cls;
        return;
      }
    }
    std::free(p);
  }
  ~BlockCache() {
    for (auto& [cls, p] : free_) std::free(p);
  }

 private:
  std::mutex mu_;
  std::multimap<size_t, uint8_t*> free_;
  size_t cached_ = 0;
};

class HostMemory : public DeviceMemory {
 public:
  HostMemory(std::shared_ptr<BlockCache> cache, size_t size) : cache_(std::move(cache)), size_(size) {
    if (size_) {
      cls_ = BlockCache::SizeClass(size_);
      data_ = cache_->Take(cls_);
    }
  }
  ~HostMemory() override {
    if (data_) cache_->Give(data_, cls_);
  }
  bool ok() const { return size_ == 0 || data_ != nullptr; }
  void* data() override { return data_; }
  size_t size() const override { return size_; }

 private:
  std::shared_ptr<BlockCache> cache_;
  uint8_t* data_ = nullptr;
  size_t size_, cls_ = 0;
};

class ArenaPool;

// Where each value of a graph lives during a run.
struct Plan {
  const mps::Graph* graph = nullptr;
  std::vector<int64_t> arena_offset;   // per value: offset in the arena, or -1
  std::vector<int> input_index;        // per value: index into the run's inputs, or -1
  // Values computed once at compile time (constants and everything derived only from them).
  std::vector<int64_t> folded_offset;  // per value: offset in `folded`, or -1
  std::vector<uint8_t> folded_op;      // per op: 1 when its outputs are folded
  // Reshapes and reinterpretations are views: their output reads the input's bytes, no copy.
  std::vector<int> alias_of;           // per value: the value whose storage it shares, or -1
  std::vector<uint8_t> view_op;        // per op: 1 when it is such a view (skipped at run time)
  std::vector<std::array<int, 2>> matmul_source;  // per op: a MatMul operand read untransposed, or -1
  std::vector<uint8_t> skipped_op;     // per op: 1 for a Transpose every reader of which reads its source
  // Per input p: the ScatterND/ScatterAlongAxis that is p's only reader and makes output p, or -1. In a
  // while body that scatter may write straight into p's buffer (RunWhile). Per op: the inverse.
  std::vector<int> in_place_carry_op;
  std::vector<int> in_place_op_input;
  std::vector<uint8_t> folded;
  size_t arena_bytes = 0;
  std::vector<std::unique_ptr<Plan>> subplans;  // per op with subgraphs: the op's plans, flattened
  std::vector<size_t> subplan_first;            // per op: index of its first subplan
  std::unique_ptr<ArenaPool, void (*)(ArenaPool*)> arenas{nullptr, nullptr};
};

ArenaPool* NewArenaPool();

void DeleteArenaPool(ArenaPool* p);
void FoldConstants(Plan& plan);

// A MatMul operand made by a Transpose of its last two dims is read untransposed (BLAS transposes),
// and the Transpose is skipped when nothing else reads its result.
void FoldMatMulTransposes(Plan& plan, const std::vector<int>& producer, const std::vector<int>& uses) {
  const mps::Graph& g = *plan.graph;
  plan.matmul_source.assign(g.ops.size(), {-1, -1});
  std::vector<int> folded_uses(g.values.size(), 0);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const mps::Op& op = g.ops[i];
    if (op.kind != mps::OpKind::kMatMul || plan.folded_op[i] || op.inputs.size() != 2) continue;
    if (g.type(op.outputs[0]).dtype != DType::kF32) continue;
    for (size_t j = 0; j < 2; ++j) {
      int p = producer[static_cast<size_t>(op.inputs[j])];
      if (p < 0 || plan.folded_op[static_cast<size_t>(p)]) continue;
      const mps::Op& t = g.ops[static_cast<size_t>(p)];
      size_t r = t.axes.size();
      if (t.kind != mps::OpKind::kTranspose || r < 2 || g.type(t.inputs[0]).shape.size() != r) continue;
      bool swap_last_two = t.axes[r - 2] == static_cast<int64_t>(r - 1) && t.axes[r - 1] == static_cast<int64_t>(r - 2);
      for (size_t d = 0; d + 2 < r; ++d) swap_last_two &= t.axes[d] == static_cast<int64_t>(d);
      if (!swap_last_two) continue;
      plan.matmul_source[i][j] = t.inputs[0];
      ++folded_uses[static_cast<size_t>(op.inputs[j])];
    }
  }
  std::vector<uint8_t> is_output(g.values.size(), 0);
  for (int v : g.outputs) is_output[static_cast<size_t>(v)] = 1;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const mps::Op& op = g.ops[i];
    if (op.kind != mps::OpKind::kTranspose || op.outputs.size() != 1) continue;
    size_t v = static_cast<size_t>(op.outputs[0]);
    if (folded_uses[v] > 0 && folded_uses[v] == uses[v] && !is_output[v]) plan.skipped_op[i] = 1;
  }
}

void FindInPlaceCarries(Plan& plan, const std::vector<int>& uses) {
  const mps::Graph& g = *plan.graph;
  plan.in_place_carry_op.assign(g.inputs.size(), -1);
  plan.in_place_op_input.assign(g.ops.size(), -1);
  std::vector<int> as_output(g.values.size(), 0);
  for (int v : g.outputs) ++as_output[static_cast<size_t>(v)];
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const mps::Op& op = g.ops[i];
    if ((op.kind != mps::OpKind::kScatterND && op.kind != mps::OpKind::kScatterAlongAxis) || op.inputs.size() != 3 ||
        plan.folded_op[i])
      continue;
    int data = op.inputs[0], out = op.outputs[0];
    int p = plan.input_index[static_cast<size_t>(data)];
    if (p < 0 || static_cast<size_t>(p) >= g.outputs.size() || g.outputs[static_cast<size_t>(p)] != out) continue;
    if (uses[static_cast<size_t>(data)] != 1 || as_output[static_cast<size_t>(data)] != 0 || uses[static_cast<size_t>(out)] != 0 ||
        as_output[static_cast<size_t>(out)] != 1 || g.type(data).ByteSize() != g.type(out).ByteSize())
      continue;
    plan.in_place_carry_op[static_cast<size_t>(p)] = static_cast<int>(i);
    plan.in_place_op_input[i] = p;
  }
}

int Root(const Plan& plan, int v) {
  while (plan.alias_of[static_cast<size_t>(v)] >= 0) v = plan.alias_of[static_cast<size_t>(v)];
  return v;
}

// Arena slots by liveness: a value's slot is reused once its last reader has run, so the working set
// stays small enough to live in cache. Best fit among free slots, no splitting.
void AssignArenaSlots(Plan& plan) {
  const mps::Graph& g = *plan.graph;
  const size_t end = g.ops.size();
  std::vector<size_t> last_use(g.values.size(), 0);
  std::vector<uint8_t> needs_slot(g.values.size(), 0);
  auto reads = [&](int v, size_t at) {
    size_t root = static_cast<size_t>(Root(plan, v));
    last_use[root] = std::max(last_use[root], at);
  };
  for (size_t i = 0; i < g.ops.size(); ++i) {
    if (plan.folded_op[i] || plan.view_op[i] || plan.skipped_op[i]) continue;
    const mps::Op& op = g.ops[i];
    for (size_t j = 0; j < op.inputs.size(); ++j) {
      int src = j < 2 ? plan.matmul_source[i][j] : -1;
      reads(src >= 0 ? src : op.inputs[j], i);
    }
    for (int v : op.outputs) {
      needs_slot[static_cast<size_t>(v)] = 1;
      last_use[static_cast<size_t>(v)] = std::max(last_use[static_cast<size_t>(v)], i);
    }
  }
  for (int v : g.outputs) reads(v, end);
  std::multimap<size_t, int64_t> free_slots;  // size -> offset
  std::vector<size_t> slot_size(g.values.size(), 0);
  std::vector<std::vector<int>> release_after(end + 1);
  std::vector<uint8_t> handed_on(g.values.size(), 0);  // its slot now belongs to a later value
  size_t top = 0;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    if (plan.folded_op[i] || plan.view_op[i] || plan.skipped_op[i]) continue;
    const mps::Op& op = g.ops[i];
    // A scatter whose data dies here writes into the data's slot: no copy of the whole operand
    // (dynamic_update_slice in a scan over layers would copy the stacked buffer every step).
    if ((op.kind == mps::OpKind::kScatterND || op.kind == mps::OpKind::kScatterAlongAxis) && op.inputs.size() == 3) {
      size_t data = static_cast<size_t>(Root(plan, op.inputs[0]));
      size_t out = static_cast<size_t>(op.outputs[0]);
      bool sole_reader = last_use[data] == i && Root(plan, op.inputs[1]) != static_cast<int>(data) &&
                         Root(plan, op.inputs[2]) != static_cast<int>(data);
      if (sole_reader && plan.arena_offset[data] >= 0 && !handed_on[data] && slot_size[data] >= g.values[out].ByteSize() &&
          plan.arena_offset[out] < 0) {
        plan.arena_offset[out] = plan.arena_offset[data];
        slot_size[out] = slot_size[data];
        handed_on[data] = 1;
        release_after[last_use[out]].push_back(static_cast<int>(out));
      }
    }
    for (int v : op.outputs) {
      size_t sv = static_cast<size_t>(v);
      if (!needs_slot[sv] || plan.arena_offset[sv] >= 0) continue;
      size_t need = AlignUp(g.values[sv].ByteSize());
      auto it = free_slots.lower_bound(need);
      if (it != free_slots.end() && it->first <= 2 * need + kAlign) {
        plan.arena_offset[sv] = it->second;
        slot_size[sv] = it->first;
        free_slots.erase(it);
      } else {
        plan.arena_offset[sv] = static_cast<int64_t>(top);
        slot_size[sv] = need;
        top += need;
      }
      release_after[last_use[sv]].push_back(v);
    }
    for (int v : release_after[i])
      if (!handed_on[static_cast<size_t>(v)]) free_slots.emplace(slot_size[static_cast<size_t>(v)], plan.arena_offset[static_cast<size_t>(v)]);
  }
  plan.arena_bytes = top;
}

std::unique_ptr<Plan> MakePlan(const mps::Graph& g) {
  auto plan = std::make_unique<Plan>();
  plan->graph = &g;
  plan->arena_offset.assign(g.values.size(), -1);
  plan->input_index.assign(g.values.size(), -1);
  for (size_t i = 0; i < g.inputs.size(); ++i) plan->input_index[static_cast<size_t>(g.inputs[i])] = static_cast<int>(i);
  plan->arenas = {NewArenaPool(), DeleteArenaPool};
  for (const mps::Op& op : g.ops) {
    plan->subplan_first.push_back(plan->subplans.size());
    for (const mps::Graph& sub : op.subgraphs) plan->subplans.push_back(MakePlan(sub));
  }
  FoldConstants(*plan);
  std::vector<int> producer(g.values.size(), -1), uses(g.values.size(), 0);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    for (int v : g.ops[i].outputs) producer[static_cast<size_t>(v)] = static_cast<int>(i);
    for (int v : g.ops[i].inputs) ++uses[static_cast<size_t>(v)];
  }
  plan->alias_of.assign(g.values.size(), -1);
  plan->view_op.assign(g.ops.size(), 0);
  plan->skipped_op.assign(g.ops.size(), 0);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const mps::Op& op = g.ops[i];
    bool view = op.kind == mps::OpKind::kReshape || op.kind == mps::OpKind::kIdentity ||
                op.kind == mps::OpKind::kReinterpretCast;
    if (!view || plan->folded_op[i] || op.inputs.size() != 1 || op.outputs.size() != 1) continue;
    if (g.type(op.inputs[0]).ByteSize() != g.type(op.outputs[0]).ByteSize()) continue;
    plan->alias_of[static_cast<size_t>(op.outputs[0])] = op.inputs[0];
    plan->view_op[i] = 1;
  }
  FindInPlaceCarries(*plan, uses);
  FoldMatMulTransposes(*plan, producer, uses);
  AssignArenaSlots(*plan);
  return plan;
}

uint8_t* ValuePtr(const Plan& plan, uint8_t* arena, const std::vector<const uint8_t*>& inputs, int v) {
  while (plan.alias_of[static_cast<size_t>(v)] >= 0) v = plan.alias_of[static_cast<size_t>(v)];
  int64_t folded = plan.folded_offset[static_cast<size_t>(v)];
  if (folded >= 0) return const_cast<uint8_t*>(plan.folded.data()) + folded;
  int in = plan.input_index[static_cast<size_t>(v)];
  if (in >= 0) return const_cast<uint8_t*>(inputs[static_cast<size_t>(in)]);
  return arena + plan.arena_offset[static_cast<size_t>(v)];
}

// `outputs_alias_inputs`: some output is an input's memory (a donated buffer reused).
// writable_carries: the caller (a while loop) lets in-place carries (Plan::in_place_carry_op) write
// into their input buffers, and passes that same buffer as the matching output.
Status ExecutePlan(const Plan& plan, const std::vector<const uint8_t*>& inputs, const std::vector<uint8_t*>& outputs,
                   bool outputs_alias_inputs = false, bool writable_carries = false);

// Runs a subgraph with `inputs`, copying its outputs into `outputs`.
Status RunSubgraph(const Plan& plan, const std::vector<const uint8_t*>& inputs, const std::vector<uint8_t*>& outputs) {
  return ExecutePlan(plan, inputs, outputs);
}

Status RunWhile(const OpArgs& a, const Plan& cond, const Plan& body) {
  const mps::Graph& g = a.graph;
  size_t n = a.op.inputs.size();
  const mps::Graph& bg = *body.graph;
  // Carries the body returns unchanged (a scan's stacked inputs and weights) are read straight from
  // the op's input, never copied. Carries the body updates by a scatter into themselves (a scan's
  // stacked outputs) stay in one buffer the body writes in place. The rest live in two buffers
  // swapped each iteration.
  enum class Carry { kSwapped, kPassthrough, kInPlace };
  std::vector<Carry> kind(n, Carry::kSwapped);
  if (bg.inputs.size() == n && bg.outputs.size() == n)
    for (size_t i = 0; i < n; ++i) {
      if (bg.outputs[i] == bg.inputs[i]) kind[i] = Carry::kPassthrough;
      else if (body.in_place_carry_op[i] >= 0) kind[i] = Carry::kInPlace;
    }
  std::vector<std::vector<uint8_t>> buffers[2];
  buffers[0].resize(n);
  buffers[1].resize(n);
  std::vector<int> current(n, 0);
  std::vector<const uint8_t*> ins(n);
  std::vector<uint8_t*> outs(n);
  for (size_t i = 0; i < n; ++i) {
    size_t bytes = g.type(a.op.inputs[i]).ByteSize();
    if (kind[i] == Carry::kPassthrough) {
      ins[i] = a.in[i];
      outs[i] = const_cast<uint8_t*>(a.in[i]);  // ExecutePlan skips an output that is its source
      continue;
    }
    buffers[0][i].assign(a.in[i], a.in[i] + bytes);
    if (kind[i] == Carry::kSwapped) buffers[1][i].resize(bytes);
  }
  uint8_t pred = 0;
  for (;;) {
    for (size_t i = 0; i < n; ++i) {
      if (kind[i] == Carry::kPassthrough) continue;
      uint8_t* now = buffers[current[i]][i].data();
      ins[i] = now;
      outs[i] = kind[i] == Carry::kInPlace ? now : buffers[1 - current[i]][i].data();
    }
    JMP_RETURN_IF_ERROR(RunSubgraph(cond, ins, {&pred}));
    if (!pred) break;
    JMP_RETURN_IF_ERROR(ExecutePlan(body, ins, outs, /*outputs_alias_inputs=*/false, /*writable_carries=*/true));
    for (size_t i = 0; i < n; ++i)
      if (kind[i] == Carry::kSwapped) current[i] = 1 - current[i];
  }
  for (size_t i = 0; i < n; ++i) {
    size_t bytes = g.type(a.op.inputs[i]).ByteSize();
    const uint8_t* final_value = kind[i] == Carry::kPassthrough ? a.in[i] : buffers[current[i]][i].data();
    if (bytes) std::memcpy(a.out[i], final_value, bytes);
  }
  return Status::Ok();
}

Status RunIf(const OpArgs& a, const Plan& then_plan, const Plan& else_plan) {
  bool pred = a.in[0][0] != 0;
  std::vector<const uint8_t*> ins(a.in.begin() + 1, a.in.end());
  return RunSubgraph(pred ? then_plan : else_plan, ins, a.out);
}

Status RunConstant(const OpArgs& a) {
  size_t bytes = a.OutType().ByteSize();
  if (a.op.data.size() != bytes) return Internal("constant has the wrong number of bytes");
  if (bytes) std::memcpy(a.out[0], a.op.data.data(), bytes);
  return Status::Ok();
}

Status RunOp(const OpArgs& a, const Plan& plan, size_t op_index) {
  using K = mps::OpKind;
  switch (a.op.kind) {
    case K::kConstant: return RunConstant(a);
    case K::kCoordinateAlongAxis: return RunCoordinate(a);
    case K::kReshape: case K::kReinterpretCast: return RunCopyLike(a);
#define JMP_MPS_UNARY(Name, macos, selector) case K::k##Name: return RunUnary(a, mps::UnaryOp::k##Name);
#define JMP_MPS_BINARY(Name, macos, primary, secondary) case K::k##Name: return RunBinary(a, mps::BinaryOp::k##Name);
#include "mps/op_kinds.def"
    case K::kSelect: return RunSelect(a);
    case K::kClamp: return RunClamp(a);
    case K::kCast: return RunCast(a);
    case K::kTranspose: return RunTranspose(a);
    case K::kBroadcast: return RunBroadcast(a);
    case K::kSlice: return RunSlice(a);
    case K::kConcat: return RunConcat(a);
    case K::kPad: return RunPad(a);
    case K::kReverse: return RunReverse(a);
    case K::kMatMul: return RunMatMul(a);
    case K::kReductionSum: return RunReduction(a, Reduction::kSum);
    case K::kReductionProduct: return RunReduction(a, Reduction::kProduct);
    case K::kReductionMaximum: return RunReduction(a, Reduction::kMaximum);
    case K::kReductionMinimum: return RunReduction(a, Reduction::kMinimum);
    case K::kReductionAnd: return RunReduction(a, Reduction::kAnd);
    case K::kReductionOr: return RunReduction(a, Reduction::kOr);
    case K::kReductionArgMaximum: case K::kReductionArgMinimum: return RunArgReduction(a);
    case K::kFFT: return RunFFT(a, FFTKind::kComplex);
    case K::kRealToHermiteanFFT: return RunFFT(a, FFTKind::kRealToHermitean);
    case K::kHermiteanToRealFFT: return RunFFT(a, FFTKind::kHermiteanToReal);
    case K::kSort: case K::kArgSort: return RunSort(a);
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
    case K::kMaxPool4D: case K::kAvgPool4D: return RunPool4D(a);
    case K::kMaxPool4DGradient: return RunMaxPool4DGradient(a);
    case K::kWhile: {
      size_t first = plan.subplan_first[op_index];
      return RunWhile(a, *plan.subplans[first], *plan.subplans[first + 1]);
    }
    case K::kIf: {
      size_t first = plan.subplan_first[op_index];
      return RunIf(a, *plan.subplans[first], *plan.subplans[first + 1]);
    }
  }
  return Internal("unknown op kind");
}

// Arenas are reused across runs (a run takes one from the pool, or makes one), so steady-state steps
// neither allocate nor fault in fresh pages.
using Arena = std::unique_ptr<uint8_t[], void (*)(void*)>;

class ArenaPool {
 public:
  Arena Take(size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        Arena a = std::move(free_.back());
        free_.pop_back();
        return a;
      }
    }
    return Arena(bytes ? static_cast<uint8_t*>(std::aligned_alloc(kAlign, AlignUp(bytes))) : nullptr, std::free);
  }
  void Give(Arena a) {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.size() < 4) free_.push_back(std::move(a));
  }

 private:
  std::mutex mu_;
  std::vector<Arena> free_;
};

// Runs, once, every op whose inputs are all known at compile time (splat broadcasts, iotas, constant
// shape ops), keeping the results with the plan; runs then skip those ops.
void FoldConstants(Plan& plan) {
  const mps::Graph& g = *plan.graph;
  plan.folded_offset.assign(g.values.size(), -1);
  plan.folded_op.assign(g.ops.size(), 0);
  std::vector<uint8_t> known(g.values.size(), 0);
  size_t bytes = 0;
  constexpr size_t kMaxFoldedBytes = size_t{64} << 20;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const mps::Op& op = g.ops[i];
    bool all = op.subgraphs.empty();
    for (int v : op.inputs) all &= known[static_cast<size_t>(v)] != 0;
    size_t out_bytes = 0;
    for (int v : op.outputs) out_bytes += AlignUp(g.type(v).ByteSize());
    if (!all || bytes + out_bytes > kMaxFoldedBytes) continue;
    plan.folded_op[i] = 1;
    for (int v : op.outputs) {
      known[static_cast<size_t>(v)] = 1;
      plan.folded_offset[static_cast<size_t>(v)] = static_cast<int64_t>(bytes);
      bytes += AlignUp(g.type(v).ByteSize());
    }
  }
  plan.folded.assign(bytes + kAlign, 0);
  // Offsets are relative to an aligned start inside the vector.
  size_t shift = (kAlign - reinterpret_cast<uintptr_t>(plan.folded.data()) % kAlign) % kAlign;
  for (auto& off : plan.folded_offset)
    if (off >= 0) off += static_cast<int64_t>(shift);
  std::vector<const uint8_t*> no_inputs;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    if (!plan.folded_op[i]) continue;
    const mps::Op& op = g.ops[i];
    bool inputs_folded = true;
    for (int v : op.inputs) inputs_folded &= plan.folded_offset[static_cast<size_t>(v)] >= 0;
    if (!inputs_folded) {
      plan.folded_op[i] = 0;
      for (int v : op.outputs) plan.folded_offset[static_cast<size_t>(v)] = -1;
      continue;
    }
    OpArgs a{op, g, {}, {}};
    for (int v : op.inputs) a.in.push_back(plan.folded.data() + plan.folded_offset[static_cast<size_t>(v)]);
    for (int v : op.outputs) a.out.push_back(plan.folded.data() + plan.folded_offset[static_cast<size_t>(v)]);
    if (!RunOp(a, plan, i).ok()) {  // leave a failing op to fail at run time, with its error
      plan.folded_op[i] = 0;
      for (int v : op.outputs) plan.folded_offset[static_cast<size_t>(v)] = -1;
    }
  }
}

ArenaPool* NewArenaPool() { return new ArenaPool; }
void DeleteArenaPool(ArenaPool* p) { delete p; }

Status ExecutePlan(const Plan& plan, const std::vector<const uint8_t*>& inputs, const std::vector<uint8_t*>& outputs,
                   bool outputs_alias_inputs, bool writable_carries) {
  const mps::Graph& g = *plan.graph;
  if (inputs.size() != g.inputs.size()) return Internal("wrong number of inputs");
  Arena arena = plan.arenas->Take(plan.arena_bytes);
  if (plan.arena_bytes && !arena) return ResourceExhausted("host executor: out of memory");
  struct Return {
    const Plan& plan;
    Arena& arena;
    ~Return() { plan.arenas->Give(std::move(arena)); }
  } give_back{plan, arena};
  const bool profile = ProfilingEnabled();
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const mps::Op& op = g.ops[i];
    OpArgs a{op, g, {}, {}};
    if (plan.folded_op[i] || plan.view_op[i] || plan.skipped_op[i]) continue;
    for (int v : op.inputs) a.in.push_back(ValuePtr(plan, arena.get(), inputs, v));
    for (size_t j = 0; j < 2; ++j)
      if (int src = plan.matmul_source[i][j]; src >= 0) {
        a.in[j] = ValuePtr(plan, arena.get(), inputs, src);
        a.transposed[j] = true;
      }
    for (int v : op.outputs) a.out.push_back(ValuePtr(plan, arena.get(), inputs, v));
    if (writable_carries && plan.in_place_op_input[i] >= 0)
      a.out[0] = const_cast<uint8_t*>(inputs[static_cast<size_t>(plan.in_place_op_input[i])]);
    if (profile) {
      auto start = std::chrono::steady_clock::now();
      JMP_RETURN_IF_ERROR(RunOp(a, plan, i));
      if (op.subgraphs.empty()) RecordOpTime(op, g, std::chrono::steady_clock::now() - start);
      continue;
    }
    JMP_RETURN_IF_ERROR(RunOp(a, plan, i));
  }
  // Ops only read inputs; outputs are written here, last. An output may be an input's memory (a donated
  // buffer reused): a result read from an input (or a view of one) that another output overwrites is
  // staged first.
  const size_t n = g.outputs.size();
  std::vector<const uint8_t*> src(n);
  std::vector<std::vector<uint8_t>> staged;
  for (size_t i = 0; i < n; ++i) src[i] = ValuePtr(plan, arena.get(), inputs, g.outputs[i]);
  if (writable_carries)
    for (size_t i = 0; i < n && i < inputs.size(); ++i)
      if (plan.in_place_carry_op[i] >= 0) src[i] = inputs[i];
  for (size_t i = 0; outputs_alias_inputs && i < n; ++i) {
    size_t bytes = g.type(g.outputs[i]).ByteSize();
    int root = g.outputs[i];
    while (plan.alias_of[static_cast<size_t>(root)] >= 0) root = plan.alias_of[static_cast<size_t>(root)];
    if (!bytes || src[i] == outputs[i] || plan.input_index[static_cast<size_t>(root)] < 0) continue;
    for (size_t j = 0; j < n; ++j) {
      size_t other = g.type(g.outputs[j]).ByteSize();
      if (j == i || !other || src[i] >= outputs[j] + other || outputs[j] >= src[i] + bytes) continue;
      staged.emplace_back(src[i], src[i] + bytes);
      src[i] = staged.back().data();
      break;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    size_t bytes = g.type(g.outputs[i]).ByteSize();
    if (bytes && outputs[i] != src[i]) std::memmove(outputs[i], src[i], bytes);
  }
  return Status::Ok();
}

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

 private:
  std::shared_ptr<BlockCache> blocks_ = std::make_shared<BlockCache>();
};

}  // namespace

}  // namespace host

std::unique_ptr<Executor> CreateHostExecutor() { return std::make_unique<host::HostExecutor>(); }

}  // namespace jmp::exec
