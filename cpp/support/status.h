// Status values carried from the reader, the lowering and the executors up to the PJRT boundary,
// where they become PJRT_Errors. No exception crosses the C ABI.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace jmp {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,
  kUnimplemented,
  kFailedPrecondition,
  kOutOfRange,
  kNotFound,
  kResourceExhausted,
  kInternal,
  kUnavailable,  // another process of the program is gone or never came
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // Prefixes the message with where the error happened, keeping the code.
  Status WithContext(const std::string& context) const {
    return ok() ? *this : Status(code_, context + ": " + message_);
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return Status(StatusCode::kInvalidArgument, std::move(m)); }
inline Status Unimplemented(std::string m) { return Status(StatusCode::kUnimplemented, std::move(m)); }
inline Status FailedPrecondition(std::string m) { return Status(StatusCode::kFailedPrecondition, std::move(m)); }
inline Status OutOfRange(std::string m) { return Status(StatusCode::kOutOfRange, std::move(m)); }
inline Status NotFound(std::string m) { return Status(StatusCode::kNotFound, std::move(m)); }
inline Status ResourceExhausted(std::string m) { return Status(StatusCode::kResourceExhausted, std::move(m)); }
inline Status Internal(std::string m) { return Status(StatusCode::kInternal, std::move(m)); }
inline Status Unavailable(std::string m) { return Status(StatusCode::kUnavailable, std::move(m)); }

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : v_(std::move(status)) {}  // NOLINT: implicit by design
  StatusOr(T value) : v_(std::move(value)) {}         // NOLINT
  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<Status, T> v_;
};

}  // namespace jmp

#define JMP_CONCAT_INNER(a, b) a##b
#define JMP_CONCAT(a, b) JMP_CONCAT_INNER(a, b)

#define JMP_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::jmp::Status jmp_status_ = (expr);        \
    if (!jmp_status_.ok()) return jmp_status_; \
  } while (0)

#define JMP_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()

#define JMP_ASSIGN_OR_RETURN(lhs, expr) JMP_ASSIGN_OR_RETURN_IMPL(JMP_CONCAT(jmp_statusor_, __LINE__), lhs, expr)
