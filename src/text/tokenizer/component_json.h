// Typed access to the fields of tokenizer.json components, with errors that
// name the JSON path ("pre_tokenizer.pretokenizers[1].pattern") and what
// was expected. Every component factory goes through these.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/json.h"
#include "util/status.h"

namespace m2::text::tok {

// Context of one component: its JSON object and path.
struct JsonNode {
  const Json& json;
  std::string path;

  JsonNode child(std::string_view key) const;  // requires json[key] to exist
  JsonNode element(size_t index) const;
  std::string child_path(std::string_view key) const {
    return path.empty() ? std::string(key) : path + "." + std::string(key);
  }

  Status error(std::string_view message) const;
  bool has(std::string_view key) const;  // present and not null

  Result<std::string> string_field(std::string_view key) const;
  Result<std::optional<std::string>> optional_string(std::string_view key) const;  // absent or null -> nullopt
  Result<bool> bool_field(std::string_view key, std::optional<bool> fallback = std::nullopt) const;
  Result<int64_t> int_field(std::string_view key) const;
  Result<const Json*> array_field(std::string_view key) const;
  Result<const Json*> object_field(std::string_view key) const;
  Result<std::string> type_name() const;  // the "type" field
  // Rejects keys outside `known` so that options we do not implement are never ignored silently.
  Status only_keys(std::initializer_list<std::string_view> known) const;
};

// The components listed under `key` of a {"type": "Sequence", key: [...]}
// node, each built by `make` (a JsonNode -> Result<std::unique_ptr<T>>).
template <class T, class Make>
Result<std::vector<std::unique_ptr<T>>> component_sequence(const JsonNode& node, const char* key, Make make) {
  M2_RETURN_IF_ERROR(node.only_keys({"type", key}));
  M2_ASSIGN_OR_RETURN(const Json* list, node.array_field(key));
  const JsonNode list_node{*list, node.child_path(key)};
  std::vector<std::unique_ptr<T>> steps;
  for (size_t i = 0; i < list->size(); ++i) {
    M2_ASSIGN_OR_RETURN(auto step, make(list_node.element(i)));
    steps.push_back(std::move(step));
  }
  return steps;
}

}  // namespace m2::text::tok
