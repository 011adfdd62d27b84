// Streaming detokenization: ids in one at a time, text deltas out.
//
// - Never emits part of a UTF-8 character: bytes of a character split
//   across ids are held until it is complete.
// - The concatenation of all deltas and finish() equals
//   Tokenizer::decode(all ids): held bytes that can no longer become a
//   character turn into U+FFFD exactly where HF's full decode puts one, and
//   an incomplete character at the very end becomes U+FFFD at finish().
// - Special tokens are skipped or kept as in decode(skip_special_tokens).
//
// Byte-level decoders (the GPT-2 / o200k / MiniMax family) are streamed
// token by token in O(1) per id. Other decoder chains use HF's DecodeStream
// method: decode a window of recent ids and emit what grew past the text
// already emitted, holding back while the text ends in U+FFFD or the last
// kept id is a ByteFallback byte (its run may still turn valid or invalid).
// A chain for which that method is not exact (a Replace or a trailing Strip
// applied to the joined text) emits everything at finish().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "text/tokenizer/tokenizer.h"

namespace m2::text {

class IncrementalDetokenizer {
 public:
  IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens);

  // The text completed by `id` (often empty while a character is held).
  Result<std::string> push(int32_t id);
  // The rest: held bytes as the full decode renders them. The detokenizer
  // is then empty again, ready for a new stream.
  Result<std::string> finish();

 private:
  std::string drain_complete();
  Status changed_error() const;

  const Tokenizer& tokenizer_;
  const bool skip_special_;
  const bool byte_level_;
  const bool by_window_;
  std::string pending_;       // byte-level: bytes not yet emitted
  bool awaiting_ = false;     // window: the last kept token awaits more
  std::vector<int32_t> ids_;  // window: ids since prefix_index_
  std::string prefix_;        // decode of ids_[0, prefix_index_)
  size_t prefix_index_ = 0;
};

}  // namespace m2::text
