// libFuzzer harness: tokenizer.json as Tokenizer::from_json_text loads it
// (model, normalizer, pre-tokenizer and its regexes, added tokens,
// post-processor, decoder), then the loaded tokenizer on a text. Input: a
// length byte, that many bytes of text to encode, then the JSON.
//
// Property: loading refuses with a Status or gives a tokenizer whose encode
// returns ids it has tokens for, and whose decode of them returns valid
// UTF-8 (the server sends it as JSON).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_check.h"
#include "text/tokenizer/tokenizer.h"
#include "text/utf8_sanitizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t text_len = std::min<size_t>(data[0], size - 1);
  const std::string_view text(reinterpret_cast<const char*>(data + 1), text_len);
  const std::string_view json(reinterpret_cast<const char*>(data + 1 + text_len), size - 1 - text_len);
  auto tok = m2::text::Tokenizer::from_json_text(json, "tokenizer.json");
  if (!tok.ok()) return 0;
  for (bool special : {false, true}) {
    auto ids = (*tok)->encode(text, special);
    if (!ids.ok()) continue;  // e.g. text that is not UTF-8
    for (int32_t id : *ids)
      FUZZ_CHECK(id >= 0 && id < (*tok)->vocab_size(), "encode gave id %d of a vocabulary of %d", id,
                 (*tok)->vocab_size());
    for (bool skip : {false, true}) {
      auto back = (*tok)->decode(*ids, skip);
      if (back.ok()) (void)m2::text::sanitize_utf8(*back);
    }
  }
  return 0;
}
