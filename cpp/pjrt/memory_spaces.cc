#include "pjrt/memory_spaces.h"

#include <array>

namespace jmp::pjrt {

namespace {

constexpr std::array<std::string_view, kNumMemorySpaces> kKinds = {"device", "pinned_host", "unpinned_host"};

}  // namespace

std::string_view KindName(MemorySpace space) { return kKinds[static_cast<size_t>(space)]; }

StatusOr<MemorySpace> SpaceOfKind(std::string_view kind) {
  for (size_t i = 0; i < kNumMemorySpaces; ++i)
    if (kKinds[i] == kind) return static_cast<MemorySpace>(i);
  return InvalidArgument("memory kind '" + std::string(kind) +
                         "' is not one the metal device offers (device, pinned_host, unpinned_host)");
}

}  // namespace jmp::pjrt
