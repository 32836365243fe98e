// Result<T>: a value or an Error, the one error channel of kvgate's library code.
//
// Library functions never throw for bad input; they return Result<T> (or Status, which is
// Result<void>). An Error carries a message a user can act on: what went wrong, where, and
// when useful what to do. Callers add context as the error travels up with
// `with_context("reading model.gguf")`, giving "reading model.gguf: offset 24: ...".
//
// KV_TRY(expr) returns early from a Status/Result-returning function if `expr` failed;
// KV_ASSIGN_OR_RETURN(decl, expr) does the same and otherwise binds the value.
//
// Result<T, E> carries another error type where a caller needs more than a message (the
// wire formats answer a client with a status, an error type and a field path); E = Error
// everywhere else. with_context exists only for Error.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace kvgate::util {

class Error {
 public:
  explicit Error(std::string message) : message_(std::move(message)) {}

  const std::string& message() const { return message_; }

  // Prepends "context: " to the message.
  Error with_context(std::string_view context) const& {
    return Error(std::string(context) + ": " + message_);
  }
  Error with_context(std::string_view context) && {
    message_.insert(0, std::string(context) + ": ");
    return std::move(*this);
  }

 private:
  std::string message_;
};

template <typename T, typename E = Error>
class [[nodiscard]] Result {
 public:
  static_assert(!std::is_same_v<T, E>, "Result<E, E> is ambiguous");

  Result(T value) : state_(std::in_place_index<0>, std::move(value)) {}  // NOLINT(implicit)
  Result(E error) : state_(std::in_place_index<1>, std::move(error)) {}  // NOLINT(implicit)

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  // REQUIRES: ok().
  T& value() & { assert(ok()); return std::get<0>(state_); }
  const T& value() const& { assert(ok()); return std::get<0>(state_); }
  T&& value() && { assert(ok()); return std::get<0>(std::move(state_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // REQUIRES: !ok().
  const E& error() const& { assert(!ok()); return std::get<1>(state_); }
  E&& error() && { assert(!ok()); return std::get<1>(std::move(state_)); }

  T value_or(T fallback) const& { return ok() ? value() : std::move(fallback); }

  Result with_context(std::string_view context) &&
    requires std::is_same_v<E, Error>
  {
    if (ok()) return std::move(*this);
    return std::move(*this).error().with_context(context);
  }

 private:
  std::variant<T, E> state_;
};

template <typename E>
class [[nodiscard]] Result<void, E> {
 public:
  Result() = default;
  Result(E error) : error_(std::move(error)) {}  // NOLINT(implicit)

  bool ok() const { return !error_.has_value(); }
  explicit operator bool() const { return ok(); }
  const E& error() const& { assert(!ok()); return *error_; }
  E&& error() && { assert(!ok()); return std::move(*error_); }

  Result with_context(std::string_view context) &&
    requires std::is_same_v<E, Error>
  {
    if (ok()) return {};
    return std::move(*error_).with_context(context);
  }

 private:
  std::optional<E> error_;
};

using Status = Result<void>;

inline Status ok_status() { return {}; }

}  // namespace kvgate::util

namespace kvgate {
using util::Error;
using util::Result;
using util::Status;
}  // namespace kvgate

#define KV_CONCAT_INNER(a, b) a##b
#define KV_CONCAT(a, b) KV_CONCAT_INNER(a, b)

#define KV_TRY(expr)                                          \
  do {                                                        \
    auto&& kv_try_result_ = (expr);                           \
    if (!kv_try_result_.ok()) return std::move(kv_try_result_).error(); \
  } while (false)

#define KV_ASSIGN_OR_RETURN_IMPL(tmp, decl, expr)             \
  auto tmp = (expr);                                          \
  if (!tmp.ok()) return std::move(tmp).error();               \
  decl = std::move(tmp).value()

#define KV_ASSIGN_OR_RETURN(decl, expr) \
  KV_ASSIGN_OR_RETURN_IMPL(KV_CONCAT(kv_result_, __LINE__), decl, expr)
