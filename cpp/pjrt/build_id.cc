#include "pjrt/build_id.h"

#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

namespace jmp::pjrt {

namespace {

// FNV-1a over the file's 64-bit words (and its tail), then its length: a few milliseconds for the
// plugin's size, once per process.
std::string HashOfFile(const char* path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return {};
  uint64_t h = 1469598103934665603ull, length = 0;
  std::vector<char> chunk(size_t{1} << 20);
  while (f) {
    f.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    const size_t n = static_cast<size_t>(f.gcount());
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t w;
      std::memcpy(&w, chunk.data() + i, 8);
      h = (h ^ w) * 1099511628211ull;
    }
    for (; i < n; ++i) h = (h ^ static_cast<uint8_t>(chunk[i])) * 1099511628211ull;
    length += n;
  }
  h = (h ^ length) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

std::string Compute() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&BuildId), &info) && info.dli_fname) {
    std::string hash = HashOfFile(info.dli_fname);
    if (!hash.empty()) return hash;
  }
  // The binary cannot be read (deleted since it was loaded): the compile time of this file stands in.
  return "t" + std::string(__DATE__ " " __TIME__);
}

}  // namespace

const std::string& BuildId() {
  static const std::string id = Compute();
  return id;
}

}  // namespace jmp::pjrt
