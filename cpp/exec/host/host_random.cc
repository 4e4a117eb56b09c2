// RngBitGenerator: StableHLO's rng_bit_generator bit for bit as XLA:CPU computes it (op_kinds.def
// gives the layout). Both generators are counter based, so every block is computed independently and
// the blocks are split over the pool's threads.
#include <cstring>

#include "exec/host/host_kernels.h"
#include "exec/host/host_parallel.h"

namespace jmp::exec::host {

namespace {

uint32_t Lo(uint64_t v) { return static_cast<uint32_t>(v); }
uint32_t Hi(uint64_t v) { return static_cast<uint32_t>(v >> 32); }
uint32_t RotL(uint32_t v, int d) { return (v << d) | (v >> (32 - d)); }

// Threefry-2x32 with 20 rounds (Salmon et al., SC 2011): five groups of four rounds, the key
// schedule injected after each group.
void ThreeFry2x32(uint32_t k0, uint32_t k1, uint32_t& x0, uint32_t& x1) {
  static constexpr int kRot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  const uint32_t ks[3] = {k0, k1, 0x1BD11BDAu ^ k0 ^ k1};
  x0 += ks[0];
  x1 += ks[1];
  for (uint32_t group = 0; group < 5; ++group) {
    for (int r : kRot[group % 2]) {
      x0 += x1;
      x1 = RotL(x1, r) ^ x0;
    }
    x0 += ks[(group + 1) % 3];
    x1 += ks[(group + 2) % 3] + group + 1;
  }
}

// Philox-4x32 with 10 rounds (same paper); the key is raised by the Weyl constants between rounds.
void Philox4x32(uint32_t k0, uint32_t k1, uint32_t x[4]) {
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = uint64_t{0xD2511F53u} * x[0];
    uint64_t p1 = uint64_t{0xCD9E8D57u} * x[2];
    uint32_t y[4] = {Hi(p1) ^ x[1] ^ k0, Lo(p1), Hi(p0) ^ x[3] ^ k1, Lo(p0)};
    std::memcpy(x, y, sizeof(y));
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
}

// Stores `v` truncated to the element width `w` (bytes) at element i.
inline void Put(uint8_t* out, size_t w, int64_t i, uint64_t v) {
  switch (w) {
    case 1: out[i] = static_cast<uint8_t>(v); return;
    case 2: reinterpret_cast<uint16_t*>(out)[i] = static_cast<uint16_t>(v); return;
    case 4: reinterpret_cast<uint32_t*>(out)[i] = static_cast<uint32_t>(v); return;
    default: reinterpret_cast<uint64_t*>(out)[i] = v; return;
  }
}

// Returns the number of blocks used (the counter's advance).
uint64_t ThreeFryBits(uint64_t key, uint64_t counter, const std::vector<int64_t>& shape, size_t w, uint8_t* out) {
  const uint32_t k0 = Lo(key), k1 = Hi(key);
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (w == 8) {  // one block per element, low word first
    ParallelFor(n, GrainFor(64), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        uint64_t c = counter + static_cast<uint64_t>(i);
        uint32_t x0 = Lo(c), x1 = Hi(c);
        ThreeFry2x32(k0, k1, x0, x1);
        Put(out, w, i, uint64_t{x0} | (uint64_t{x1} << 32));
      }
    });
    return static_cast<uint64_t>(n);
  }
  // Narrower bits: one block per pair of elements along the split dimension; block (o, j, k) of the
  // halved shape gives its two words to elements (o, 2j, k) and (o, 2j + 1, k). A scalar is one
  // block's first word.
  if (shape.empty()) {
    uint32_t x0 = Lo(counter), x1 = Hi(counter);
    ThreeFry2x32(k0, k1, x0, x1);
    Put(out, w, 0, x0);
    return 1;
  }
  size_t split = shape.size();
  for (size_t i = 0; i < shape.size() && split == shape.size(); ++i)
    if (shape[i] % 2 == 0) split = i;
  if (split == shape.size()) {
    split = 0;
    for (size_t i = 1; i < shape.size(); ++i)
      if (shape[i] > shape[split]) split = i;
  }
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < split; ++i) outer *= shape[i];
  for (size_t i = split + 1; i < shape.size(); ++i) inner *= shape[i];
  const int64_t d = shape[split], half = (d + 1) / 2, blocks = outer * half * inner;
  ParallelFor(blocks, GrainFor(64), [&](int64_t begin, int64_t end) {
    for (int64_t m = begin; m < end; ++m) {
      uint64_t c = counter + static_cast<uint64_t>(m);
      uint32_t x0 = Lo(c), x1 = Hi(c);
      ThreeFry2x32(k0, k1, x0, x1);
      int64_t k = m % inner, j = (m / inner) % half, o = m / inner / half;
      int64_t first = (o * d + 2 * j) * inner + k;
      Put(out, w, first, x0);
      if (2 * j + 1 < d) Put(out, w, first + inner, x1);
    }
  });
  return static_cast<uint64_t>(blocks);
}

// The counter is 128 bits (lo, hi); block b runs on counter + b. Returns the blocks used.
uint64_t PhiloxBits(uint64_t key, uint64_t lo, uint64_t hi, int64_t n, size_t w, uint8_t* out) {
  const uint32_t k0 = Lo(key), k1 = Hi(key);
  const int64_t per_block = w == 8 ? 2 : 4;
  const int64_t blocks = (n + per_block - 1) / per_block;
  ParallelFor(blocks, GrainFor(64), [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      uint64_t c_lo = lo + static_cast<uint64_t>(b);
      uint64_t c_hi = hi + (c_lo < lo ? 1 : 0);
      uint32_t x[4] = {Lo(c_lo), Hi(c_lo), Lo(c_hi), Hi(c_hi)};
      Philox4x32(k0, k1, x);
      if (w == 8) {
        for (int64_t j = 0; j < 2 && 2 * b + j < n; ++j)
          Put(out, w, 2 * b + j, uint64_t{x[2 * j]} | (uint64_t{x[2 * j + 1]} << 32));
      } else {
        for (int64_t j = 0; j < 4 && 4 * b + j < n; ++j) Put(out, w, 4 * b + j, x[j]);
      }
    }
  });
  return static_cast<uint64_t>(blocks);
}

}  // namespace

Status RunRngBitGenerator(const OpArgs& a) {
  const mps::TensorType& state_type = a.InType(0);
  const mps::TensorType& bits_type = a.OutType(1);
  if (state_type.dtype != DType::kU64 || state_type.shape.size() != 1 || state_type.shape[0] < 2 ||
      state_type.shape[0] > 3)
    return a.Unsupported("needs a u64[2] or u64[3] state");
  const size_t w = ByteSize(bits_type.dtype);
  if (!IsUnsignedInt(bits_type.dtype)) return a.Unsupported("needs u8, u16, u32 or u64 bits");
  std::vector<uint64_t> state(static_cast<size_t>(state_type.shape[0]));
  std::memcpy(state.data(), a.in[0], state.size() * sizeof(uint64_t));
  const uint64_t key = state[0];
  if (a.op.Attrs<mps::RngAttrs>().algorithm == mps::RngAlgorithm::kThreeFry) {
    if (state.size() != 2) return a.Unsupported("ThreeFry needs a u64[2] state");
    state[1] += ThreeFryBits(key, state[1], bits_type.shape, w, a.out[1]);
  } else {
    // A two-word state holds only the counter's low word; its high word is the key and is not
    // written back, as XLA does.
    uint64_t lo = state[1], hi = state.size() == 3 ? state[2] : state[0];
    uint64_t used = PhiloxBits(key, lo, hi, bits_type.NumElements(), w, a.out[1]);
    uint64_t new_lo = lo + used;
    state[1] = new_lo;
    if (state.size() == 3) state[2] = hi + (new_lo < lo ? 1 : 0);
  }
  std::memcpy(a.out[0], state.data(), state.size() * sizeof(uint64_t));
  return Status::Ok();
}

}  // namespace jmp::exec::host
