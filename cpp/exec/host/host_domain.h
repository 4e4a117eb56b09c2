// The rows' dtype domains (op_kinds.def) at compile time, for the host kernels that serve whole rows
// over the type dispatch: such a kernel is instantiated only for the element types one of its rows
// computes on, so its refusal follows the table rather than a list of its own. The verifier refuses
// every other type before any kernel runs; the refusal answers a graph that skipped it.
#pragma once

#include <type_traits>

#include "exec/host/host_kernels.h"
#include "exec/host/host_types.h"
#include "mps/graph.h"
#include "mps/op_domain.h"

namespace jmp::exec::host {

namespace domain_table {

struct Classes {
  int floats;  // as mps::DTypeDomain: 0 none, 1 every float type, 2 f32 and f64, 3 f16, bf16 and f32,
               // 4 f16, f32 and f64
  int ints;    // 0 none, 1 every integer type, 2 int32 and int64
  bool bools, complexes;
};
inline constexpr Classes kRows[] = {
#define JMP_MPS_OP(name, macos, selector, domain) JMP_DOMAIN_##domain(JMP_DOMAIN_FIELDS, ),
#include "mps/op_kinds.def"
};

template <typename T>
constexpr bool Has(mps::OpKind kind) {
  const Classes& c = kRows[static_cast<size_t>(kind)];
  if constexpr (kIsFloat<T>) {
    constexpr bool wide = std::is_same_v<T, float> || std::is_same_v<T, double>;
    constexpr bool narrow = !std::is_same_v<T, double>;
    return c.floats == 1 || (c.floats == 2 && wide) || (c.floats == 3 && narrow) ||
           (c.floats == 4 && !std::is_same_v<T, bf16>);
  } else if constexpr (kIsComplex<T>) {
    return c.complexes;
  } else if constexpr (kIsBool<T>) {
    return c.bools;
  } else {
    constexpr bool wide = std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>;
    return kIsInt<T> && (c.ints == 1 || (c.ints == 2 && wide));
  }
}

}  // namespace domain_table

// Whether element type T is in the domain of any of the rows `kinds`.
template <typename T, mps::OpKind... kinds>
inline constexpr bool kInDomain = (domain_table::Has<T>(kinds) || ...);

// The three float classes, and the others, as the table spells them.
static_assert(kInDomain<f16, mps::OpKind::kMaxPool4D> && !kInDomain<double, mps::OpKind::kMaxPool4D>);
static_assert(kInDomain<double, mps::OpKind::kRealToHermiteanFFT> &&
              !kInDomain<bf16, mps::OpKind::kRealToHermiteanFFT>);
static_assert(kInDomain<int64_t, mps::OpKind::kSort> && kInDomain<double, mps::OpKind::kSort> &&
              !kInDomain<c64, mps::OpKind::kSort, mps::OpKind::kArgSort>);
static_assert(!kInDomain<int8_t, mps::OpKind::kTopK> && !kInDomain<uint32_t, mps::OpKind::kTopK> &&
              !kInDomain<bf16, mps::OpKind::kTopK> && !kInDomain<boolean, mps::OpKind::kTopK>);

inline Status OutsideDomain(const OpArgs& a) { return a.Unsupported("is outside its row's dtype domain"); }

}  // namespace jmp::exec::host
