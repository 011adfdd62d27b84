#include "engine/stop_strings.h"

#include <algorithm>
#include <string_view>

namespace m2 {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  for (const auto& s : stops_) max_len_ = std::max(max_len_, s.size());
}

std::optional<size_t> StopStringMatcher::append(const std::string& delta, bool check) {
  const size_t old = text_.size();
  text_ += delta;
  if (!check || stops_.empty() || delta.empty()) return std::nullopt;
  // A new match must end inside the delta: start the search max_len - 1 back.
  const size_t from = old >= max_len_ - 1 ? old - (max_len_ - 1) : 0;
  size_t best_pos = std::string::npos, best = 0;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const size_t p = text_.find(stops_[i], from);
    if (p != std::string::npos && p < best_pos) best_pos = p, best = i;
  }
  if (best_pos == std::string::npos) return std::nullopt;
  text_.resize(best_pos);
  emitted_ = std::min(emitted_, text_.size());
  return best;
}

std::string StopStringMatcher::take_emittable(bool final) {
  size_t end = text_.size();
  if (!final) {
    // Hold back the longest suffix that is a proper prefix of a stop string.
    for (size_t k = std::min(max_len_ ? max_len_ - 1 : 0, text_.size()); k > 0; --k) {
      const std::string_view suffix(text_.data() + text_.size() - k, k);
      if (std::any_of(stops_.begin(), stops_.end(), [&](const std::string& s) { return s.compare(0, k, suffix) == 0; })) {
        end = text_.size() - k;
        break;
      }
    }
    // Do not split a UTF-8 character: back up over continuation bytes.
    while (end > emitted_ && end < text_.size() && (static_cast<unsigned char>(text_[end]) & 0xc0) == 0x80) --end;
  }
  if (end <= emitted_) return {};
  std::string out = text_.substr(emitted_, end - emitted_);
  emitted_ = end;
  return out;
}

}  // namespace m2
