// reduce_window: a prefix scan (cumsum and friends, as JAX emits them), else a pooling window, else
// (several operands, or a body that is no monoid: argmax pooling, subtract, custom bodies) the window
// folded tap by tap: the accumulator starts at init and takes acc = body(acc, x[tap]) for each window
// tap in row-major order, skipping padding and the holes of base dilation (XLA:CPU combines only real
// elements). That is XLA:CPU's order for unpadded windows; with padding it may visit the taps in
// another order, which only a body neither associative nor commutative can tell. Each tap is one
// strided slice of every operand and one application of the body to whole tensors.
#include "lower/lower_families.h"
#include "lower/lower_window_common.h"

namespace jmp::mps {

namespace {

constexpr int64_t kMaxTaps = 4096;

bool PlainScalarBody(const shlo::Block& body, size_t n) {
  if (body.args.size() != 2 * n) return false;
  for (const shlo::Op& op : body.ops)
    if (!op.regions.empty()) return false;
  return true;
}

Status FoldWindow(LowerContext& cx) {
  const shlo::Op& op = cx.op();
  const size_t n = op.operands.size() / 2;
  if (n == 0 || op.operands.size() != 2 * n || op.results.size() != n || op.regions.size() != 1 ||
      op.regions[0].blocks.size() != 1 || !PlainScalarBody(op.regions[0].blocks[0], n))
    return cx.Unsupported("reduce_window body not recognised");
  const shlo::Block& body = op.regions[0].blocks[0];
  std::vector<int> xs(n), inits(n);
  for (size_t i = 0; i < n; ++i) {
    JMP_ASSIGN_OR_RETURN(xs[i], cx.In(i));
    JMP_ASSIGN_OR_RETURN(inits[i], cx.In(n + i));
    if (cx.ShapeOf(xs[i]) != cx.ShapeOf(xs[0]) || !cx.ShapeOf(inits[i]).empty())
      return cx.Unsupported("reduce_window operands of different shapes");
  }
  const Shape shape = cx.ShapeOf(xs[0]);
  const size_t rank = shape.size();
  JMP_ASSIGN_OR_RETURN(WindowAttrs w, ReadWindowAttrs(cx, rank));
  const Shape out = cx.OutType(0).shape;
  if (out.size() != rank) return cx.Unsupported("reduce_window result rank");
  for (size_t i = 0; i < n; ++i)
    if (cx.OutType(i).shape != out) return cx.Unsupported("reduce_window results of different shapes");
  int64_t taps = 1;
  bool empty = false, holes = false;
  std::vector<int64_t> interior(rank);
  for (size_t d = 0; d < rank; ++d) {
    if (w.base_dilations[d] < 1 || w.strides[d] < 1 || w.window_dilations[d] < 1 || w.dims[d] < 0)
      return cx.Unsupported("non-positive window dimensions, strides or dilations in reduce_window");
    interior[d] = w.base_dilations[d] - 1;
    holes |= interior[d] > 0 || w.pad_low[d] > 0 || w.pad_high[d] > 0;
    empty |= w.dims[d] == 0 || out[d] == 0;
    taps *= std::max<int64_t>(w.dims[d], 1);
    if (taps > kMaxTaps) return cx.Unsupported("reduce_window with more than 4096 taps and a general body");
  }
  std::vector<int> acc(n);
  for (size_t i = 0; i < n; ++i) acc[i] = cx.BroadcastTo(inits[i], out);
  if (empty) {
    for (size_t i = 0; i < n; ++i) cx.Bind(i, acc[i]);
    return Status::Ok();
  }
  // Padded operands (any value: those lanes are never combined) and, where padding or base dilation
  // leaves positions that are not elements, a mask of the real ones.
  std::vector<int> padded(n);
  for (size_t i = 0; i < n; ++i) {
    JMP_ASSIGN_OR_RETURN(padded[i],
                         PadGeneral(cx, xs[i], cx.Scalar(cx.DTypeOf(xs[i]), 0), w.pad_low, w.pad_high, interior));
  }
  int mask = -1;
  if (holes) {
    JMP_ASSIGN_OR_RETURN(mask, PadGeneral(cx, cx.Splat(DType::kBool, shape, 1), cx.Scalar(DType::kBool, 0), w.pad_low,
                                          w.pad_high, interior));
  }
  const Shape padded_shape = cx.ShapeOf(padded[0]);
  for (size_t d = 0; d < rank; ++d) {
    int64_t span = (w.dims[d] - 1) * w.window_dilations[d] + 1;
    int64_t expected = padded_shape[d] < span ? 0 : (padded_shape[d] - span) / w.strides[d] + 1;
    if (out[d] != expected) return cx.Unsupported("reduce_window result shape does not match its window");
  }
  std::vector<int64_t> tap(rank, 0);
  for (int64_t t = 0; t < taps; ++t) {
    Shape starts(rank), ends(rank);
    for (size_t d = 0; d < rank; ++d) {
      starts[d] = tap[d] * w.window_dilations[d];
      ends[d] = starts[d] + (out[d] - 1) * w.strides[d] + 1;
    }
    std::vector<int> args = acc;
    for (size_t i = 0; i < n; ++i) args.push_back(cx.Slice(padded[i], starts, ends, w.strides));
    JMP_ASSIGN_OR_RETURN(std::vector<int> next, cx.LowerBlockInline(body, args));
    if (next.size() != n) return cx.Unsupported("reduce_window body returns the wrong number of values");
    int real = mask < 0 ? -1 : cx.Slice(mask, starts, ends, w.strides);
    for (size_t i = 0; i < n; ++i) {
      if (cx.ShapeOf(next[i]) != out || cx.DTypeOf(next[i]) != cx.DTypeOf(acc[i]))
        return cx.Unsupported("reduce_window body changes its accumulator's type");
      acc[i] = real < 0 ? next[i] : cx.Select(real, next[i], acc[i]);
    }
    for (size_t d = rank; d-- > 0;) {  // the next tap, row-major
      if (++tap[d] < w.dims[d]) break;
      tap[d] = 0;
    }
  }
  for (size_t i = 0; i < n; ++i) cx.Bind(i, acc[i]);
  return Status::Ok();
}

Status ReduceWindow(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(bool done, TryLowerCumulative(cx));
  if (done) return Status::Ok();
  JMP_ASSIGN_OR_RETURN(done, TryLowerPooling(cx));
  if (done) return Status::Ok();
  return FoldWindow(cx);
}

}  // namespace

void RegisterReduceWindowRules(std::map<std::string, LowerRule>& r) {
  RegisterRule(r, "stablehlo.reduce_window", &ReduceWindow);
}

}  // namespace jmp::mps
