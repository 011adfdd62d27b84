#include "loadgen/sse_parser.h"

namespace m2::loadgen {

std::vector<std::string> SseParser::feed(std::string_view bytes) {
  std::vector<std::string> events;
  for (const char c : bytes) {
    if (after_cr_) {
      after_cr_ = false;
      if (c == '\n') continue;
    }
    if (c == '\r' || c == '\n') {
      after_cr_ = c == '\r';
      end_line(&events);
    } else {
      line_ += c;
    }
  }
  return events;
}

std::string SseParser::finish() {
  std::vector<std::string> events;
  if (!line_.empty()) end_line(&events);
  if (has_data_) end_line(&events);
  return events.empty() ? std::string() : std::move(events.front());
}

void SseParser::end_line(std::vector<std::string>* events) {
  if (line_.empty()) {
    if (has_data_) events->push_back(std::move(data_));
    data_.clear();
    has_data_ = false;
    return;
  }
  std::string_view line = line_;
  const size_t colon = line.find(':');
  const std::string_view field = line.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (field == "data") {
    if (has_data_) data_ += '\n';
    data_ += value;
    has_data_ = true;
  }
  line_.clear();
}

}  // namespace m2::loadgen
