// Makes model output valid UTF-8 before the output parsers see it.
//
// Detokenized text can contain bytes that are not UTF-8 (a byte-level BPE
// model may emit any byte sequence), and a streamed delta can end inside a
// multi-byte character. Everything the parsers return ends up in JSON, which
// must be valid UTF-8, so the parsers work on sanitized text only:
// each maximal ill-formed subsequence becomes U+FFFD (the Unicode "maximal
// subpart" practice, the same as Python's bytes.decode(errors="replace")),
// and a character split across deltas is held until it is complete.
// Streaming and whole-text sanitizing give the same text for any split.
#pragma once

#include <string>
#include <string_view>

namespace m2::text {

// The whole of `bytes`, each ill-formed subsequence replaced by U+FFFD.
std::string sanitize_utf8(std::string_view bytes);

// Incremental form of sanitize_utf8: the concatenation of every feed() and
// the final finish() equals sanitize_utf8 of the concatenated input.
class Utf8StreamSanitizer {
 public:
  // Valid text completed by `bytes`; an unfinished character at the end is
  // held (at most 3 bytes) until the next call.
  std::string feed(std::string_view bytes);
  // The held bytes of an unfinished character, as U+FFFD (or "" if none).
  std::string finish();

 private:
  std::string held_;
};

}  // namespace m2::text
