// A stop condition on a sequence's output text that a layer above the engine
// defines (the server's "the first tool call is complete", for
// parallel_tool_calls: false). Unlike a stop string, the text that triggers
// it is kept: the sequence ends right after the token that completed it,
// with finish reason stop.
#pragma once

#include <functional>
#include <memory>
#include <string_view>

namespace m2 {

class TextStop {
 public:
  virtual ~TextStop() = default;
  // Fed every piece of the sequence's detokenized output, in order (forced
  // tokens included); true: end the sequence after this piece.
  virtual bool feed(std::string_view text) = 0;
};

// Makes one TextStop per sequence (n > 1 completions each get their own).
using TextStopFactory = std::function<std::unique_ptr<TextStop>()>;

}  // namespace m2
