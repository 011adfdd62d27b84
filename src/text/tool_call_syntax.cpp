#include "text/tool_call_syntax.h"

#include <algorithm>

#include "text/tool_schema.h"

namespace m2::text::tool_syntax {

Scan scan_name(std::string_view text, size_t* end) {
  const size_t limit = std::min(text.size(), kMaxNameBytes + 1);
  for (size_t i = 0; i < limit; ++i) {
    const char c = text[i];
    if (c == '>') {
      *end = i;
      return Scan::kFound;
    }
    if (c == '\n' || c == '<') return Scan::kMalformed;
  }
  return text.size() > kMaxNameBytes ? Scan::kMalformed : Scan::kNeedMore;
}

std::string unquote_name(std::string_view raw) {
  std::string_view name = trim_python_space(raw);
  if (name.size() >= 2 && name.front() == name.back() && (name.front() == '"' || name.front() == '\'')) {
    name = name.substr(1, name.size() - 2);
  }
  return std::string(name);
}

Scan classify_after_param_close(std::string_view after) {
  size_t i = 0;
  while (i < after.size() && is_tag_space(after[i])) {
    if (++i > kMaxTagGap) return Scan::kMalformed;
  }
  const std::string_view rest = after.substr(i);
  for (std::string_view tag : {kParamOpen, kInvokeClose}) {
    if (rest.substr(0, tag.size()) == tag) return Scan::kFound;
  }
  for (std::string_view tag : {kParamOpen, kInvokeClose}) {
    if (rest.size() < tag.size() && tag.substr(0, rest.size()) == rest) return Scan::kNeedMore;
  }
  return Scan::kMalformed;
}

size_t partial_tag_suffix(std::string_view text, std::string_view tag) {
  const size_t longest = std::min(text.size(), tag.size() - 1);
  for (size_t len = longest; len > 0; --len) {
    if (text.substr(text.size() - len) == tag.substr(0, len)) return len;
  }
  return 0;
}

}  // namespace m2::text::tool_syntax
