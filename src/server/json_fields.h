// Typed reading of optional request fields. A field that is absent or null
// is "not given"; one of the wrong type is an error naming the field and
// both types, so that every malformed body gets a 400 that says what to fix.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "util/json.h"
#include "util/status.h"

namespace m2::server {

Result<std::optional<double>> opt_number(const OrderedJson& obj, const char* key);
// Integral numbers only (3.0 is accepted, 3.5 is not), within int64.
Result<std::optional<int64_t>> opt_int(const OrderedJson& obj, const char* key);
Result<std::optional<bool>> opt_bool(const OrderedJson& obj, const char* key);
// OpenAI's `stream_options.include_usage` (false when absent).
Result<bool> stream_include_usage(const OrderedJson& body);
Result<std::optional<std::string>> opt_string(const OrderedJson& obj, const char* key);
// A string or a list of strings (OpenAI's `stop`).
Result<std::vector<std::string>> opt_string_list(const OrderedJson& obj, const char* key);
// A list of integers (token ids); absent: empty.
Result<std::vector<int64_t>> opt_int_list(const OrderedJson& obj, const char* key);

const char* json_type(const OrderedJson& j);

// A request id suffix: `bytes` random bytes as lowercase hex.
std::string random_hex(size_t bytes);

}  // namespace m2::server
