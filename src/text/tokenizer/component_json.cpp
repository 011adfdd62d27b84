#include "text/tokenizer/component_json.h"

#include <algorithm>

namespace m2::text::tok {

JsonNode JsonNode::child(std::string_view key) const { return {json.at(std::string(key)), child_path(key)}; }

JsonNode JsonNode::element(size_t index) const { return {json.at(index), fmt::format("{}[{}]", path, index)}; }

Status JsonNode::error(std::string_view message) const {
  return errorf("{}: {}", path.empty() ? "(root)" : path, message);
}

bool JsonNode::has(std::string_view key) const {
  if (!json.is_object()) return false;
  auto it = json.find(std::string(key));
  return it != json.end() && !it->is_null();
}

Result<std::string> JsonNode::string_field(std::string_view key) const {
  auto it = json.find(std::string(key));
  if (it == json.end()) return errorf("{}: missing field", child_path(key));
  if (!it->is_string()) return errorf("{}: expected a string, got {}", child_path(key), json_type_name(*it));
  return it->get<std::string>();
}

Result<std::optional<std::string>> JsonNode::optional_string(std::string_view key) const {
  if (!has(key)) return std::optional<std::string>();
  M2_ASSIGN_OR_RETURN(std::string s, string_field(key));
  return std::optional<std::string>(std::move(s));
}

Result<bool> JsonNode::bool_field(std::string_view key, std::optional<bool> fallback) const {
  auto it = json.find(std::string(key));
  if (it == json.end() || it->is_null()) {
    if (fallback) return *fallback;
    return errorf("{}: missing field", child_path(key));
  }
  if (!it->is_boolean()) return errorf("{}: expected true or false, got {}", child_path(key), json_type_name(*it));
  return it->get<bool>();
}

Result<int64_t> JsonNode::int_field(std::string_view key) const {
  auto it = json.find(std::string(key));
  if (it == json.end()) return errorf("{}: missing field", child_path(key));
  if (!it->is_number_integer()) return errorf("{}: expected an integer, got {}", child_path(key), json_type_name(*it));
  return it->get<int64_t>();
}

Result<const Json*> JsonNode::array_field(std::string_view key) const {
  auto it = json.find(std::string(key));
  if (it == json.end()) return errorf("{}: missing field", child_path(key));
  if (!it->is_array()) return errorf("{}: expected an array, got {}", child_path(key), json_type_name(*it));
  return &*it;
}

Result<const Json*> JsonNode::object_field(std::string_view key) const {
  auto it = json.find(std::string(key));
  if (it == json.end()) return errorf("{}: missing field", child_path(key));
  if (!it->is_object()) return errorf("{}: expected an object, got {}", child_path(key), json_type_name(*it));
  return &*it;
}

Result<std::string> JsonNode::type_name() const {
  if (!json.is_object()) return error(fmt::format("expected an object, got {}", json_type_name(json)));
  return string_field("type");
}

Status JsonNode::only_keys(std::initializer_list<std::string_view> known) const {
  if (!json.is_object()) return error(fmt::format("expected an object, got {}", json_type_name(json)));
  for (auto it = json.begin(); it != json.end(); ++it) {
    if (std::find(known.begin(), known.end(), it.key()) == known.end()) {
      return errorf("{}: unsupported option '{}'", path, it.key());
    }
  }
  return {};
}

}  // namespace m2::text::tok
