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

// A JSON library error's text without its "[json.exception.parse_error.101] "
// prefix: the message is for people (API clients among them), the prefix
// names library internals.
std::string json_error_text(const nlohmann::json::exception& e);

// JSON type name for messages ("string", "number", ...).
const char* json_type_name(const Json& j);

}  // namespace m2
