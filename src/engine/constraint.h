// Constrained decoding: a grammar the output must match, as a token mask
// the sampler applies (SampleRow::allowed). The grammar engine is xgrammar
// (cmake/xgrammar.cmake, docs/decisions/constrained-decoding-xgrammar.md);
// this header hides it: the server compiles a ConstraintSource into a
// Constraint (immutable, shared by a request's sequences), the engine keeps
// one ConstraintMatcher per sequence.
//
// Masks are bitmasks over the model's vocabulary: word w, bit b (uint32)
// stands for token 32 w + b; 1 = the token may be drawn. A 200,064-token
// vocabulary takes 6,252 words (25 KB) per sequence.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "util/status.h"

namespace m2 {

namespace text {
class Tokenizer;
}

// What a request constrains its output to, in the grammar engine's terms.
struct ConstraintSource {
  enum class Kind {
    kJsonSchema,     // text: a JSON Schema (draft 2020-12 subset xgrammar converts)
    kRegex,          // text: a regular expression the whole output must match
    kGrammar,        // text: an EBNF / GBNF grammar, root rule `root`
    kStructuralTag,  // text: an xgrammar structural tag (the M2 tool-call block)
  };
  Kind kind = Kind::kJsonSchema;
  std::string text;
};

// Number of uint32 mask words for `vocab_size` tokens.
inline int64_t constraint_mask_words(int64_t vocab_size) { return (vocab_size + 31) / 32; }

class Constraint;

// The grammar compiler of one model's vocabulary: the decoded bytes of every
// token, built once at start-up (the tokenizer's ids; ids past its table up
// to the model's vocab_size are never allowed) and the stop ids a finished
// grammar allows. Thread-safe; compiled grammars are cached by source.
class ConstraintCompiler {
 public:
  static Result<std::unique_ptr<ConstraintCompiler>> create(const text::Tokenizer& tokenizer, int vocab_size,
                                                            std::vector<int32_t> stop_ids);
  ~ConstraintCompiler();

  // Errors (an invalid schema, regex or grammar) are the client's.
  Result<std::shared_ptr<const Constraint>> compile(const ConstraintSource& source) const;
  int vocab_size() const { return vocab_size_; }

 private:
  struct Impl;
  ConstraintCompiler(std::unique_ptr<Impl> impl, int vocab_size);
  std::unique_ptr<Impl> impl_;
  int vocab_size_;
};

class Constraint {
 public:
  ~Constraint();
  int vocab_size() const { return vocab_size_; }

 private:
  friend class ConstraintCompiler;
  friend class ConstraintMatcher;
  struct Impl;
  Constraint(std::unique_ptr<Impl> impl, int vocab_size);
  std::unique_ptr<Impl> impl_;
  int vocab_size_;
};

// One sequence's position in its grammar. Not thread-safe; one thread at a
// time (the engine's mask task, or the engine thread between steps).
class ConstraintMatcher {
 public:
  explicit ConstraintMatcher(std::shared_ptr<const Constraint> constraint);
  ~ConstraintMatcher();

  // Advances by one generated token; false if the grammar does not allow it
  // (the state is then unchanged).
  bool accept(int32_t token);
  // Writes the tokens allowed next into `words` (constraint_mask_words of
  // the vocabulary). A finished grammar allows only the stop ids.
  void fill_mask(std::span<uint32_t> words);
  // The grammar has accepted a stop id: nothing more may follow.
  bool terminated() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace m2
