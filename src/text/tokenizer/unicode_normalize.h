// Unicode normalization forms as HF tokenizers computes them.
//
// HF's normalizers (NFC, NFD, NFKC, NFKD) use the unicode-normalization-
// alignments crate, whose data predate Unicode 11. utf8proc (Unicode 15)
// does the work here, with three masks read back from HF by the table
// generator: characters whose decomposition HF does not know (kept as is),
// marks whose combining class HF does not know (treated as starters), and
// composites HF does not form.
#pragma once

#include <string>
#include <string_view>

namespace m2::text::tok {

enum class NormalForm { kNFC, kNFD, kNFKC, kNFKD };

// `text` must be valid UTF-8.
std::string normalize_unicode(std::string_view text, NormalForm form);

}  // namespace m2::text::tok
