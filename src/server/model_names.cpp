#include "server/model_names.h"

namespace m2::server {

bool is_name_pattern(std::string_view name) { return name.find_first_of("*?") != std::string_view::npos; }

bool name_matches(std::string_view pattern, std::string_view name) {
  // Iterative glob with one backtrack point (the last `*`): linear in
  // practice and never recursive, whatever a client sends as a name.
  size_t p = 0, n = 0, star = std::string_view::npos, resume = 0;
  while (n < name.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[n])) {
      ++p, ++n;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = n;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool serves_name(const std::vector<std::string>& names, std::string_view name) {
  for (const auto& n : names)
    if (name_matches(n, name)) return true;
  return false;
}

std::string first_literal_name(const std::vector<std::string>& names) {
  for (const auto& n : names)
    if (!is_name_pattern(n)) return n;
  return "";
}

}  // namespace m2::server
