// JSON parsing with errors that name the document, and typed field access.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "util/status.h"

namespace m2 {

using Json = nlohmann::json;
// Keeps keys in document order (needed where output order must match Python).
using OrderedJson = nlohmann::ordered_json;

Result<Json> parse_json(std::string_view text, std::string_view what);
Result<Json> read_json_file(const std::string& path);
Result<std::string> read_text_file(const std::string& path);

// JSON type name for messages ("string", "number", ...).
const char* json_type_name(const Json& j);

}  // namespace m2
