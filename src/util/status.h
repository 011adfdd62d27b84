// Status and Result<T>: how every fallible m2cpp function reports failure.
// An error carries one human-readable message that names the problem (file,
// tensor, field, byte offset); callers add context with with_context().
#pragma once

#include <fmt/format.h>

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace m2 {

class Status {
 public:
  Status() = default;  // success

  static Status error(std::string message) {
    Status s;
    s.message_ = std::make_shared<const std::string>(std::move(message));
    return s;
  }

  bool ok() const { return message_ == nullptr; }
  const std::string& message() const;

  // "context: message"; success stays success.
  Status with_context(std::string_view context) const;

 private:
  std::shared_ptr<const std::string> message_;
};

template <typename... Args>
Status errorf(fmt::format_string<Args...> format, Args&&... args) {
  return Status::error(fmt::format(format, std::forward<Args>(args)...));
}

template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}  // NOLINT: must be an error

  bool ok() const { return v_.index() == 0; }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<1>(v_);
  }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace m2

#define M2_CONCAT_INNER(a, b) a##b
#define M2_CONCAT(a, b) M2_CONCAT_INNER(a, b)

// Returns the error of a Status-valued expression.
#define M2_RETURN_IF_ERROR(expr)                 \
  do {                                           \
    ::m2::Status m2_status_ = (expr);            \
    if (!m2_status_.ok()) return m2_status_;     \
  } while (0)

// `M2_ASSIGN_OR_RETURN(auto x, f());` declares x from a Result or returns its error.
#define M2_ASSIGN_OR_RETURN(lhs, expr) \
  M2_ASSIGN_OR_RETURN_IMPL(M2_CONCAT(m2_result_, __LINE__), lhs, expr)
#define M2_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()
