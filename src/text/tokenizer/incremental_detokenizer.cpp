#include "text/tokenizer/incremental_detokenizer.h"

#include "text/tokenizer/utf8.h"

namespace m2::text {

using tok::well_formed_length;

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(tokenizer),
      skip_special_(skip_special_tokens),
      byte_level_(tokenizer.decodes_byte_level()),
      by_window_(tokenizer.decode_streams_by_window()) {}

// Emits the longest prefix of pending_ whose rendering cannot change with
// more bytes: complete characters, and U+FFFD for each maximal ill-formed
// subpart; keeps a trailing sequence that may still complete.
std::string IncrementalDetokenizer::drain_complete() {
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    if (static_cast<unsigned char>(pending_[i]) < 0x80) {
      out += pending_[i++];
      continue;
    }
    size_t prefix = 0;
    const size_t len = well_formed_length(pending_, i, &prefix);
    if (len) {
      out.append(pending_, i, len);
      i += len;
    } else if (prefix > 0 && i + prefix == pending_.size()) {
      break;  // a valid beginning that ends the buffer: wait for more bytes
    } else {
      out += "\xEF\xBF\xBD";
      i += prefix ? prefix : 1;
    }
  }
  pending_.erase(0, i);
  return out;
}

Status IncrementalDetokenizer::changed_error() const {
  return errorf("streaming decode: a later id changed text already emitted ({} ids in the window)", ids_.size());
}

Result<std::string> IncrementalDetokenizer::push(int32_t id) {
  const auto token = tokenizer_.token_for_decode(id, skip_special_);
  if (byte_level_) {
    if (token) Tokenizer::byte_level_bytes(*token, pending_);
    return drain_complete();
  }
  ids_.push_back(id);
  // A dropped id changes nothing, not even whether a byte run has ended.
  if (token) awaiting_ = tokenizer_.decode_awaits_more(*token);
  if (!by_window_ || awaiting_) return std::string();
  M2_ASSIGN_OR_RETURN(std::string text, tokenizer_.decode(ids_, skip_special_));
  if (text.size() <= prefix_.size() || text.ends_with("\xEF\xBF\xBD")) return std::string();
  if (!text.starts_with(prefix_)) return changed_error();
  std::string delta = text.substr(prefix_.size());
  // Keep the ids since the previous emission as context for the next window.
  ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(prefix_index_));
  prefix_index_ = ids_.size();
  M2_ASSIGN_OR_RETURN(prefix_, tokenizer_.decode(ids_, skip_special_));
  return delta;
}

Result<std::string> IncrementalDetokenizer::finish() {
  std::string out;
  if (byte_level_) {
    out = tok::utf8_lossy(pending_);
    pending_.clear();
    return out;
  }
  M2_ASSIGN_OR_RETURN(std::string text, tokenizer_.decode(ids_, skip_special_));
  if (!text.starts_with(prefix_)) return changed_error();
  out = text.substr(prefix_.size());
  ids_.clear();
  prefix_.clear();
  prefix_index_ = 0;
  awaiting_ = false;
  return out;
}

}  // namespace m2::text
