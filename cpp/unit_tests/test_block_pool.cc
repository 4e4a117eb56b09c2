// The device pool (exec/block_pool.h) over a counting backend: size classes, reuse of freed blocks, the
// bound on what is kept, trims, and a retry after giving everything back when the system is out of memory.
#include <cstdlib>
#include <vector>

#include "exec/block_pool.h"
#include "unit_tests/unit_test.h"

namespace jmp::unit {
namespace {

using exec::BlockPool;

// Hands out malloc'ed blocks; fails while more than `refuse_while_live_above` blocks live (if >= 0).
struct CountingBackend : BlockPool::Backend {
  int live = 0, allocated = 0, released = 0;
  int refuse_while_live_above = -1;
  void* Allocate(size_t bytes) override {
    if (refuse_while_live_above >= 0 && live > refuse_while_live_above) return nullptr;
    ++live;
    ++allocated;
    return std::malloc(bytes);
  }
  void Release(void* block, size_t) override {
    --live;
    ++released;
    std::free(block);
  }
};

JMP_TEST(BlockPool, SizeClassesRoundUpByQuarters) {
  EXPECT_SAME(BlockPool::SizeClass(1), size_t{64});
  EXPECT_SAME(BlockPool::SizeClass(200), size_t{256});
  EXPECT_SAME(BlockPool::SizeClass(1000), size_t{1024});
  EXPECT_SAME(BlockPool::SizeClass(1025), size_t{1280});
  EXPECT_SAME(BlockPool::SizeClass(size_t{3} << 20), size_t{3} << 20);
  EXPECT_SAME(BlockPool::SizeClass((size_t{3} << 20) + 1), (size_t{7} << 19));
}

JMP_TEST(BlockPool, FreedBlocksAreReusedAndCounted) {
  CountingBackend backend;
  BlockPool pool(&backend, 1 << 20);
  void* a = pool.Take(1024);
  pool.Give(a, 1024);
  void* b = pool.Take(1024);
  EXPECT_TRUE(a == b);
  EXPECT_SAME(backend.allocated, 1);
  exec::PoolStats s = pool.Stats();
  EXPECT_SAME(s.bytes_reserved, int64_t{1024});
  EXPECT_SAME(s.fresh_allocs, int64_t{1});
  EXPECT_SAME(s.reuses, int64_t{1});
  void* c = pool.Take(2048);  // another class: a fresh block
  EXPECT_SAME(backend.allocated, 2);
  pool.Give(b, 1024);
  pool.Give(c, 2048);
  s = pool.Stats();
  EXPECT_SAME(s.bytes_reserved, int64_t{3072});
  EXPECT_SAME(s.bytes_cached, int64_t{3072});
  EXPECT_SAME(s.peak_bytes_reserved, int64_t{3072});
  EXPECT_SAME(s.largest_free_block, int64_t{2048});
}

JMP_TEST(BlockPool, KeepsNoMoreThanItsBound) {
  CountingBackend backend;
  BlockPool pool(&backend, 4096);
  std::vector<void*> blocks;
  for (int i = 0; i < 3; ++i) blocks.push_back(pool.Take(2048));
  for (void* p : blocks) pool.Give(p, 2048);
  EXPECT_SAME(backend.released, 1);  // the third would exceed 4096 kept bytes
  EXPECT_SAME(pool.Stats().bytes_reserved, int64_t{4096});
}

JMP_TEST(BlockPool, TrimGivesBackKeptBlocksOnly) {
  CountingBackend backend;
  BlockPool pool(&backend, 1 << 20);
  void* used = pool.Take(512);
  pool.Give(pool.Take(4096), 4096);
  EXPECT_SAME(pool.Trim(), size_t{4096});
  EXPECT_SAME(backend.live, 1);
  EXPECT_SAME(pool.Stats().bytes_reserved, int64_t{512});
  pool.Give(used, 512);
}

JMP_TEST(BlockPool, OutOfMemoryTrimsAndRetries) {
  CountingBackend backend;
  BlockPool pool(&backend, 1 << 20);
  pool.Give(pool.Take(4096), 4096);
  pool.Give(pool.Take(8192), 8192);
  backend.refuse_while_live_above = 1;  // the system is out of memory while two blocks live
  void* p = pool.Take(1024);
  EXPECT_TRUE(p != nullptr);
  EXPECT_SAME(backend.live, 1);  // both kept blocks were given back first
  backend.refuse_while_live_above = 0;
  EXPECT_TRUE(pool.Take(1024) == nullptr);  // still out of memory: null, not a crash
  pool.Give(p, 1024);
}

}  // namespace
}  // namespace jmp::unit
