#include "text/tool_call_stream.h"

#include "text/python_json.h"
#include "text/tool_call_syntax.h"

namespace m2::text {
namespace {

using namespace tool_syntax;

bool starts_with(std::string_view text, std::string_view tag) { return text.substr(0, tag.size()) == tag; }

// True if `text` is a proper prefix of `tag` (the tag may still follow).
bool is_partial(std::string_view text, std::string_view tag) {
  return text.size() < tag.size() && tag.substr(0, text.size()) == text;
}

bool is_null_word_prefix(std::string_view lower) {
  for (std::string_view word : {"null", "none", "nil"}) {
    if (word.substr(0, lower.size()) == lower) return true;
  }
  return false;
}

}  // namespace

void ToolStreamDelta::append_arguments(int index, std::string_view text) {
  if (tool_calls.empty() || tool_calls.back().index != index) tool_calls.push_back({index, "", "", ""});
  tool_calls.back().arguments.append(text);
}

ToolCallStreamParser::ToolCallStreamParser(const ToolSchemas* schemas, ToolCallIdGenerator* ids,
                                           const ToolNameSet* allowed)
    : schemas_(schemas), ids_(ids), allowed_(allowed) {}

void ToolCallStreamParser::emit_arguments(std::string_view text, ToolStreamDelta* out) {
  if (!dropping_) out->append_arguments(call_index_, text);
}

void ToolCallStreamParser::feed(std::string_view text, ToolStreamDelta* out) {
  pending_.append(text);
  while (step(out)) {
  }
  pending_.erase(0, pos_);
  pos_ = 0;
}

bool ToolCallStreamParser::step(ToolStreamDelta* out) {
  switch (state_) {
    case State::kContent: return step_content(out);
    case State::kBlock: return step_block(out);
    case State::kInvokeHeader: return step_invoke_header(out);
    case State::kInvokeBody: return step_invoke_body(out);
    case State::kParamHeader: return step_param_header(out);
    case State::kValue: return step_value(out);
  }
  return false;
}

void ToolCallStreamParser::emit_content(std::string_view text, ToolStreamDelta* out) {
  size_t end = text.size();
  while (end > 0 && is_tag_space(text[end - 1])) --end;
  if (end == 0) {
    held_space_.append(text);
    return;
  }
  out->content.append(held_space_);
  held_space_.clear();
  out->content.append(text.substr(0, end));
  held_space_.assign(text.substr(end));
  after_block_ = false;
}

bool ToolCallStreamParser::step_content(ToolStreamDelta* out) {
  const std::string_view text = rest();
  if (text.empty()) return false;
  const size_t open = text.find(kBlockOpen);
  if (open == std::string_view::npos) {
    const size_t keep = partial_tag_suffix(text, kBlockOpen);
    emit_content(text.substr(0, text.size() - keep), out);
    consume(text.size() - keep);
    return false;
  }
  emit_content(text.substr(0, open), out);
  consume(open + kBlockOpen.size());
  held_block_.assign(kBlockOpen);
  block_has_calls_ = false;
  state_ = State::kBlock;
  return true;
}

void ToolCallStreamParser::block_is_text(ToolStreamDelta* out) {
  out->content.append(held_space_);
  out->content.append(kBlockOpen);
  held_space_.clear();
  after_block_ = false;
  pending_ = held_block_.substr(kBlockOpen.size()) + std::string(rest());
  pos_ = 0;
  held_block_.clear();
  state_ = State::kContent;
}

bool ToolCallStreamParser::step_block(ToolStreamDelta* out) {
  std::string_view text = rest();
  size_t n = 0;
  while (n < text.size() && is_tag_space(text[n])) ++n;
  if (!block_has_calls_) held_block_.append(text.substr(0, n));
  consume(n);
  text = rest();
  if (text.empty()) return false;
  if (starts_with(text, kInvokeOpen)) {
    if (!block_has_calls_) held_block_.append(kInvokeOpen);
    consume(kInvokeOpen.size());
    state_ = State::kInvokeHeader;
    return true;
  }
  if (starts_with(text, kBlockClose)) {
    consume(kBlockClose.size());
    if (block_has_calls_) {
      after_block_ = true;
    } else {  // an empty block is text
      out->content.append(held_space_);
      out->content.append(held_block_);
      out->content.append(kBlockClose);
      held_space_.clear();
      held_block_.clear();
      after_block_ = false;
    }
    state_ = State::kContent;
    return true;
  }
  if (is_partial(text, kInvokeOpen) || is_partial(text, kBlockClose)) return false;
  // Junk: a block without calls is text; after calls, the block ends here.
  if (block_has_calls_) {
    state_ = State::kContent;
  } else {
    block_is_text(out);
  }
  return true;
}

bool ToolCallStreamParser::step_invoke_header(ToolStreamDelta* out) {
  const std::string_view text = rest();
  size_t name_len = 0;
  const Scan scan = scan_name(text, &name_len);
  if (scan == Scan::kNeedMore) return false;
  std::string name;
  if (scan == Scan::kFound) name = unquote_name(text.substr(0, name_len));
  if (name.empty()) {  // malformed: not an invoke
    if (block_has_calls_) {
      pending_ = std::string(kInvokeOpen) + std::string(text);
      pos_ = 0;
      state_ = State::kContent;
    } else {
      block_is_text(out);
    }
    return true;
  }
  consume(name_len + 1);
  if (!block_has_calls_) {  // the block is a tool-call block: drop the spaces before it
    block_has_calls_ = true;
    held_space_.clear();
    held_block_.clear();
    after_block_ = false;
  }
  call_name_ = std::move(name);
  params_in_call_ = 0;
  dropping_ = !tool_allowed(allowed_, call_name_);
  if (!dropping_) out->tool_calls.push_back({++call_index_, ids_->next(), call_name_, "{"});
  state_ = State::kInvokeBody;
  return true;
}

bool ToolCallStreamParser::step_invoke_body(ToolStreamDelta* out) {
  const std::string_view text = rest();
  // Text before the next `<parameter name=` or `</invoke>` is ignored.
  for (size_t lt = text.find('<'); lt != std::string_view::npos; lt = text.find('<', lt + 1)) {
    const std::string_view tail = text.substr(lt);
    if (starts_with(tail, kParamOpen)) {
      consume(lt + kParamOpen.size());
      state_ = State::kParamHeader;
      return true;
    }
    if (starts_with(tail, kInvokeClose)) {
      consume(lt + kInvokeClose.size());
      emit_arguments("}", out);
      if (!dropping_) ++complete_calls_;
      dropping_ = false;
      state_ = State::kBlock;
      return true;
    }
    if (is_partial(tail, kParamOpen) || is_partial(tail, kInvokeClose)) {
      consume(lt);
      return false;
    }
  }
  consume(text.size());
  return false;
}

bool ToolCallStreamParser::step_param_header(ToolStreamDelta* out) {
  const std::string_view text = rest();
  size_t name_len = 0;
  const Scan scan = scan_name(text, &name_len);
  if (scan == Scan::kNeedMore) return false;
  std::string name;
  if (scan == Scan::kFound) name = unquote_name(text.substr(0, name_len));
  if (name.empty()) {  // malformed: the `<parameter name=` was ignored text
    state_ = State::kInvokeBody;
    return true;
  }
  consume(name_len + 1);
  std::string key = params_in_call_++ ? ", " : "";
  append_python_json_string(name, &key);
  key.append(": ");
  emit_arguments(key, out);
  value_types_ = schemas_->param_types(call_name_, name);
  value_as_string_ = value_types_.always_string();
  value_started_ = false;
  value_text_.clear();
  quote_open_ = false;
  null_phase_ = NullPhase::kLeadingSpace;
  null_word_.clear();
  state_ = State::kValue;
  return true;
}

bool ToolCallStreamParser::step_value(ToolStreamDelta* out) {
  std::string_view text = rest();
  if (!value_started_) {
    if (text.empty()) return false;
    if (text[0] == '\n') consume(1);  // the newline the format adds after `>`
    value_started_ = true;
    text = rest();
  }
  // Value text up to `end`; a '\n' right before `end` is held (it is dropped
  // if `end` turns out to close the value).
  auto take = [&](size_t end) {
    if (end > 0 && text[end - 1] == '\n') --end;
    append_value(text.substr(0, end), out);
    consume(end);
  };
  for (size_t e = text.find(kParamClose); e != std::string_view::npos; e = text.find(kParamClose, e + 1)) {
    const Scan scan = classify_after_param_close(text.substr(e + kParamClose.size()));
    if (scan == Scan::kMalformed) continue;  // this `</parameter>` is part of the value
    if (scan == Scan::kNeedMore) {
      take(e);
      return false;
    }
    std::string_view value = text.substr(0, e);
    if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
    append_value(value, out);
    consume(e + kParamClose.size());
    finish_value(out);
    state_ = State::kInvokeBody;
    return true;
  }
  take(text.size() - partial_tag_suffix(text, kParamClose));
  return false;
}

void ToolCallStreamParser::append_value(std::string_view text, ToolStreamDelta* out) {
  if (text.empty()) return;
  if (!value_as_string_) {
    value_text_.append(text);
    return;
  }
  if (quote_open_) {
    std::string escaped;
    append_python_json_string(text, &escaped);
    emit_arguments(std::string_view(escaped).substr(1, escaped.size() - 2), out);
    return;
  }
  // Held while the value may still be a null word (spaces, then a prefix of
  // null/none/nil, then spaces), which turns it into JSON null.
  value_text_.append(text);
  bool may_be_null = true;
  for (size_t i = 0; i < text.size() && may_be_null;) {
    const size_t space = python_space_prefix(text.substr(i));
    if (space > 0) {
      if (null_phase_ == NullPhase::kWord) {
        may_be_null = is_null_word(null_word_);
        null_phase_ = NullPhase::kTrailingSpace;
      }
      i += space;
      continue;
    }
    const char c = text[i++];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (null_phase_ == NullPhase::kTrailingSpace || !letter) {
      may_be_null = false;
      break;
    }
    null_phase_ = NullPhase::kWord;
    null_word_.push_back(static_cast<char>(c | 0x20));
    may_be_null = is_null_word_prefix(null_word_);
  }
  if (may_be_null) return;
  std::string escaped;
  append_python_json_string(value_text_, &escaped);
  escaped.pop_back();  // the closing quote comes with the end of the value
  emit_arguments(escaped, out);
  value_text_.clear();
  quote_open_ = true;
}

void ToolCallStreamParser::finish_value(ToolStreamDelta* out) {
  if (quote_open_) {
    emit_arguments("\"", out);
  } else if (value_as_string_) {  // held to the end: either null or a whole string
    std::string json = "null";
    if (!is_null_word(trim_python_space(value_text_))) {
      json.clear();
      append_python_json_string(value_text_, &json);
    }
    emit_arguments(json, out);
  } else {
    emit_arguments(python_json_dumps(convert_param_value(value_text_, value_types_)), out);
  }
  value_text_.clear();
}

void ToolCallStreamParser::finish(ToolStreamDelta* out) {
  const std::string_view text = rest();
  switch (state_) {
    case State::kContent:
      // Spaces that only follow a block with calls end the output: dropped.
      if (!after_block_ || !text.empty()) out->content.append(held_space_);
      out->content.append(text);
      break;
    case State::kBlock:
      if (!block_has_calls_) {
        out->content.append(held_space_);
        out->content.append(held_block_);
      }
      out->content.append(text);
      break;
    case State::kInvokeHeader:
      if (block_has_calls_) {
        out->content.append(kInvokeOpen);
      } else {
        out->content.append(held_space_);
        out->content.append(held_block_);
      }
      out->content.append(text);
      break;
    case State::kInvokeBody:
    case State::kParamHeader:
    case State::kValue:
      incomplete_ = !dropping_;  // the call's name was sent; the text cannot be taken back
      break;
  }
  held_space_.clear();
  held_block_.clear();
  pending_.clear();
  pos_ = 0;
}

}  // namespace m2::text
