// Scans (CumulativeX) and sorts (Sort, ArgSort, TopK), along one axis viewed as [outer, n, inner].
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <vector>

#include "exec/host/host_domain.h"
#include "exec/host/host_kernels.h"
#include "exec/host/host_parallel.h"
#include "exec/host/host_types.h"

namespace jmp::exec::host {

namespace {

using Shape = std::vector<int64_t>;
using K = mps::OpKind;

}  // namespace

// ---- scans and sorts, along one axis: viewed as [outer, n, inner].

namespace {

void AxisView(const Shape& shape, int64_t axis, int64_t* outer, int64_t* n, int64_t* inner) {
  *outer = 1;
  *inner = 1;
  for (int64_t d = 0; d < axis; ++d) *outer *= shape[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d) *inner *= shape[d];
  *n = shape[static_cast<size_t>(axis)];
}

}  // namespace

// Sums and products that wrap around for integers (no signed overflow), plain for floats.
template <typename C>
C Wrap(C a, C b, bool add) {
  if constexpr (std::is_integral_v<C> && !std::is_same_v<C, bool>) {
    using UC = std::make_unsigned_t<C>;
    uint64_t r = add ? static_cast<uint64_t>(static_cast<UC>(a)) + static_cast<UC>(b)
                     : static_cast<uint64_t>(static_cast<UC>(a)) * static_cast<UC>(b);
    return static_cast<C>(static_cast<UC>(r));
  } else {
    return add ? a + b : a * b;
  }
}

Status RunCumulative(const OpArgs& a, Reduction how) {
  int64_t outer, n, inner;
  const mps::CumulativeAttrs& at = a.op.Attrs<mps::CumulativeAttrs>();
  AxisView(a.InType(0).shape, at.axis, &outer, &n, &inner);
  const bool exclusive = at.exclusive, reverse = at.reverse;
  if (how == Reduction::kAnd || how == Reduction::kOr) return a.Unsupported("has no cumulative and/or");
  return Dispatch(a.InType(0).dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (!kInDomain<T, K::kCumulativeSum, K::kCumulativeProduct, K::kCumulativeMaximum,
                             K::kCumulativeMinimum>) {
      return OutsideDomain(a);
    } else {
      using N = Num<T>;
      using R = Reduction;
      using C = std::conditional_t<kIsFloat<T>, double, typename N::C>;
      const T* x = reinterpret_cast<const T*>(a.in[0]);
      T* y = reinterpret_cast<T*>(a.out[0]);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t in = 0; in < inner; ++in) {
          C acc = C(0);
          switch (how) {
            case R::kSum:
            case R::kOr: acc = C(0); break;
            case R::kProduct:
            case R::kAnd: acc = C(1); break;
            case R::kMaximum: acc = kIsFloat<T> ? C(-INFINITY) : C(std::numeric_limits<typename N::C>::lowest()); break;
            case R::kMinimum: acc = kIsFloat<T> ? C(INFINITY) : C(std::numeric_limits<typename N::C>::max()); break;
          }
          for (int64_t s = 0; s < n; ++s) {
            int64_t i = reverse ? n - 1 - s : s;
            int64_t at = (o * n + i) * inner + in;
            C v = static_cast<C>(N::Load(x[at]));
            if (exclusive) y[at] = N::Store(static_cast<typename N::C>(acc));
            switch (how) {
              case R::kSum:
              case R::kOr: acc = Wrap<C>(acc, v, true); break;  // kOr, kAnd: refused above
              case R::kProduct:
              case R::kAnd: acc = Wrap<C>(acc, v, false); break;
              case R::kMaximum: acc = (v != v || v > acc) ? v : acc; break;
              case R::kMinimum: acc = (v != v || v < acc) ? v : acc; break;
            }
            if constexpr (kIsInt<T>) acc = static_cast<C>(static_cast<typename N::C>(acc));
            if (!exclusive) y[at] = N::Store(static_cast<typename N::C>(acc));
          }
        }
      return Status::Ok();
    }
  });
}

namespace {

// perm = 0..n-1 in the order of key(i), stably: equal keys keep their index order, ascending or not.
template <typename Key>
void StableOrder(std::vector<int64_t>& perm, bool descending, const Key& key) {
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(),
                   [&](int64_t p, int64_t q) { return descending ? key(q) < key(p) : key(p) < key(q); });
}

}  // namespace

// Stable, ascending or descending; the lowering never passes NaN keys.
Status RunSort(const OpArgs& a) {
  int64_t outer, n, inner;
  const mps::SortAttrs& at = a.op.Attrs<mps::SortAttrs>();
  AxisView(a.InType(0).shape, at.axis, &outer, &n, &inner);
  const bool descending = at.descending;
  bool arg = a.op.kind == K::kArgSort;
  return Dispatch(a.InType(0).dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (!kInDomain<T, K::kSort, K::kArgSort>) {
      return OutsideDomain(a);
    } else {
      using N = Num<T>;
      const T* x = reinterpret_cast<const T*>(a.in[0]);
      std::vector<int64_t> perm(static_cast<size_t>(n));
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t in = 0; in < inner; ++in) {
          StableOrder(perm, descending, [&](int64_t i) { return N::Load(x[(o * n + i) * inner + in]); });
          for (int64_t i = 0; i < n; ++i) {
            int64_t at = (o * n + i) * inner + in;
            if (arg)
              reinterpret_cast<int32_t*>(a.out[0])[at] = static_cast<int32_t>(perm[static_cast<size_t>(i)]);
            else
              reinterpret_cast<T*>(a.out[0])[at] = x[(o * n + perm[static_cast<size_t>(i)]) * inner + in];
          }
        }
      return Status::Ok();
    }
  });
}

// Largest k along the last axis, ties to the smaller index.
Status RunTopK(const OpArgs& a) {
  const Shape& s = a.InType(0).shape;
  if (s.empty()) return a.Unsupported("needs rank >= 1");
  int64_t n = s.back(), k = a.op.Attrs<mps::TopKAttrs>().k, rows = a.InType(0).NumElements() / std::max<int64_t>(n, 1);
  if (k > n || k < 0) return a.Unsupported("has k larger than the axis");
  return Dispatch(a.InType(0).dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (!kInDomain<T, K::kTopK>) {
      return OutsideDomain(a);
    } else {
      using N = Num<T>;
      const T* x = reinterpret_cast<const T*>(a.in[0]);
      T* values = reinterpret_cast<T*>(a.out[0]);
      int32_t* indices = reinterpret_cast<int32_t*>(a.out[1]);
      std::vector<int64_t> perm(static_cast<size_t>(n));
      for (int64_t r = 0; r < rows; ++r) {
        const T* row = x + r * n;
        StableOrder(perm, /*descending=*/true, [&](int64_t i) { return N::Load(row[i]); });
        for (int64_t i = 0; i < k; ++i) {
          values[r * k + i] = row[perm[static_cast<size_t>(i)]];
          indices[r * k + i] = static_cast<int32_t>(perm[static_cast<size_t>(i)]);
        }
      }
      return Status::Ok();
    }
  });
}

}  // namespace jmp::exec::host
