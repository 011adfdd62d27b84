#include "text/reasoning_parser.h"

#include "text/tool_call_syntax.h"

namespace m2::text {
namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";

std::string_view strip_newlines(std::string_view s) {
  while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}

std::string_view lstrip_newlines(std::string_view s) {
  while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  return s;
}

}  // namespace

bool prompt_opens_reasoning(std::string_view prompt) {
  const size_t turn = prompt.rfind("]~b]");
  const std::string_view last = prompt.substr(turn == std::string_view::npos ? 0 : turn);
  const size_t open = last.rfind(kThinkOpen);
  return open != std::string_view::npos && last.find(kThinkClose, open) == std::string_view::npos;
}

ReasoningSplit split_reasoning(std::string_view text, ReasoningMode mode, bool starts_in_reasoning) {
  ReasoningSplit out;
  if (!starts_in_reasoning) {
    out.rest = std::string(text);
    return out;
  }
  if (text.substr(0, kThinkOpen.size()) == kThinkOpen) text.remove_prefix(kThinkOpen.size());
  const size_t close = text.find(kThinkClose);
  const std::string_view reasoning = text.substr(0, close);
  if (mode == ReasoningMode::kSplit) {
    const std::string_view stripped = strip_newlines(reasoning);
    if (!stripped.empty()) out.reasoning = std::string(stripped);
    if (close != std::string_view::npos) out.rest = lstrip_newlines(text.substr(close + kThinkClose.size()));
  } else {
    out.visible = std::string(kThinkOpen) + std::string(reasoning);
    if (close != std::string_view::npos) {
      out.visible.append(kThinkClose);
      out.rest = text.substr(close + kThinkClose.size());
    }
  }
  return out;
}

ReasoningStreamParser::ReasoningStreamParser(ReasoningMode mode, bool starts_in_reasoning)
    : mode_(mode), state_(starts_in_reasoning ? State::kStart : State::kRest) {}

void ReasoningStreamParser::emit_reasoning(std::string_view text, ReasoningDelta* out) {
  if (mode_ == ReasoningMode::kAppendThink) {
    out->visible.append(text);
    return;
  }
  if (!reasoning_started_) {
    text = lstrip_newlines(text);
    if (text.empty()) return;
    reasoning_started_ = true;
  }
  size_t body = text.size();
  while (body > 0 && text[body - 1] == '\n') --body;
  if (body == 0) {
    held_newlines_ += text.size();
    return;
  }
  out->reasoning.append(held_newlines_, '\n');
  out->reasoning.append(text.substr(0, body));
  held_newlines_ = text.size() - body;
}

void ReasoningStreamParser::feed(std::string_view text, ReasoningDelta* out) {
  if (state_ != State::kRest && mode_ == ReasoningMode::kAppendThink && !think_sent_) {
    out->visible.append(kThinkOpen);
    think_sent_ = true;
  }
  if (state_ == State::kRest) {
    if (strip_rest_newlines_) {
      text = lstrip_newlines(text);
      if (text.empty()) return;
      strip_rest_newlines_ = false;
    }
    out->rest.append(text);
    return;
  }
  pending_.append(text);
  std::string_view view = pending_;
  if (state_ == State::kStart) {
    if (view.size() < kThinkOpen.size() && kThinkOpen.substr(0, view.size()) == view) return;
    if (view.substr(0, kThinkOpen.size()) == kThinkOpen) view.remove_prefix(kThinkOpen.size());
    state_ = State::kReasoning;
  }
  const size_t close = view.find(kThinkClose);
  if (close == std::string_view::npos) {
    const size_t keep = tool_syntax::partial_tag_suffix(view, kThinkClose);
    emit_reasoning(view.substr(0, view.size() - keep), out);
    pending_ = std::string(view.substr(view.size() - keep));
    return;
  }
  emit_reasoning(view.substr(0, close), out);
  held_newlines_ = 0;  // newlines before `</think>` end the reasoning: dropped
  if (mode_ == ReasoningMode::kAppendThink) out->visible.append(kThinkClose);
  const std::string after(view.substr(close + kThinkClose.size()));
  pending_.clear();
  state_ = State::kRest;
  strip_rest_newlines_ = mode_ == ReasoningMode::kSplit;
  feed(after, out);
}

void ReasoningStreamParser::finish(ReasoningDelta* out) {
  if (state_ != State::kRest && mode_ == ReasoningMode::kAppendThink && !think_sent_) {
    out->visible.append(kThinkOpen);
    think_sent_ = true;
  }
  if (state_ != State::kRest) {
    emit_reasoning(pending_, out);  // an unfinished tag at the end is reasoning text
    held_newlines_ = 0;
    pending_.clear();
  }
}

}  // namespace m2::text
