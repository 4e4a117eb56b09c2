// MultiplyAdd (op_kinds.def): a * b + c with only the sum rounded, as XLA:CPU computes a multiply whose
// one reader is an add (LLVM contracts the pair into an FMA instruction). std::fma is correctly rounded
// on every target, and one instruction where the CPU has FMA (JMP_FMA_LOOP).
#include <cmath>

#include "exec/host/host_fastmath.h"
#include "exec/host/host_kernels.h"
#include "exec/host/host_parallel.h"

namespace jmp::exec::host {

namespace {

JMP_FMA_LOOP(FmaF32, (const float* a, const float* b, const float* c, float* y, int64_t begin, int64_t end),
             (a, b, c, y, begin, end), {
               for (int64_t i = begin; i < end; ++i) y[i] = std::fma(a[i], b[i], c[i]);
             })

JMP_FMA_LOOP(FmaF64, (const double* a, const double* b, const double* c, double* y, int64_t begin, int64_t end),
             (a, b, c, y, begin, end), {
               for (int64_t i = begin; i < end; ++i) y[i] = std::fma(a[i], b[i], c[i]);
             })

// A chain of multiply-adds with picked addends (PickedChain), a block of elements at a time: y, w and
// the predicates' masks stay in a cache-resident block across the links, four links to a pass over it,
// where a select and a multiply-add per link, each over a whole tile, were bound by their stores
// (erf_inv's polynomial picks each of its 23 coefficients from three splats). A pick is mask
// arithmetic, which vectorises where a conditional became branches: with c[b] a link's coefficient for
// b = p + 2q, it is c[0] ^ (p & (c[0] ^ c[1])) ^ (q & (c[0] ^ c[2])) ^ (p & q & (c[0] ^ c[1] ^ c[2] ^ c[3])),
// and a guarded link's "applies" mask is made alike. kPreds: how many predicates the picks read. Each
// link rounds as RunMultiplyAdd does.
template <typename Bits>
struct Link {
  Bits c0, d1, d2, d3;
};
template <typename Bits, typename T>
JMP_FASTMATH Link<Bits> LinkOf(const T* c) {
  const Bits c0 = fastmath::BitCast<Bits>(c[0]), c1 = fastmath::BitCast<Bits>(c[1]), c2 = fastmath::BitCast<Bits>(c[2]),
             c3 = fastmath::BitCast<Bits>(c[3]);
  return {c0, Bits(c0 ^ c1), Bits(c0 ^ c2), Bits(c0 ^ c1 ^ c2 ^ c3)};
}
// The link's applies bits as a Link of all-ones or zero words, for the same mask arithmetic.
template <typename Bits>
JMP_FASTMATH Link<Bits> GuardOf(uint8_t applies) {
  const Bits a[4] = {Bits(0) - Bits(applies & 1), Bits(0) - Bits(applies >> 1 & 1), Bits(0) - Bits(applies >> 2 & 1),
                     Bits(0) - Bits(applies >> 3 & 1)};
  return {a[0], Bits(a[0] ^ a[1]), Bits(a[0] ^ a[2]), Bits(a[0] ^ a[1] ^ a[2] ^ a[3])};
}
template <int kPreds, typename Bits>
JMP_FASTMATH Bits Pick(Bits mp, Bits mq, Bits mpq, const Link<Bits>& l) {
  Bits c = l.c0;
  if (kPreds >= 1) c ^= mp & l.d1;
  if (kPreds >= 2) c ^= (mq & l.d2) ^ (mpq & l.d3);
  return c;
}
template <int kPreds, typename T, typename Bits>
JMP_FASTMATH T Step(T acc, T x, Bits mp, Bits mq, Bits mpq, const Link<Bits>& l) {
  return std::fma(acc, x, fastmath::BitCast<T>(Pick<kPreds>(mp, mq, mpq, l)));
}
template <int kPreds, typename T, typename Bits>
JMP_FASTMATH T GuardedStep(T acc, T x, Bits mp, Bits mq, Bits mpq, const Link<Bits>& l, const Link<Bits>& g) {
  const Bits stepped = fastmath::BitCast<Bits>(Step<kPreds>(acc, x, mp, mq, mpq, l)),
             kept = fastmath::BitCast<Bits>(acc);
  return fastmath::BitCast<T>(Bits(kept ^ (Pick<kPreds>(mp, mq, mpq, g) & (kept ^ stepped))));
}

template <int kPreds, typename T, typename Bits>
JMP_FASTMATH void ChainBlocks(const T* a, const T* w, const uint8_t* p, const uint8_t* q, const T* coefficients,
                              const uint8_t* applies, int links, T* y, int64_t n) {
  constexpr int64_t kBlock = 512 / sizeof(T);
  auto applies_at = [&](int j) -> uint8_t { return applies ? applies[j] : uint8_t(15); };
  // Per value of the predicates: the coefficients of the links that apply, in order.
  T packed[4][PickedChain::kMaxLinks];
  int packed_links[4] = {0, 0, 0, 0};
  for (int bits = 0; bits < 4; ++bits)
    for (int j = 0; j < links; ++j)
      if (applies_at(j) >> bits & 1) packed[bits][packed_links[bits]++] = coefficients[4 * j + bits];
  int64_t i0 = 0;
  for (; i0 + kBlock <= n; i0 += kBlock) {
    // A block whose predicates are each all set or all clear (erf_inv: all but a few in a thousand
    // elements take the first set) picks one coefficient per link for all of it: a plain FMA chain.
    uint8_t p_all = 1, p_any = 0, q_all = 1, q_any = 0;
    for (int64_t i = 0; i < kBlock; ++i) {
      const uint8_t pi = kPreds >= 1 && p[i0 + i] != 0, qi = kPreds >= 2 && q[i0 + i] != 0;
      p_all &= pi;
      p_any |= pi;
      q_all &= qi;
      q_any |= qi;
    }
    if (p_all == p_any && q_all == q_any) {
      const int bits = p_all + 2 * q_all;
      const T* c = packed[bits];
      const int m = packed_links[bits];
      T acc[kBlock];
      for (int64_t i = 0; i < kBlock; ++i) acc[i] = a[i0 + i];
      int j = 0;
      for (; j + 4 <= m; j += 4) {
        const T c0 = c[j], c1 = c[j + 1], c2 = c[j + 2], c3 = c[j + 3];
        for (int64_t i = 0; i < kBlock; ++i) {
          const T x = w[i0 + i];
          acc[i] = std::fma(std::fma(std::fma(std::fma(acc[i], x, c0), x, c1), x, c2), x, c3);
        }
      }
      for (; j < m; ++j) {
        const T cj = c[j];
        for (int64_t i = 0; i < kBlock; ++i) acc[i] = std::fma(acc[i], w[i0 + i], cj);
      }
      for (int64_t i = 0; i < kBlock; ++i) y[i0 + i] = acc[i];
      continue;
    }
    T acc[kBlock], x[kBlock];
    Bits mp[kBlock], mq[kBlock], mpq[kBlock];
    for (int64_t i = 0; i < kBlock; ++i) {
      acc[i] = a[i0 + i];
      x[i] = w[i0 + i];
      mp[i] = kPreds >= 1 ? fastmath::SelectMask<Bits>(p[i0 + i]) : Bits(0);
      mq[i] = kPreds >= 2 ? fastmath::SelectMask<Bits>(q[i0 + i]) : Bits(0);
      mpq[i] = mp[i] & mq[i];
    }
    int j = 0;
    while (j < links) {
      if (j + 4 <= links && (applies_at(j) & applies_at(j + 1) & applies_at(j + 2) & applies_at(j + 3)) == 15) {
        const Link<Bits> l0 = LinkOf<Bits>(coefficients + 4 * j), l1 = LinkOf<Bits>(coefficients + 4 * j + 4),
                         l2 = LinkOf<Bits>(coefficients + 4 * j + 8), l3 = LinkOf<Bits>(coefficients + 4 * j + 12);
        for (int64_t i = 0; i < kBlock; ++i) {
          T v = Step<kPreds>(acc[i], x[i], mp[i], mq[i], mpq[i], l0);
          v = Step<kPreds>(v, x[i], mp[i], mq[i], mpq[i], l1);
          v = Step<kPreds>(v, x[i], mp[i], mq[i], mpq[i], l2);
          acc[i] = Step<kPreds>(v, x[i], mp[i], mq[i], mpq[i], l3);
        }
        j += 4;
        continue;
      }
      const Link<Bits> l = LinkOf<Bits>(coefficients + 4 * j);
      if (applies_at(j) == 15) {
        for (int64_t i = 0; i < kBlock; ++i) acc[i] = Step<kPreds>(acc[i], x[i], mp[i], mq[i], mpq[i], l);
      } else {
        const Link<Bits> g = GuardOf<Bits>(applies_at(j));
        for (int64_t i = 0; i < kBlock; ++i) acc[i] = GuardedStep<kPreds>(acc[i], x[i], mp[i], mq[i], mpq[i], l, g);
      }
      ++j;
    }
    for (int64_t i = 0; i < kBlock; ++i) y[i0 + i] = acc[i];
  }
  for (int64_t i = i0; i < n; ++i) {  // the last tile's few
    const Bits mp = kPreds >= 1 ? fastmath::SelectMask<Bits>(p[i]) : Bits(0),
               mq = kPreds >= 2 ? fastmath::SelectMask<Bits>(q[i]) : Bits(0);
    T acc = a[i];
    for (int j = 0; j < links; ++j)
      acc = GuardedStep<kPreds>(acc, w[i], mp, mq, Bits(mp & mq), LinkOf<Bits>(coefficients + 4 * j),
                                GuardOf<Bits>(applies_at(j)));
    y[i] = acc;
  }
}

#define JMP_CHAIN_FMA_LOOP(Name, T, Bits)                                                                     \
  JMP_FMA_LOOP(Name,                                                                                          \
               (const T* a, const T* w, const uint8_t* p, const uint8_t* q, int preds, const T* coefficients, \
                const uint8_t* applies, int links, T* y, int64_t n),                                          \
               (a, w, p, q, preds, coefficients, applies, links, y, n), {                                     \
                 if (preds == 0)                                                                              \
                   ChainBlocks<0, T, Bits>(a, w, p, q, coefficients, applies, links, y, n);                   \
                 else if (preds == 1)                                                                         \
                   ChainBlocks<1, T, Bits>(a, w, p, q, coefficients, applies, links, y, n);                   \
                 else                                                                                         \
                   ChainBlocks<2, T, Bits>(a, w, p, q, coefficients, applies, links, y, n);                   \
               })
JMP_CHAIN_FMA_LOOP(ChainFmaF32, float, uint32_t)
JMP_CHAIN_FMA_LOOP(ChainFmaF64, double, uint64_t)
#undef JMP_CHAIN_FMA_LOOP

template <typename T, typename Loop>
void RunChain(const OpArgs& a, Loop loop) {
  const PickedChain& c = *a.chain;
  loop(reinterpret_cast<const T*>(a.in[0]), reinterpret_cast<const T*>(a.in[1]), c.pred[0], c.pred[1], c.preds,
       static_cast<const T*>(c.coefficients), c.applies, c.links, reinterpret_cast<T*>(a.out[0]), a.Count());
}

template <typename T, typename Loop>
void Run(const OpArgs& a, Loop loop) {
  const T* x = reinterpret_cast<const T*>(a.in[0]);
  const T* y = reinterpret_cast<const T*>(a.in[1]);
  const T* z = reinterpret_cast<const T*>(a.in[2]);
  T* out = reinterpret_cast<T*>(a.out[0]);
  ParallelFor(a.Count(), GrainFor(2), [&](int64_t begin, int64_t end) { loop(x, y, z, out, begin, end); });
}

}  // namespace

Status RunMultiplyAdd(const OpArgs& a) {
  const DType d = a.OutType().dtype;
  if (a.chain && d == DType::kF32)
    RunChain<float>(a, ChainFmaF32);
  else if (a.chain && d == DType::kF64)
    RunChain<double>(a, ChainFmaF64);
  else if (d == DType::kF32)
    Run<float>(a, FmaF32);
  else if (d == DType::kF64)
    Run<double>(a, FmaF64);
  else
    return a.Unsupported("takes float32 or float64 only");
  return Status::Ok();
}

}  // namespace jmp::exec::host
