// The memories a device addresses, as JAX names their kinds: "device", "pinned_host", "unpinned_host"
// (the three XLA's CPU client offers, with the same ids). On a Mac the GPU and the CPU share one unified
// memory, so the three are the same physical memory: the kind is bookkeeping JAX reads back
// (x.sharding.memory_kind, an executable's output kinds), never a different allocator or a transfer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "support/status.h"

namespace jmp::pjrt {

enum class MemorySpace : uint8_t { kDevice = 0, kPinnedHost = 1, kUnpinnedHost = 2 };
inline constexpr size_t kNumMemorySpaces = 3;

// Its kind as JAX spells it ("pinned_host").
std::string_view KindName(MemorySpace space);
// The space of a kind name; InvalidArgument naming the kind and the ones offered for any other.
StatusOr<MemorySpace> SpaceOfKind(std::string_view kind);

}  // namespace jmp::pjrt
