// RngBitGenerator's two block functions against the known-answer vectors published with Random123
// (Salmon et al., SC 2011: Threefry-2x32-20 and Philox-4x32-10), reached through the op's state
// layout: a u64[2] ThreeFry state is (key, counter), a u64[3] Philox state (key, counter low, high).
#include <cstdint>
#include <vector>

#include "mps/op_attrs.h"
#include "unit_tests/host_graph.h"
#include "unit_tests/unit_test.h"

namespace jmp::unit {
namespace {

uint64_t Join(uint32_t lo, uint32_t hi) { return uint64_t{lo} | (uint64_t{hi} << 32); }

// Runs RngBitGenerator once; returns the new state and the bits (as u64 for ThreeFry, u32 for Philox).
StatusOr<std::vector<std::vector<uint8_t>>> Generate(mps::RngAlgorithm algorithm, const std::vector<uint64_t>& state,
                                                     DType bits, std::vector<int64_t> shape) {
  GraphBuilder b;
  int in = b.Input(DType::kU64, {static_cast<int64_t>(state.size())});
  mps::Graph& g = b.mutable_graph();
  mps::Op op;
  op.kind = mps::OpKind::kRngBitGenerator;
  op.inputs = {in};
  op.outputs = {g.AddValue(DType::kU64, {static_cast<int64_t>(state.size())}), g.AddValue(bits, std::move(shape))};
  op.attrs = mps::RngAttrs{algorithm};
  g.outputs = op.outputs;
  g.ops.push_back(std::move(op));
  return RunOnHost(g, {Bytes(state)});
}

JMP_TEST(HostRandom, ThreeFryMatchesKnownAnswers) {
  struct Kat {
    uint32_t ctr[2], key[2], out[2];
  };
  const Kat kats[] = {
      {{0, 0}, {0, 0}, {0x6b200159, 0x99ba4efe}},
      {{0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}, {0x1cb996fc, 0xbb002be7}},
      {{0x243f6a88, 0x85a308d3}, {0x13198a2e, 0x03707344}, {0xc4923a9c, 0x483df7a0}},
  };
  for (const Kat& k : kats) {
    uint64_t counter = Join(k.ctr[0], k.ctr[1]);
    auto r = Generate(mps::RngAlgorithm::kThreeFry, {Join(k.key[0], k.key[1]), counter}, DType::kU64, {1});
    ASSERT_OK(r);
    EXPECT_SAME(Values<uint64_t>(r.value()[1]), (std::vector<uint64_t>{Join(k.out[0], k.out[1])}));
    EXPECT_SAME(Values<uint64_t>(r.value()[0]), (std::vector<uint64_t>{Join(k.key[0], k.key[1]), counter + 1}));
  }
}

JMP_TEST(HostRandom, PhiloxMatchesKnownAnswersAndCarriesIntoTheHighWord) {
  struct Kat {
    uint32_t ctr[4], key[2], out[4];
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) {
    uint64_t key = Join(k.key[0], k.key[1]), lo = Join(k.ctr[0], k.ctr[1]), hi = Join(k.ctr[2], k.ctr[3]);
    auto r = Generate(mps::RngAlgorithm::kPhilox, {key, lo, hi}, DType::kU32, {4});
    ASSERT_OK(r);
    EXPECT_SAME(Values<uint32_t>(r.value()[1]), (std::vector<uint32_t>{k.out[0], k.out[1], k.out[2], k.out[3]}));
    // One block used: the 128-bit counter advances by one (all-ones wraps to zero).
    uint64_t new_lo = lo + 1, new_hi = hi + (new_lo == 0 ? 1 : 0);
    EXPECT_SAME(Values<uint64_t>(r.value()[0]), (std::vector<uint64_t>{key, new_lo, new_hi}));
  }
}

}  // namespace
}  // namespace jmp::unit
