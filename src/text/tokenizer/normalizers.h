// tokenizer.json normalizers: NFC, NFD, NFKC, NFKD, Lowercase, Replace,
// Prepend, Strip and Sequence, with HF tokenizers' exact semantics. HF
// normalizes each piece of text between added tokens on its own.
#pragma once

#include <memory>
#include <string>

#include "text/tokenizer/component_json.h"

namespace m2::text::tok {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // Normalizes valid UTF-8 in place (it stays valid UTF-8).
  virtual Status normalize(std::string& text) const = 0;
  // True if it may delete characters at the start of the text (Strip,
  // Replace): Metaspace's "first" prepend scheme then depends on offsets
  // we do not track, and is refused.
  virtual bool may_remove_leading() const { return false; }
};

// From a "normalizer" object; unknown types are an error naming the path.
Result<std::unique_ptr<Normalizer>> make_normalizer(const JsonNode& node);

}  // namespace m2::text::tok
