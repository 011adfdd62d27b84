// Fast reading of tokenizer.json. Its bulk is model.vocab (up to 200K
// entries) and model.merges (as many): building a JSON DOM of those costs
// ~0.2 s for a 10 MB file, so a SAX pass collects them straight into
// vectors and builds a DOM of the small rest (normalizer, pre_tokenizer,
// added_tokens, ...). Errors name the file and byte offset or entry.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/json.h"
#include "util/status.h"

namespace m2::text::tok {

struct TokenizerFile {
  Json doc;                 // the document, model.vocab and model.merges left out when collected below
  bool has_vocab = false;   // model.vocab was an object, collected into `vocab`
  bool has_merges = false;  // model.merges was an array, collected into `merges`
  std::vector<std::pair<std::string, int32_t>> vocab;       // file order
  std::vector<std::pair<std::string, std::string>> merges;  // by rank
};

// `what` names the document in errors (its path).
Result<TokenizerFile> parse_tokenizer_file(std::string_view text, std::string_view what);

}  // namespace m2::text::tok
