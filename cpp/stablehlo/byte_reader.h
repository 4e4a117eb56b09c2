// Bounds-checked reading of MLIR bytecode primitives. Every read names what it was reading and the
// absolute byte offset when it fails; nothing reads past the end.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "support/status.h"

namespace jmp::shlo {

// How deeply the bytecode's regions, attributes and types may nest before the reader refuses the
// input: a bound on the reader's recursion, so that malformed input cannot exhaust the stack.
constexpr int kMaxNesting = 200;

struct Span {
  const uint8_t* data = nullptr;
  size_t size = 0;
};

class ByteReader {
 public:
  // `origin` is the start of the whole artifact: offsets in errors and alignment are relative to it.
  ByteReader(Span span, const uint8_t* origin, std::string what)
      : pos_(span.data), end_(span.data + span.size), origin_(origin), what_(std::move(what)) {}

  bool empty() const { return pos_ == end_; }
  size_t remaining() const { return static_cast<size_t>(end_ - pos_); }
  size_t offset() const { return static_cast<size_t>(pos_ - origin_); }

  Status Error(const std::string& message) const {
    return InvalidArgument("malformed artifact: " + message + " (in " + what_ + " at byte " + std::to_string(offset()) +
                           ")");
  }

  Status Byte(uint8_t* out) {
    if (pos_ == end_) return Error("unexpected end of data");
    *out = *pos_++;
    return Status::Ok();
  }

  Status Bytes(size_t n, Span* out) {
    if (n > remaining())
      return Error("length " + std::to_string(n) + " exceeds the " + std::to_string(remaining()) + " bytes left");
    *out = Span{pos_, n};
    pos_ += n;
    return Status::Ok();
  }

  Status Skip(size_t n) {
    Span ignored;
    return Bytes(n, &ignored);
  }

  // MLIR's prefix varint: the trailing zero bits of the first byte count the extra bytes.
  Status VarInt(uint64_t* out) {
    uint8_t first = 0;
    JMP_RETURN_IF_ERROR(Byte(&first));
    if (first & 1) {
      *out = first >> 1;
      return Status::Ok();
    }
    if (first == 0) {
      Span rest;
      JMP_RETURN_IF_ERROR(Bytes(8, &rest));
      uint64_t v = 0;
      for (int i = 7; i >= 0; --i) v = (v << 8) | rest.data[i];
      *out = v;
      return Status::Ok();
    }
    int extra = 0;
    while (!((first >> extra) & 1)) ++extra;
    Span rest;
    JMP_RETURN_IF_ERROR(Bytes(static_cast<size_t>(extra), &rest));
    uint64_t v = first;
    for (int i = 0; i < extra; ++i) v |= static_cast<uint64_t>(rest.data[i]) << (8 * (i + 1));
    *out = v >> (extra + 1);
    return Status::Ok();
  }

  Status SignedVarInt(int64_t* out) {
    uint64_t v;
    JMP_RETURN_IF_ERROR(VarInt(&v));
    *out = static_cast<int64_t>((v >> 1) ^ (~(v & 1) + 1));
    return Status::Ok();
  }

  Status VarIntWithFlag(uint64_t* out, bool* flag) {
    JMP_RETURN_IF_ERROR(VarInt(out));
    *flag = *out & 1;
    *out >>= 1;
    return Status::Ok();
  }

  // A count about to size an allocation: each element needs at least `min_bytes` more bytes.
  Status Count(uint64_t* out, size_t min_bytes = 1) {
    JMP_RETURN_IF_ERROR(VarInt(out));
    if (min_bytes && *out > remaining() / min_bytes)
      return Error("count " + std::to_string(*out) + " is larger than the data left");
    return Status::Ok();
  }

  Status NulTerminated(std::string_view* out) {
    const void* nul = std::memchr(pos_, 0, remaining());
    if (!nul) return Error("string without terminating NUL");
    const uint8_t* n = static_cast<const uint8_t*>(nul);
    *out = std::string_view(reinterpret_cast<const char*>(pos_), static_cast<size_t>(n - pos_));
    pos_ = n + 1;
    return Status::Ok();
  }

  // A section: id byte (high bit: aligned), varint length, optional alignment padding, payload.
  Status Section(uint8_t* id, Span* payload) {
    uint8_t raw = 0;
    uint64_t length;
    JMP_RETURN_IF_ERROR(Byte(&raw));
    JMP_RETURN_IF_ERROR(VarInt(&length));
    *id = raw & 0x7f;
    if (raw & 0x80) {
      uint64_t alignment;
      JMP_RETURN_IF_ERROR(VarInt(&alignment));
      if (alignment == 0 || (alignment & (alignment - 1)) || alignment > 4096) return Error("bad section alignment");
      while (offset() % alignment) {
        uint8_t pad;
        JMP_RETURN_IF_ERROR(Byte(&pad));
        if (pad != 0xCB) return Error("bad alignment padding");
      }
    }
    if (length > remaining()) return Error("section length " + std::to_string(length) + " exceeds the data left");
    return Bytes(static_cast<size_t>(length), payload);
  }

  const std::string& what() const { return what_; }

 private:
  const uint8_t* pos_;
  const uint8_t* end_;
  const uint8_t* origin_;
  std::string what_;
};

}  // namespace jmp::shlo
