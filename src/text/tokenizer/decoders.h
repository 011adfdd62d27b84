// tokenizer.json decoders: ByteLevel, Metaspace, Replace, ByteFallback,
// Fuse, Strip, BPEDecoder, Sequence, with HF's decode_chain semantics (a
// list of token strings in, a list out; the result is their concatenation).
//
// Tokens are valid UTF-8 at every step: ByteLevel maps its tokens back to
// raw bytes and makes them text at once, each ill-formed subpart becoming
// U+FFFD (Rust's from_utf8_lossy inside HF's ByteLevel decoder).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "text/tokenizer/component_json.h"

namespace m2::text::tok {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual Status decode_chain(std::vector<std::string>& tokens) const = 0;
  // True if the whole chain is HF's ByteLevel rule: from_utf8_lossy of the
  // concatenated bytes of each token (ByteLevelAlphabet::decode_token). The
  // streaming detokenizer then decodes token by token, exactly.
  virtual bool is_byte_level() const { return false; }
  // True if tokens after `token` can still change how it decodes (a
  // ByteFallback byte: its run renders as text or as U+FFFDs once the run
  // ends). The streaming detokenizer holds its output back meanwhile.
  virtual bool awaits_more(std::string_view token) const { return false; }
  // True if decoding a window of recent tokens and emitting what grew
  // reproduces the full decode (the streaming detokenizer's method) with
  // this step in the chain. `joined`: an earlier step already made the
  // tokens one string, so a step that looks at its neighbours (Replace,
  // Strip at the end) would see across token boundaries.
  virtual bool window_exact(bool joined) const = 0;
  // True if the step joins all tokens into one (ByteLevel, Fuse).
  virtual bool joins() const { return false; }
};

Result<std::unique_ptr<Decoder>> make_decoder(const JsonNode& node);

}  // namespace m2::text::tok
