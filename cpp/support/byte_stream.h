// Little-endian bytes for what the plugin serializes (executables for JAX's persistent compilation
// cache). The reader treats its input as untrusted: every read is bounds-checked and a length is
// checked against what is left before anything is allocated for it.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "support/status.h"

namespace jmp {

// FNV-1a over bytes: the identity a serialized form records of what it was made from (not a defence
// against a forger, a check against a mix-up or damage).
inline uint64_t Fnv1a(std::string_view bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

class ByteWriter {
 public:
  void U64(uint64_t v) {
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  void I64(int64_t v) { U64(static_cast<uint64_t>(v)); }
  void F64(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof(bits));
    U64(bits);
  }
  void Bytes(std::string_view b) {
    U64(b.size());
    out_.append(b.data(), b.size());
  }
  void I64s(const std::vector<int64_t>& v) {
    U64(v.size());
    for (int64_t x : v) I64(x);
  }
  void Ints(const std::vector<int>& v) {
    U64(v.size());
    for (int x : v) I64(x);
  }
  std::string& str() { return out_; }

 private:
  std::string out_;
};

class ByteReader {
 public:
  // `what` names the format in errors ("serialized executable").
  ByteReader(const uint8_t* data, size_t size, std::string what) : p_(data), left_(size), what_(std::move(what)) {}

  size_t left() const { return left_; }

  StatusOr<uint64_t> U64() {
    if (left_ < 8) return Truncated();
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p_[i]) << (8 * i);
    p_ += 8;
    left_ -= 8;
    return v;
  }
  StatusOr<int64_t> I64() {
    JMP_ASSIGN_OR_RETURN(uint64_t v, U64());
    return static_cast<int64_t>(v);
  }
  StatusOr<double> F64() {
    JMP_ASSIGN_OR_RETURN(uint64_t bits, U64());
    double v;
    std::memcpy(&v, &bits, sizeof(v));
    return v;
  }
  // A count of items that each take at least `min_item_bytes`: more than the rest could hold is an error.
  StatusOr<size_t> Count(size_t min_item_bytes) {
    JMP_ASSIGN_OR_RETURN(uint64_t n, U64());
    if (min_item_bytes && n > left_ / min_item_bytes) return Truncated();
    return static_cast<size_t>(n);
  }
  StatusOr<std::string_view> Bytes() {
    JMP_ASSIGN_OR_RETURN(size_t n, Count(1));
    std::string_view v(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    left_ -= n;
    return v;
  }
  StatusOr<std::vector<int64_t>> I64s() {
    JMP_ASSIGN_OR_RETURN(size_t n, Count(8));
    std::vector<int64_t> v(n);
    for (auto& x : v) {
      JMP_ASSIGN_OR_RETURN(x, I64());
    }
    return v;
  }
  // Integers that must fit an int (value ids, indices).
  StatusOr<std::vector<int>> Ints() {
    JMP_ASSIGN_OR_RETURN(size_t n, Count(8));
    std::vector<int> v(n);
    for (auto& x : v) {
      JMP_ASSIGN_OR_RETURN(int64_t w, I64());
      if (w < INT32_MIN || w > INT32_MAX) return Malformed("an index out of range");
      x = static_cast<int>(w);
    }
    return v;
  }
  Status Malformed(const std::string& why) const { return InvalidArgument(what_ + ": malformed (" + why + ")"); }

 private:
  Status Truncated() const { return InvalidArgument(what_ + ": truncated or malformed (a length runs past the end)"); }

  const uint8_t* p_;
  size_t left_;
  std::string what_;
};

}  // namespace jmp
