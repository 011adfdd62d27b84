#include "text/chat_continuation.h"

namespace m2::text {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string_view lstrip(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  return s;
}

std::string_view strip(std::string_view s) {
  s = lstrip(s);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

std::string content_text(const OrderedJson& content) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) return {};
  for (auto it = content.rbegin(); it != content.rend(); ++it) {
    if (it->is_object() && it->contains("text") && (*it)["text"].is_string()) return (*it)["text"].get<std::string>();
  }
  return {};
}

}  // namespace

Result<std::string> final_message_text(const OrderedJson& messages) {
  if (!messages.is_array() || messages.empty()) return errorf("continue_final_message: there is no final message");
  const OrderedJson& last = messages.back();
  if (auto calls = last.find("tool_calls"); calls != last.end() && calls->is_array() && !calls->empty())
    return errorf("continue_final_message: the final message ends in tool calls; there is nothing to continue");
  std::string text = last.contains("content") ? content_text(last["content"]) : std::string();
  if (strip(text).empty()) {
    auto r = last.find("reasoning_content");
    if (r != last.end() && r->is_string()) text = r->get<std::string>();
  }
  if (strip(text).empty()) return errorf("continue_final_message: the final message has no text to continue");
  return text;
}

Result<std::string> cut_after_final_message(std::string rendered, std::string_view final_text) {
  const std::string_view stripped = strip(final_text);
  const size_t at = rendered.rfind(stripped);
  if (stripped.empty() || at == std::string::npos)
    return errorf("continue_final_message: the chat template does not render the final message's text");
  // The template kept the text's trailing whitespace: continue after it.
  const std::string_view from_start = lstrip(final_text);
  const bool kept = rendered.compare(at, from_start.size(), from_start) == 0;
  rendered.resize(at + (kept ? from_start.size() : stripped.size()));
  return rendered;
}

}  // namespace m2::text
