// Host device memory and per-run arenas: both come from one bounded pool of freed blocks, so steady-state
// training steps neither allocate nor fault in fresh pages, and idle programs hold nothing.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include <sys/mman.h>

#include "exec/block_pool.h"
#include "exec/executor.h"
#include "exec/work_counters.h"

namespace jmp::exec::host {

constexpr size_t kAlign = BlockPool::kAlign;

inline size_t AlignUp(size_t n) { return BlockPool::AlignUp(n); }

// Device buffers and run arenas come from one process-wide pool of host blocks (exec/block_pool.h): at
// most kMaxCachedBytes stay cached; large blocks are mapped and unmapped directly, so no malloc keeps
// them either. Thousands of compiled programs (a test suite) therefore hold no idle memory of their own.
class BlockCache {
 public:
  static constexpr size_t kMaxCachedBytes = size_t{256} << 20;
  static constexpr size_t kMapped = size_t{256} << 10;  // blocks this large are mmap'ed

  static size_t SizeClass(size_t n) { return BlockPool::SizeClass(n); }
  uint8_t* Take(size_t cls) { return static_cast<uint8_t*>(pool_.Take(cls)); }
  void Give(uint8_t* p, size_t cls) { pool_.Give(p, cls); }
  BlockPool& pool() { return pool_; }

 private:
  struct Backend : BlockPool::Backend {
    void* Allocate(size_t cls) override {
      Counters().fresh_allocs.fetch_add(1, std::memory_order_relaxed);
      if (cls >= kMapped) {
        void* p = mmap(nullptr, cls, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return p == MAP_FAILED ? nullptr : p;
      }
      return std::aligned_alloc(kAlign, cls);
    }
    void Release(void* p, size_t cls) override {
      if (cls >= kMapped)
        munmap(p, cls);
      else
        std::free(p);
    }
  };
  Backend backend_;
  BlockPool pool_{&backend_, kMaxCachedBytes};
};

// The one cache every host executor and plan shares (never destroyed: buffers may outlive statics).
inline std::shared_ptr<BlockCache> SharedBlocks() {
  static auto* blocks = new std::shared_ptr<BlockCache>(std::make_shared<BlockCache>());
  return *blocks;
}

class HostMemory : public DeviceMemory {
 public:
  HostMemory(std::shared_ptr<BlockCache> cache, size_t size) : cache_(std::move(cache)), size_(size) {
    if (size_) {
      cls_ = BlockCache::SizeClass(size_);
      data_ = cache_->Take(cls_);
    }
  }
  ~HostMemory() override {
    if (data_) cache_->Give(data_, cls_);
  }
  bool ok() const { return size_ == 0 || data_ != nullptr; }
  void* data() override { return data_; }
  size_t size() const override { return size_; }

 private:
  std::shared_ptr<BlockCache> cache_;
  uint8_t* data_ = nullptr;
  size_t size_, cls_ = 0;
};

// Free arenas a thread keeps for its next run (see ArenaLease).
struct KeptArena {
  uint8_t* p = nullptr;
  size_t cls = 0;
};
struct KeptArenas {
  KeptArena k[2];
  ~KeptArenas() {
    for (KeptArena& x : k)
      if (x.p) SharedBlocks()->Give(x.p, x.cls);
  }
};
inline thread_local KeptArenas kept_arenas;

// A run's arena: a block of the shared cache, held for the run. A loop body takes and gives the same
// size every iteration, so each thread keeps its last two small arenas without a lock.
class ArenaLease {
 public:
  explicit ArenaLease(size_t bytes) : cls_(bytes ? BlockCache::SizeClass(bytes) : 0) {
    if (!cls_) return;
    for (KeptArena& k : kept_arenas.k)
      if (k.p && k.cls == cls_) {
        data_ = std::exchange(k.p, nullptr);
        return;
      }
    data_ = SharedBlocks()->Take(cls_);
  }
  ~ArenaLease() {
    if (!data_) return;
    if (cls_ > kKeptMax) {
      SharedBlocks()->Give(data_, cls_);
      return;
    }
    KeptArena* k = kept_arenas.k;
    for (int i : {1, 0})
      if (!k[i].p) {
        k[i] = {data_, cls_};
        return;
      }
    SharedBlocks()->Give(k[0].p, k[0].cls);  // both full: the older one goes back
    k[0] = k[1];
    k[1] = {data_, cls_};
  }
  ArenaLease(const ArenaLease&) = delete;
  ArenaLease& operator=(const ArenaLease&) = delete;
  uint8_t* get() const { return data_; }
  bool ok() const { return cls_ == 0 || data_ != nullptr; }

 private:
  static constexpr size_t kKeptMax = size_t{1} << 20;
  size_t cls_;
  uint8_t* data_ = nullptr;
};

}  // namespace jmp::exec::host
