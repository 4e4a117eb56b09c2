// A device's caching allocator, shared by its executors: freed blocks are kept in size classes (four per
// power of two) and handed out again, as GPU allocators do, since a training step frees and allocates the
// same sizes every step and fresh blocks cost a system call and page faults each time. What a block is
// (host memory, a shared-storage MTLBuffer) is the backend's business; the pool only counts and keeps.
//
// Bounds: at most `cache_limit` bytes of free blocks are kept (past that a freed block goes back to the
// system at once); when the backend cannot allocate, every kept block is released and the allocation is
// tried once more (memory pressure); Trim() releases every kept block (an explicit call, or an idle
// program). A block still read or written by device work in flight is not freed here: its owner holds it
// until that work completes (the executors keep each run's memory alive until the run is done).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace jmp::exec {

struct PoolStats {
  int64_t bytes_reserved = 0;       // blocks the pool holds: handed out plus kept free
  int64_t peak_bytes_reserved = 0;  // the most it ever held
  int64_t bytes_cached = 0;         // kept free, ready for reuse
  int64_t fresh_allocs = 0;         // blocks the backend had to make (each a system allocation)
  int64_t reuses = 0;               // blocks served from the kept ones
  int64_t largest_free_block = 0;
};

class BlockPool {
 public:
  struct Backend {
    virtual ~Backend() = default;
    virtual void* Allocate(size_t bytes) = 0;  // null when out of memory
    virtual void Release(void* block, size_t bytes) = 0;
  };

  static constexpr size_t kAlign = 64;
  static size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
  // The size class a request of n bytes is served from: n rounded up to a quarter of its power of two.
  static size_t SizeClass(size_t n) {
    if (n <= 256) return AlignUp(std::max<size_t>(n, 1));
    size_t top = size_t{1} << (63 - __builtin_clzll(static_cast<unsigned long long>(n - 1)));  // < n <= 2 top
    size_t step = top / 4;
    return AlignUp((n + step - 1) / step * step);
  }

  BlockPool(Backend* backend, size_t cache_limit) : backend_(backend), cache_limit_(cache_limit) {}
  ~BlockPool() { Trim(); }
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  // A block of class `cls` (from SizeClass), or null when the system has no memory even after a trim.
  void* Take(size_t cls) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(cls);
      if (it != free_.end()) {
        void* p = it->second;
        free_.erase(it);
        cached_ -= cls;
        ++reuses_;
        return p;
      }
    }
    void* p = backend_->Allocate(cls);
    if (!p) {
      Trim();  // memory pressure: give back what is kept and try again
      p = backend_->Allocate(cls);
      if (!p) return nullptr;
    }
    std::lock_guard<std::mutex> lock(mu_);
    ++fresh_;
    reserved_ += cls;
    peak_ = std::max(peak_, reserved_);
    return p;
  }

  void Give(void* p, size_t cls) {
    if (!p) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cached_ + cls <= cache_limit_) {
        free_.emplace(cls, p);
        cached_ += cls;
        return;
      }
      reserved_ -= cls;
    }
    backend_->Release(p, cls);
  }

  // Releases every kept block; returns the bytes released.
  size_t Trim() {
    std::multimap<size_t, void*> released;
    {
      std::lock_guard<std::mutex> lock(mu_);
      released.swap(free_);
      reserved_ -= cached_;
      cached_ = 0;
    }
    size_t bytes = 0;
    for (auto& [cls, p] : released) {
      backend_->Release(p, cls);
      bytes += cls;
    }
    return bytes;
  }

  PoolStats Stats() {
    std::lock_guard<std::mutex> lock(mu_);
    PoolStats s;
    s.bytes_reserved = static_cast<int64_t>(reserved_);
    s.peak_bytes_reserved = static_cast<int64_t>(peak_);
    s.bytes_cached = static_cast<int64_t>(cached_);
    s.fresh_allocs = fresh_;
    s.reuses = reuses_;
    s.largest_free_block = free_.empty() ? 0 : static_cast<int64_t>(free_.rbegin()->first);
    return s;
  }

 private:
  Backend* backend_;
  const size_t cache_limit_;
  std::mutex mu_;
  std::multimap<size_t, void*> free_;
  size_t cached_ = 0, reserved_ = 0, peak_ = 0;
  int64_t fresh_ = 0, reuses_ = 0;
};

}  // namespace jmp::exec
