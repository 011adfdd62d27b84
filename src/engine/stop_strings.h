// Stop strings over streamed text: found across token boundaries, cut from
// the output with everything after them, and never half-emitted: while a
// stream could still be growing into a stop string, the longest suffix that
// is the start of one is held back (no more than needed).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace m2 {

class StopStringMatcher {
 public:
  explicit StopStringMatcher(std::vector<std::string> stops);

  // Appends `delta` to the text. With `check`, returns the index of the stop
  // string that now matches (earliest in the text), after which text() ends
  // right before it.
  std::optional<size_t> append(const std::string& delta, bool check = true);

  // Text safe to emit now (held back: a possible stop-string start, and never
  // a split UTF-8 character); with `final`, everything left.
  std::string take_emittable(bool final);

  const std::string& text() const { return text_; }

 private:
  std::vector<std::string> stops_;
  size_t max_len_ = 0;
  std::string text_;
  size_t emitted_ = 0;
};

}  // namespace m2
