// Writing to a file descriptor with write(2) alone, until every byte is written or an error: what a
// signal handler may call (async-signal-safe), and what leaves nothing in a buffer when the process dies.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstddef>

namespace jmp {

inline void WriteAllToFd(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t w = write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    data += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace jmp
