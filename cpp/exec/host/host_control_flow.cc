// Control flow: While and If run their subgraphs' plans. A while loop keeps its carries in buffers of
// its own, swapped or updated in place each iteration, so the body's plan never copies them back.
#include <algorithm>
#include <cstring>
#include <vector>

#include "exec/host/host_memory.h"
#include "exec/host/host_plan.h"

namespace jmp::exec::host {

namespace {

// Runs a subgraph with `inputs`, copying its outputs into `outputs`.
Status RunSubgraph(const Plan& plan, const std::vector<const uint8_t*>& inputs, const std::vector<uint8_t*>& outputs) {
  return ExecutePlan(plan, inputs, outputs);
}

// Fills `bytes` at dst with the element at src (`elem` bytes): a carry that starts as a splat is written
// once, without reading a whole folded copy of it.
void FillSplat(uint8_t* dst, const uint8_t* src, size_t elem, size_t bytes) {
  bool zero = true;
  for (size_t k = 0; k < elem; ++k) zero &= src[k] == 0;
  if (zero) {
    std::memset(dst, 0, bytes);
    return;
  }
  std::memcpy(dst, src, elem);
  for (size_t done = elem; done < bytes;) {  // doubling copies of what is already filled
    size_t n = std::min(done, bytes - done);
    std::memcpy(dst + done, dst, n);
    done += n;
  }
}

}  // namespace

Status RunWhile(const OpArgs& a, const Plan& cond, const Plan& body, const Plan& outer) {
  const std::vector<uint8_t>& unread = outer.unread;
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
      if (bg.outputs[i] == bg.inputs[i])
        kind[i] = Carry::kPassthrough;
      else if (body.in_place_carry_op[i] >= 0)
        kind[i] = Carry::kInPlace;
    }
  // A carry's value lives in the op's own output buffer (copied in once, so no copy out), and a swapped
  // carry's other buffer comes from the shared block cache (no fresh pages every run of the loop).
  struct Temp {
    uint8_t* p = nullptr;
    size_t cls = 0;
    ~Temp() { SharedBlocks()->Give(p, cls); }
  };
  std::vector<Temp> temps(n);
  std::vector<uint8_t*> buffers[2] = {std::vector<uint8_t*>(n), std::vector<uint8_t*>(n)};
  for (size_t i = 0; i < n; ++i) {
    size_t bytes = g.type(a.op.inputs[i]).ByteSize();
    if (kind[i] == Carry::kPassthrough) continue;
    buffers[0][i] = a.out[i];
    if (bytes && a.out[i] != a.in[i]) {
      if (outer.splat[static_cast<size_t>(Root(outer, a.op.inputs[i]))])
        FillSplat(a.out[i], a.in[i], ByteSize(g.type(a.op.inputs[i]).dtype), bytes);
      else
        std::memmove(a.out[i], a.in[i], bytes);
    }
    if (kind[i] == Carry::kSwapped && bytes) {
      temps[i].cls = BlockCache::SizeClass(bytes);
      temps[i].p = buffers[1][i] = SharedBlocks()->Take(temps[i].cls);
      if (!temps[i].p) return ResourceExhausted("host executor: out of memory for a loop carry");
    }
  }
  // Iteration parity p: swapped carries are read from buffers[p] and written to buffers[1 - p]. The
  // condition and the body are bound once per parity (BoundPlan), so an iteration only runs their ops.
  std::vector<const uint8_t*> ins[2] = {std::vector<const uint8_t*>(n), std::vector<const uint8_t*>(n)};
  std::vector<uint8_t*> outs[2] = {std::vector<uint8_t*>(n), std::vector<uint8_t*>(n)};
  for (int p = 0; p < 2; ++p)
    for (size_t i = 0; i < n; ++i) {
      if (kind[i] == Carry::kPassthrough) {
        ins[p][i] = a.in[i];
        outs[p][i] = const_cast<uint8_t*>(a.in[i]);  // an output that is its source is not copied
        continue;
      }
      const int now = kind[i] == Carry::kSwapped ? p : 0;
      ins[p][i] = buffers[now][i];
      outs[p][i] = kind[i] == Carry::kInPlace ? buffers[now][i] : buffers[1 - now][i];
    }
  uint8_t pred = 0;
  const std::vector<uint8_t*> pred_out{&pred};
  BoundPlan cond_run(cond, /*writable_carries=*/false), body_run(body, /*writable_carries=*/true);
  int p = 0;
  JMP_RETURN_IF_ERROR(BoundPlan::RunLoop(cond_run, body_run, ins, outs, pred_out, pred, &p));
  // A result nothing reads (a scan's weights after the loop) is not copied out: megabytes per step.
  for (size_t i = 0; i < n; ++i) {
    size_t bytes = g.type(a.op.inputs[i]).ByteSize();
    if (!bytes || unread[static_cast<size_t>(a.op.outputs[i])]) continue;
    if (kind[i] == Carry::kPassthrough)
      std::memcpy(a.out[i], a.in[i], bytes);
    else if (kind[i] == Carry::kSwapped && p == 1)
      std::memcpy(a.out[i], buffers[1][i], bytes);
  }
  return Status::Ok();
}

Status RunMetalKernelReference(const OpArgs& a, const Plan& reference) { return RunSubgraph(reference, a.in, a.out); }

Status RunIf(const OpArgs& a, const Plan& then_plan, const Plan& else_plan) {
  bool pred = a.in[0][0] != 0;
  std::vector<const uint8_t*> ins(a.in.begin() + 1, a.in.end());
  return RunSubgraph(pred ? then_plan : else_plan, ins, a.out);
}

}  // namespace jmp::exec::host
