// Helpers for the Jinja interpreter tests: render a template source with
// variables given as JSON text (keys in document order).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/chat_request.h"
#include "text/jinja/template.h"
#include "util/status.h"

namespace m2::text::jinja::testing {

inline Result<std::string> render(std::string_view source, std::string_view vars_json = "{}") {
  M2_ASSIGN_OR_RETURN(Template t, Template::parse(source, "t"));
  M2_ASSIGN_OR_RETURN(OrderedJson vars, parse_ordered_json(vars_json, "vars"));
  std::vector<std::pair<std::string, Value>> values;
  for (const auto& [k, v] : vars.items()) {
    M2_ASSIGN_OR_RETURN(Value value, value_from_json(v, k));
    values.emplace_back(k, std::move(value));
  }
  return t.render(values);
}

// The variables most table tests use.
inline constexpr std::string_view kVars = R"({
  "s": "Hello, World", "u": "héllo 中文 🎉", "n": 7, "f": 2.5, "t": true, "z": null,
  "l": [3, 1, 2], "d": {"b": 1, "a": 2},
  "people": [{"name": "Ann", "age": 30}, {"name": "bob", "age": 25}, {"name": "Cid", "age": 30}],
  "nested": {"x": {"y": [10, {"z": "deep"}]}}
})";

}  // namespace m2::text::jinja::testing
