// sort: MPSGraph sorts one key with no comparator, so the comparator region is recognised as a
// lexicographic list of keys (JAX's forms: LT/GT on one operand, TOTALORDER on floats canonicalised
// for -0.0 and NaN, `lt(k0) or (eq(k0) and <rest>)` for several keys). The sort itself is stable
// ArgSort passes from the least significant key, and every operand is gathered by the final
// permutation. A comparator of any other shape is an error, never a wrong order.
#include <cmath>
#include <map>

#include "mps/lower_elementwise.h"
#include "mps/lower_families.h"

namespace jmp::mps {

namespace {

struct SortKey {
  size_t operand = 0;
  bool descending = false;
  bool total_order = false;
  bool canonical = false;  // -0.0 == +0.0 and all NaNs equal (JAX's float canonicalisation)
};

class ComparatorMatcher {
 public:
  explicit ComparatorMatcher(const shlo::Block& body) : body_(body) {
    for (const shlo::Op& op : body.ops)
      for (int r : op.results) producer_[r] = &op;
    for (size_t i = 0; i < body.args.size(); ++i) arg_index_[body.args[i]] = i;
  }

  bool Match(std::vector<SortKey>* keys) {
    const shlo::Op& ret = body_.ops.back();
    if (ret.operands.size() != 1) return false;
    return Lex(ret.operands[0], keys);
  }

 private:
  const shlo::Op* Producer(int v) const {
    auto it = producer_.find(v);
    return it == producer_.end() ? nullptr : it->second;
  }

  // A comparator argument, possibly behind JAX's canonicalising selects: (operand, side).
  bool Side(int v, size_t* operand, size_t* side, bool* canonical) const {
    for (int depth = 0; depth < 8; ++depth) {
      auto it = arg_index_.find(v);
      if (it != arg_index_.end()) {
        *operand = it->second / 2;
        *side = it->second % 2;
        return true;
      }
      const shlo::Op* p = Producer(v);
      if (!p || p->name != "stablehlo.select" || p->operands.size() != 3) return false;
      *canonical = true;
      v = p->operands[2];
    }
    return false;
  }

  bool Compare(int v, const char* want, SortKey* key) const {
    const shlo::Op* p = Producer(v);
    if (!p || p->name != "stablehlo.compare" || p->operands.size() != 2) return false;
    const shlo::Attr* dir = p->Find("comparison_direction");
    const shlo::Attr* type = p->Find("compare_type");
    if (!dir) return false;
    size_t op_a, side_a, op_b, side_b;
    bool canon_a = false, canon_b = false;
    if (!Side(p->operands[0], &op_a, &side_a, &canon_a) || !Side(p->operands[1], &op_b, &side_b, &canon_b)) return false;
    if (op_a != op_b || side_a == side_b) return false;
    key->operand = op_a;
    key->total_order = type && type->s == "TOTALORDER";
    key->canonical = canon_a && canon_b;
    bool flipped = side_a == 1;
    if (std::string(want) == "EQ") return dir->s == "EQ";
    if (dir->s == "LT") key->descending = flipped;
    else if (dir->s == "GT") key->descending = !flipped;
    else return false;
    return true;
  }

  bool Lex(int v, std::vector<SortKey>* keys) {
    SortKey key;
    if (Compare(v, "LT", &key)) {
      keys->push_back(key);
      return true;
    }
    const shlo::Op* p = Producer(v);
    if (!p || p->name != "stablehlo.or" || p->operands.size() != 2) return false;
    for (int first = 0; first < 2; ++first) {
      int less = p->operands[static_cast<size_t>(first)], rest = p->operands[static_cast<size_t>(1 - first)];
      if (!Compare(less, "LT", &key)) continue;
      const shlo::Op* a = Producer(rest);
      if (!a || a->name != "stablehlo.and" || a->operands.size() != 2) continue;
      for (int eq_first = 0; eq_first < 2; ++eq_first) {
        SortKey eq;
        if (!Compare(a->operands[static_cast<size_t>(eq_first)], "EQ", &eq) || eq.operand != key.operand) continue;
        std::vector<SortKey> tail;
        if (!Lex(a->operands[static_cast<size_t>(1 - eq_first)], &tail)) continue;
        keys->push_back(key);
        keys->insert(keys->end(), tail.begin(), tail.end());
        return true;
      }
    }
    return false;
  }

  const shlo::Block& body_;
  std::map<int, const shlo::Op*> producer_;
  std::map<int, size_t> arg_index_;
};

std::string BodyOps(const shlo::Block& body) {
  std::string s;
  for (const shlo::Op& op : body.ops) s += (s.empty() ? "" : ", ") + op.name;
  return s;
}

// The value ArgSort orders for one key: integers as they are, floats by IEEE total order (after
// JAX's canonicalisation when the comparator applies it), bools as 0/1.
int KeyValues(LowerContext& cx, int x, const SortKey& key) {
  DType t = cx.DTypeOf(x);
  const Shape shape = cx.ShapeOf(x);
  if (t == DType::kBool) return cx.Cast(x, DType::kU8);
  if (!IsFloat(t)) return x;
  if (key.canonical) {
    int zero = cx.Splat(t, shape, 0);
    x = cx.Select(cx.Compare(OpKind::kEqual, x, zero), zero, x);
    x = cx.Select(cx.Unary(OpKind::kIsNaN, x), cx.Splat(t, shape, NAN), x);
  }
  return TotalOrderKey(cx, x);
}

Status Sort(LowerContext& cx) {
  const shlo::Op& op = cx.op();
  JMP_ASSIGN_OR_RETURN(int64_t axis, cx.IntAttr("dimension"));
  if (op.regions.size() != 1 || op.regions[0].blocks.size() != 1) return cx.Unsupported("sort without a comparator");
  const shlo::Block& body = op.regions[0].blocks[0];
  std::vector<int> inputs;
  for (size_t i = 0; i < op.operands.size(); ++i) {
    JMP_ASSIGN_OR_RETURN(int v, cx.In(i));
    if (IsComplex(cx.DTypeOf(v))) return cx.Unsupported("sorting complex values");
    inputs.push_back(v);
  }
  if (inputs.empty() || body.ops.empty() || body.args.size() != 2 * inputs.size())
    return cx.Unsupported("malformed sort");
  const Shape shape = cx.ShapeOf(inputs[0]);
  if (axis < 0) axis += static_cast<int64_t>(shape.size());
  if (axis < 0 || axis >= static_cast<int64_t>(shape.size())) return cx.Unsupported("sort dimension out of range");
  std::vector<SortKey> keys;
  ComparatorMatcher matcher(body);
  if (!matcher.Match(&keys)) return cx.Unsupported("sort comparator not recognised (" + BodyOps(body) + ")");
  for (const SortKey& k : keys)
    if (k.operand >= inputs.size()) return cx.Unsupported("sort comparator refers to a missing operand");

  // One integer operand sorted by itself: MPSGraph's sort directly.
  if (inputs.size() == 1 && keys.size() == 1 && IsInteger(cx.DTypeOf(inputs[0]))) {
    Op& s = cx.Emit(OpKind::kSort, {inputs[0]}, cx.DTypeOf(inputs[0]), shape);
    s.axes = {axis};
    s.int_attr = keys[0].descending ? 1 : 0;
    cx.Bind(0, s.outputs[0]);
    return Status::Ok();
  }
  // Stable passes from the least significant key; `perm` maps sorted position -> original index.
  int perm = -1;
  for (size_t k = keys.size(); k-- > 0;) {
    int key_values = KeyValues(cx, inputs[keys[k].operand], keys[k]);
    if (perm >= 0) key_values = GatherAlongAxis(cx, key_values, perm, axis);
    Op& arg = cx.Emit(OpKind::kArgSort, {key_values}, DType::kI32, shape);
    arg.axes = {axis};
    arg.int_attr = keys[k].descending ? 1 : 0;
    int order = arg.outputs[0];
    perm = perm < 0 ? order : GatherAlongAxis(cx, perm, order, axis);
  }
  for (size_t i = 0; i < inputs.size(); ++i) cx.Bind(i, GatherAlongAxis(cx, inputs[i], perm, axis));
  return Status::Ok();
}

}  // namespace

void RegisterSortRules(std::map<std::string, LowerRule>& r) { RegisterRule(r, "stablehlo.sort", &Sort); }

}  // namespace jmp::mps
