// Fields: typed access to one object of a client request, every error naming the field's
// path ("messages.3.content.1.tool_use_id") the way the APIs' own validation errors do.
//
// Absent and null fields read the same (both APIs accept null for an omitted optional
// field). Numbers must be JSON numbers and strings JSON strings: a client that sends "0.5"
// for a temperature gets a 400 naming the field, not a silent default.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wire/wire_error.h"

namespace kvgate::wire {

std::string child_path(std::string_view parent, std::string_view key);
std::string child_path(std::string_view parent, size_t index);

// "a string", "an array", ... for messages.
std::string_view json_kind(const ClientJson& value);

class Fields {
 public:
  // REQUIRES: object.is_object(); `object` outlives the Fields.
  Fields(const ClientJson& object, std::string path) : object_(&object), path_(std::move(path)) {}
  // The value at `path` as an object, or 400 saying what it is instead.
  static WireResult<Fields> of(const ClientJson& value, std::string path);

  const std::string& path() const { return path_; }
  std::string path_of(std::string_view key) const { return child_path(path_, key); }
  WireError error(std::string_view key, const std::string& what) const;

  // nullptr when absent or null.
  const ClientJson* find(std::string_view key) const;
  WireResult<std::string> string(std::string_view key) const;  // required
  WireResult<std::optional<std::string>> optional_string(std::string_view key) const;
  // A string kvgate keeps as an id (a conversation's key, a response id): refused unless
  // util::client_id_problem accepts it (valid UTF-8, no control characters, bounded).
  WireResult<std::optional<std::string>> optional_id(std::string_view key) const;
  WireResult<std::optional<double>> optional_number(std::string_view key) const;
  // A whole number >= min (a JSON number with no fractional part).
  WireResult<std::optional<int64_t>> optional_integer(std::string_view key, int64_t min) const;
  WireResult<std::optional<bool>> optional_bool(std::string_view key) const;
  // Required array / optional array (nullptr when absent).
  WireResult<const ClientJson*> array(std::string_view key) const;
  WireResult<const ClientJson*> optional_array(std::string_view key) const;
  WireResult<const ClientJson*> optional_object(std::string_view key) const;

  // Appends to `ignored` the path of every present, non-null field not in `known`.
  void list_unknown(std::initializer_list<std::string_view> known, std::vector<std::string>& ignored) const;

 private:
  const ClientJson* object_;
  std::string path_;
};

// Texts joined with a blank line between them: how both adapters flatten a list of text
// blocks (a system prompt, a tool result, a user turn) into one chat message's text.
std::string join_texts(const std::vector<std::string>& texts);

}  // namespace kvgate::wire
