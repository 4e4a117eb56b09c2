// Host device memory and per-run arenas: both keep freed blocks for reuse, so steady-state training
// steps neither allocate nor fault in fresh pages. Used by the executor (buffers) and the planner (arenas).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "exec/executor.h"

namespace jmp::exec::host {

constexpr size_t kAlign = 64;

inline size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Device buffers come from a cache of freed blocks in size classes (four per power of two), as GPU
// allocators do: a training step frees and allocates the same sizes every step, and fresh large
// blocks would come from mmap and fault in every page again. At most kMaxCachedBytes stay cached.
class BlockCache {
 public:
  static constexpr size_t kMaxCachedBytes = size_t{512} << 20;

  static size_t SizeClass(size_t n) {
    if (n <= 256) return AlignUp(n);
    size_t top = size_t{1} << (63 - __builtin_clzll(static_cast<unsigned long long>(n - 1)));  // < n <= 2 top
    size_t step = top / 4;
    return (n + step - 1) / step * step;
  }
  uint8_t* Take(size_t cls) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(cls);
      if (it != free_.end()) {
        uint8_t* p = it->second;
        free_.erase(it);
        cached_ -= cls;
        return p;
      }
    }
    return static_cast<uint8_t*>(std::aligned_alloc(kAlign, cls));
  }
  void Give(uint8_t* p, size_t cls) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cached_ + cls <= kMaxCachedBytes) {
        free_.emplace(cls, p);
        cached_ += cls;
        return;
      }
    }
    std::free(p);
  }
  ~BlockCache() {
    for (auto& [cls, p] : free_) std::free(p);
  }

 private:
  std::mutex mu_;
  std::multimap<size_t, uint8_t*> free_;
  size_t cached_ = 0;
};

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

// Arenas are reused across runs (a run takes one from the pool, or makes one), so steady-state steps
// neither allocate nor fault in fresh pages.
using Arena = std::unique_ptr<uint8_t[], void (*)(void*)>;

class ArenaPool {
 public:
  ~ArenaPool() { std::free(fast_.exchange(nullptr)); }
  // A loop body's plan takes and gives its arena every iteration: one lock-free slot serves that case,
  // the locked list the rest (several threads running one executable).
  Arena Take(size_t bytes) {
    if (uint8_t* p = fast_.exchange(nullptr, std::memory_order_acquire)) return Arena(p, std::free);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        Arena a = std::move(free_.back());
        free_.pop_back();
        return a;
      }
    }
    return Arena(bytes ? static_cast<uint8_t*>(std::aligned_alloc(kAlign, AlignUp(bytes))) : nullptr, std::free);
  }
  void Give(Arena a) {
    if (!a) return;
    uint8_t* expected = nullptr;
    if (fast_.compare_exchange_strong(expected, a.get(), std::memory_order_release)) {
      a.release();
      return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.size() < 4) free_.push_back(std::move(a));
  }

 private:
  std::atomic<uint8_t*> fast_{nullptr};
  std::mutex mu_;
  std::vector<Arena> free_;
};

inline ArenaPool* NewArenaPool() { return new ArenaPool; }
inline void DeleteArenaPool(ArenaPool* p) { delete p; }

}  // namespace jmp::exec::host
