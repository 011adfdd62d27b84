// The names `--served-model-name` answers to: literal names and shell-style
// patterns (`*` any run of characters, `?` one), so that one server can
// take the model names an agent insists on (Claude Code sends
// `claude-sonnet-4-5-...`: `claude-*` routes them here). A pattern is no
// model id: /v1/models lists the literal names, and responses report the
// first literal one.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace m2::server {

bool is_name_pattern(std::string_view name);
// Whole-string match of `name` against `pattern` (a literal matches itself only).
bool name_matches(std::string_view pattern, std::string_view name);
bool serves_name(const std::vector<std::string>& names, std::string_view name);
// The first literal name, or "" when every name is a pattern.
std::string first_literal_name(const std::vector<std::string>& names);

}  // namespace m2::server
