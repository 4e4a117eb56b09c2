// sort: MPSGraph sorts one key with no comparator, so the comparator region is recognised as a
// lexicographic list of keys and the sort becomes stable ascending ArgSort passes from the least
// significant key, every operand then gathered by the final permutation. The forms recognised are
// the ones JAX emits:
//   one key          LT/GT of an operand's two sides (FLOAT, TOTALORDER, SIGNED, UNSIGNED)
//   canonical floats each side behind select(x == 0, 0, x) and select(x != x, NaN, .) (jnp.sort)
//   complex keys     real(x) and imag(x) compared as two keys (jnp.sort of complex64)
//   several keys     or(lt(k0), and(eq(k0), <rest>)) (lax.sort num_keys > 1, jnp.lexsort)
// Anything else is an error naming the comparator's ops, never a wrong order.
//
// Only ascending ArgSort is used (op_kinds.def: stable): a descending key is made ascending by a
// bitwise not of its (int32 or int64) key, which reverses the order exactly and keeps ties in input order,
// as XLA's stable sort with a GT comparator does.
#include <cmath>
#include <cstring>
#include <map>
#include <optional>

#include "lower/lower_elementwise.h"
#include "lower/lower_families.h"
#include "lower/lower_order.h"
#include "support/float16.h"

namespace jmp::mps {

namespace {

enum class Part { kWhole, kReal, kImag };

// One side of a comparison: which operand, which side of the comparator (0: lhs element, 1: rhs),
// which part of a complex value, and the canonicalisation applied before comparing.
struct Term {
  size_t operand = 0;
  size_t side = 0;
  Part part = Part::kWhole;
  bool zeros_equal = false;  // select(x == 0, 0, x): -0.0 compares as +0.0
  bool nans_equal = false;   // select(x != x, NaN, .): every NaN compares as one positive NaN

  bool SameValue(const Term& o) const { return operand == o.operand && part == o.part; }
  bool SameKey(const Term& o) const {
    return SameValue(o) && zeros_equal == o.zeros_equal && nans_equal == o.nans_equal;
  }
};

struct SortKey {
  Term term;
  std::string compare_type;  // "FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED" (or "" when absent)
  bool descending = false;
};

std::string CompareType(const shlo::Op& compare) {
  const shlo::Attr* t = compare.Find("compare_type");
  return t ? t->s : "";
}

class ComparatorMatcher {
 public:
  ComparatorMatcher(LowerContext& cx, const shlo::Block& body) : cx_(cx), body_(body) {
    for (const shlo::Op& op : body.ops)
      for (int r : op.results) producer_[r] = &op;
    for (size_t i = 0; i < body.args.size(); ++i) arg_index_[body.args[i]] = i;
  }

  bool Match(std::vector<SortKey>* keys) const {
    if (body_.ops.empty()) return false;
    const shlo::Op& ret = body_.ops.back();
    if (ret.operands.size() != 1) return false;
    return Lex(ret.operands[0], keys);
  }

 private:
  const shlo::Op* Producer(int v, const char* name) const {
    auto it = producer_.find(v);
    if (it == producer_.end() || it->second->name != name) return nullptr;
    return it->second;
  }

  // The scalar value of a splat float constant: defined in the comparator, or (as JAX's
  // serialisation hoists them) outside it, where the lowering has recorded it.
  std::optional<double> ConstantValue(int v) const {
    const shlo::Op* c = Producer(v, "stablehlo.constant");
    if (!c) {
      if (producer_.count(v) || arg_index_.count(v)) return std::nullopt;
      StatusOr<int> outer = cx_.Value(v);
      double value;
      if (!outer.ok() || !IsFloat(cx_.DTypeOf(*outer)) || !cx_.KnownSplat(*outer, &value)) return std::nullopt;
      return value;
    }
    const shlo::Attr* value = c->Find("value");
    if (!value || value->kind != shlo::Attr::Kind::kTensor || value->data.empty()) return std::nullopt;
    const uint8_t* p = value->data.data();
    size_t size = value->data.size();
    switch (value->type.dtype) {
      case DType::kF64: {
        if (size < 8) return std::nullopt;
        double d;
        std::memcpy(&d, p, 8);
        return d;
      }
      case DType::kF32: {
        if (size < 4) return std::nullopt;
        float f;
        std::memcpy(&f, p, 4);
        return f;
      }
      case DType::kF16:
      case DType::kBF16: {
        if (size < 2) return std::nullopt;
        uint16_t h;
        std::memcpy(&h, p, 2);
        return value->type.dtype == DType::kF16 ? HalfToFloat(h) : BFloat16ToFloat(h);
      }
      default: return std::nullopt;
    }
  }

  // An operand's side, possibly its real or imaginary part: the base of a term.
  bool Base(int v, Term* t) const {
    auto it = arg_index_.find(v);
    if (it == arg_index_.end()) {
      const shlo::Op* part = Producer(v, "stablehlo.real");
      Part p = Part::kReal;
      if (!part) {
        part = Producer(v, "stablehlo.imag");
        p = Part::kImag;
      }
      if (!part || part->operands.size() != 1) return false;
      it = arg_index_.find(part->operands[0]);
      if (it == arg_index_.end()) return false;
      t->part = p;
    }
    t->operand = it->second / 2;
    t->side = it->second % 2;
    return true;
  }

  // A term: a base, or a base behind JAX's canonicalising selects (each verified, so no other
  // select is mistaken for one).
  bool TermOf(int v, Term* t, int depth = 0) const {
    if (Base(v, t)) return true;
    const shlo::Op* sel = Producer(v, "stablehlo.select");
    if (!sel || sel->operands.size() != 3 || depth > 2) return false;
    const shlo::Op* pred = Producer(sel->operands[0], "stablehlo.compare");
    std::optional<double> replacement = ConstantValue(sel->operands[1]);
    if (!pred || pred->operands.size() != 2 || !replacement) return false;
    const shlo::Attr* dir = pred->Find("comparison_direction");
    if (!dir) return false;
    Term inner;
    if (!TermOf(sel->operands[2], &inner, depth + 1)) return false;
    Term tested;
    if (!Base(pred->operands[0], &tested) || !tested.SameValue(inner) || tested.side != inner.side) return false;
    if (dir->s == "NE" && pred->operands[1] == pred->operands[0] && std::isnan(*replacement) && !inner.nans_equal) {
      inner.nans_equal = true;  // x != x selects NaN
    } else if (dir->s == "EQ" && *replacement == 0 && !std::signbit(*replacement) && !inner.zeros_equal) {
      std::optional<double> zero = ConstantValue(pred->operands[1]);
      if (!zero || *zero != 0) return false;
      inner.zeros_equal = true;  // x == 0 (true for -0.0 too) selects +0.0
    } else {
      return false;
    }
    *t = inner;
    return true;
  }

  // compare(direction) of one key's two sides. `equal` asks for EQ; else LT or GT (ascending or
  // descending depending on which side is on the left).
  bool Compare(int v, bool equal, SortKey* key) const {
    const shlo::Op* p = Producer(v, "stablehlo.compare");
    if (!p || p->operands.size() != 2) return false;
    const shlo::Attr* dir = p->Find("comparison_direction");
    if (!dir) return false;
    Term a, b;
    if (!TermOf(p->operands[0], &a) || !TermOf(p->operands[1], &b)) return false;
    if (!a.SameKey(b) || a.side == b.side) return false;
    key->term = a;
    key->term.side = 0;
    key->compare_type = CompareType(*p);
    if (equal) return dir->s == "EQ";
    bool flipped = a.side == 1;
    if (dir->s == "LT")
      key->descending = flipped;
    else if (dir->s == "GT")
      key->descending = !flipped;
    else
      return false;
    return true;
  }

  bool Lex(int v, std::vector<SortKey>* keys) const {
    SortKey key;
    if (Compare(v, false, &key)) {
      keys->push_back(key);
      return true;
    }
    const shlo::Op* p = Producer(v, "stablehlo.or");
    if (!p || p->operands.size() != 2) return false;
    for (size_t first = 0; first < 2; ++first) {
      if (!Compare(p->operands[first], false, &key)) continue;
      const shlo::Op* a = Producer(p->operands[1 - first], "stablehlo.and");
      if (!a || a->operands.size() != 2) continue;
      for (size_t eq_first = 0; eq_first < 2; ++eq_first) {
        SortKey eq;
        if (!Compare(a->operands[eq_first], true, &eq) || !eq.term.SameKey(key.term) ||
            eq.compare_type != key.compare_type)
          continue;
        std::vector<SortKey> tail;
        if (!Lex(a->operands[1 - eq_first], &tail)) continue;
        keys->push_back(key);
        keys->insert(keys->end(), tail.begin(), tail.end());
        return true;
      }
    }
    return false;
  }

  LowerContext& cx_;
  const shlo::Block& body_;
  std::map<int, const shlo::Op*> producer_;
  std::map<int, size_t> arg_index_;
};

std::string BodyOps(const shlo::Block& body) {
  std::string s;
  for (const shlo::Op& op : body.ops) s += (s.empty() ? "" : ", ") + op.name;
  return s;
}

// The integers ArgSort orders ascending for one key: signed and unsigned integers as the compare
// type reads them, bools as 0/1, floats by IEEE total order after the comparator's canonicalisation.
// A FLOAT (IEEE) compare is total-order with -0.0 == +0.0; NaNs, which IEEE leaves unordered (XLA's
// result then depends on its sort algorithm), go last.
StatusOr<int> KeyValues(LowerContext& cx, int x, const SortKey& key) {
  if (key.term.part == Part::kReal) x = cx.Emit(OpKind::kRealPart, {x}, RealOf(cx.DTypeOf(x)), cx.ShapeOf(x));
  if (key.term.part == Part::kImag) x = cx.Emit(OpKind::kImaginaryPart, {x}, RealOf(cx.DTypeOf(x)), cx.ShapeOf(x));
  DType t = cx.DTypeOf(x);
  const Shape shape = cx.ShapeOf(x);
  const std::string& ct = key.compare_type;
  int k;
  if (IsComplex(t)) {
    return cx.Unsupported("sort comparator orders complex values directly");
  } else if (t == DType::kBool) {
    k = cx.Cast(x, DType::kI32);
  } else if (IsInteger(t)) {
    k = x;
    if (ct == "UNSIGNED" && IsSignedInt(t)) k = cx.Reinterpret(x, UnsignedOfWidth(BitWidth(t)));
    if (ct == "SIGNED" && IsUnsignedInt(t)) k = cx.Reinterpret(x, SignedOfWidth(BitWidth(t)));
  } else if (IsFloat(t)) {
    if (ct != "TOTALORDER" && ct != "FLOAT" && !ct.empty()) return cx.Unsupported("sort compares floats as " + ct);
    bool ieee = ct != "TOTALORDER";
    if (key.term.zeros_equal || ieee) {
      int zero = cx.Splat(t, shape, 0);
      x = cx.Select(cx.Compare(OpKind::kEqual, x, zero), zero, x);
    }
    if (key.term.nans_equal || ieee) x = cx.Select(Predicate(cx, OpKind::kIsNaN, x), cx.Splat(t, shape, NAN), x);
    k = TotalOrderKey(cx, x);
  } else {
    return cx.Unsupported("sort key of this type");
  }
  k = ToOrdered(cx, k);
  if (key.descending) k = cx.Unary(OpKind::kBitwiseNot, k);
  return k;
}

// Gathers along the axis; complex values part by part (GatherAlongAxis is not listed for complex types).
int GatherAny(LowerContext& cx, int data, int perm, int64_t axis) {
  const DType t = cx.DTypeOf(data);
  if (!IsComplex(t)) return GatherAlongAxis(cx, data, perm, axis);
  const Shape shape = cx.ShapeOf(data);
  int re = GatherAlongAxis(cx, cx.Emit(OpKind::kRealPart, {data}, RealOf(t), shape), perm, axis);
  int im = GatherAlongAxis(cx, cx.Emit(OpKind::kImaginaryPart, {data}, RealOf(t), shape), perm, axis);
  return cx.Emit(OpKind::kComplexFromParts, {re, im}, t, cx.ShapeOf(perm));
}

Status Sort(LowerContext& cx) {
  const shlo::Op& op = cx.op();
  JMP_ASSIGN_OR_RETURN(int64_t axis, cx.IntAttr("dimension"));
  if (op.regions.size() != 1 || op.regions[0].blocks.size() != 1) return cx.Unsupported("sort without a comparator");
  const shlo::Block& body = op.regions[0].blocks[0];
  std::vector<int> inputs;
  for (size_t i = 0; i < op.operands.size(); ++i) {
    JMP_ASSIGN_OR_RETURN(int v, cx.In(i));
    inputs.push_back(v);
  }
  if (inputs.empty() || body.ops.empty() || body.args.size() != 2 * inputs.size() || op.results.size() != inputs.size())
    return cx.Unsupported("malformed sort");
  const Shape shape = cx.ShapeOf(inputs[0]);
  for (int v : inputs)
    if (cx.ShapeOf(v) != shape) return cx.Unsupported("sort operands of different shapes");
  if (axis < 0) axis += static_cast<int64_t>(shape.size());
  if (axis < 0 || axis >= static_cast<int64_t>(shape.size())) return cx.Unsupported("sort dimension out of range");
  std::vector<SortKey> keys;
  ComparatorMatcher matcher(cx, body);
  if (!matcher.Match(&keys)) return cx.Unsupported("sort comparator not recognised (" + BodyOps(body) + ")");
  for (const SortKey& k : keys) {
    if (k.term.operand >= inputs.size()) return cx.Unsupported("sort comparator refers to a missing operand");
    bool complex = IsComplex(cx.DTypeOf(inputs[k.term.operand]));
    if (complex != (k.term.part != Part::kWhole)) return cx.Unsupported("sort comparator takes parts of a real value");
  }
  // A key that is an iota along the axis (jnp.argsort's tie-breaker) is already in order.
  while (keys.size() > 1 && cx.IsIotaAlong(inputs[keys.back().term.operand], axis) && !keys.back().descending)
    keys.pop_back();

  // One integer operand sorted by itself: MPSGraph's sort directly (values only: ties can't show).
  if (inputs.size() == 1 && keys.size() == 1 && IsInteger(cx.DTypeOf(inputs[0]))) {
    const SortKey& k = keys[0];
    DType t = cx.DTypeOf(inputs[0]);
    bool as_is = k.compare_type.empty() || (k.compare_type == "SIGNED") == IsSignedInt(t);
    if (as_is) {
      int wide = ToOrdered(cx, inputs[0]);
      int sorted = cx.Emit(OpKind::kSort, {wide}, cx.DTypeOf(wide), shape, SortAttrs{axis, k.descending});
      cx.Bind(0, FromOrdered(cx, sorted, t));
      return Status::Ok();
    }
  }
  // Stable passes from the least significant key; `perm` maps sorted position -> original index.
  int perm = -1;
  for (size_t k = keys.size(); k-- > 0;) {
    JMP_ASSIGN_OR_RETURN(int key_values, KeyValues(cx, inputs[keys[k].term.operand], keys[k]));
    if (perm >= 0) key_values = GatherAlongAxis(cx, key_values, perm, axis);
    int order = cx.Emit(OpKind::kArgSort, {key_values}, DType::kI32, shape, SortAttrs{axis, /*descending=*/false});
    perm = perm < 0 ? order : GatherAlongAxis(cx, perm, order, axis);
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    int v = inputs[i];
    // An iota operand sorted by the permutation is the permutation itself (jnp.argsort's result).
    bool iota = cx.IsIotaAlong(v, axis) && IsInteger(cx.DTypeOf(v));
    cx.Bind(i, iota ? cx.Cast(perm, cx.DTypeOf(v)) : GatherAny(cx, v, perm, axis));
  }
  return Status::Ok();
}

}  // namespace

void RegisterSortRules(std::map<std::string, LowerRule>& r) { RegisterRule(r, "stablehlo.sort", &Sort); }

}  // namespace jmp::mps
