// Incremental parser of a text/event-stream body (the WHATWG EventSource
// rules that OpenAI-compatible servers use): bytes arrive in arbitrary
// pieces; lines end with LF, CRLF or CR; `data:` lines of one event are
// joined with LF and the event is dispatched at the blank line that ends it;
// comments (`:`) and the other fields (event, id, retry) are ignored.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace m2::loadgen {

class SseParser {
 public:
  // The data of every event completed by `bytes`, in order.
  std::vector<std::string> feed(std::string_view bytes);
  // The data of an event the stream ended without a blank line after ("" if none).
  std::string finish();

 private:
  void end_line(std::vector<std::string>* events);

  std::string line_;
  std::string data_;
  bool has_data_ = false;
  bool after_cr_ = false;  // the last byte was CR: a following LF belongs to it
};

}  // namespace m2::loadgen
