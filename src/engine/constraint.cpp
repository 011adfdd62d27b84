#include "engine/constraint.h"

#include <xgrammar/xgrammar.h>

#include <algorithm>
#include <stdexcept>
#include <thread>

#include "text/tokenizer/tokenizer.h"

namespace m2 {

struct ConstraintCompiler::Impl {
  xgrammar::TokenizerInfo info;
  // Mutable: compiling fills the compiler's cache (xgrammar makes that thread-safe).
  mutable xgrammar::GrammarCompiler compiler;
  Impl(xgrammar::TokenizerInfo i, int threads) : info(i), compiler(info, threads, /*cache_enabled=*/true) {}
};

struct Constraint::Impl {
  xgrammar::CompiledGrammar grammar;
};

namespace {

xgrammar::CompiledGrammar compile_source(xgrammar::GrammarCompiler& compiler, const ConstraintSource& source) {
  using Kind = ConstraintSource::Kind;
  switch (source.kind) {
    case Kind::kJsonSchema:
      // Any whitespace between tokens, as JSON allows, but at most 16
      // characters of it in a row: a model cannot loop on blanks forever.
      // strict_mode: properties and items the schema does not name are not
      // generated (the output still validates against the schema).
      return compiler.CompileJSONSchema(source.text, /*any_whitespace=*/true, std::nullopt, std::nullopt,
                                        /*strict_mode=*/true, /*max_whitespace_cnt=*/16);
    case Kind::kRegex: return compiler.CompileRegex(source.text);
    case Kind::kGrammar: return compiler.CompileGrammar(source.text, "root");
    case Kind::kStructuralTag: return compiler.CompileStructuralTag(source.text);
  }
  throw std::invalid_argument("unknown constraint kind");
}

}  // namespace

struct ConstraintMatcher::Impl {
  std::shared_ptr<const Constraint> constraint;
  xgrammar::GrammarMatcher matcher;
};

Result<std::unique_ptr<ConstraintCompiler>> ConstraintCompiler::create(const text::Tokenizer& tokenizer,
                                                                       int vocab_size,
                                                                       std::vector<int32_t> stop_ids) {
  if (!tokenizer.decodes_byte_level())
    return errorf("constrained decoding needs a byte-level (ByteLevel decoder) tokenizer");
  const int table = std::min(vocab_size, tokenizer.vocab_size());
  // RAW vocabulary: each token's exact bytes. A special token skipped by
  // decoding, or an id without a token, is "" (xgrammar never allows it
  // unless it is a stop id).
  std::vector<std::string> vocab(static_cast<size_t>(table));
  for (int id = 0; id < table; ++id) {
    if (auto t = tokenizer.token_for_decode(id, /*skip_special_tokens=*/true))
      text::Tokenizer::byte_level_bytes(*t, vocab[static_cast<size_t>(id)]);
  }
  std::sort(stop_ids.begin(), stop_ids.end());
  stop_ids.erase(std::unique(stop_ids.begin(), stop_ids.end()), stop_ids.end());
  for (int32_t id : stop_ids)
    if (id < 0 || id >= vocab_size) return errorf("stop id {} is outside the vocabulary [0, {})", id, vocab_size);
  try {
    xgrammar::TokenizerInfo info(vocab, xgrammar::VocabType::RAW, vocab_size, stop_ids, false);
    const int threads = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, 8);
    return std::unique_ptr<ConstraintCompiler>(
        new ConstraintCompiler(std::make_unique<Impl>(std::move(info), threads), vocab_size));
  } catch (const std::exception& e) {
    return errorf("constrained decoding: the vocabulary is not usable: {}", e.what());
  }
}

ConstraintCompiler::ConstraintCompiler(std::unique_ptr<Impl> impl, int vocab_size)
    : impl_(std::move(impl)), vocab_size_(vocab_size) {}
ConstraintCompiler::~ConstraintCompiler() = default;

Result<std::shared_ptr<const Constraint>> ConstraintCompiler::compile(const ConstraintSource& source) const {
  std::unique_ptr<Constraint::Impl> impl;
  try {
    impl.reset(new Constraint::Impl{compile_source(impl_->compiler, source)});
  } catch (const std::exception& e) {
    std::string what = e.what();
    // xgrammar's messages may carry its source location first ("[hh:mm:ss] file.cc:123: ");
    // the client gets the reason only.
    if (auto p = what.find(".cc:"); p != std::string::npos) {
      if (auto colon = what.find(": ", p + 4); colon != std::string::npos) what = what.substr(colon + 2);
    }
    return errorf("{}", what);
  }
  return std::shared_ptr<const Constraint>(new Constraint(std::move(impl), vocab_size_));
}

Constraint::Constraint(std::unique_ptr<Impl> impl, int vocab_size) : impl_(std::move(impl)), vocab_size_(vocab_size) {}
Constraint::~Constraint() = default;

ConstraintMatcher::ConstraintMatcher(std::shared_ptr<const Constraint> constraint)
    : impl_(new Impl{constraint, xgrammar::GrammarMatcher(constraint->impl_->grammar)}) {}

ConstraintMatcher::~ConstraintMatcher() = default;

bool ConstraintMatcher::accept(int32_t token) {
  if (impl_->matcher.IsTerminated()) return false;
  return impl_->matcher.AcceptToken(token);
}

void ConstraintMatcher::fill_mask(std::span<uint32_t> words) {
  const int64_t n = constraint_mask_words(impl_->constraint->vocab_size());
  if (static_cast<int64_t>(words.size()) < n) return;  // the caller sizes it; never written past
  if (impl_->matcher.IsTerminated()) {  // nothing may follow a stop id
    std::fill(words.begin(), words.begin() + n, 0u);
    return;
  }
  // xgrammar writes an int32 bitmask of the same layout straight into `words`.
  int64_t shape[1] = {n};
  DLTensor t{};
  t.data = words.data();
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = 1;
  t.dtype = DLDataType{kDLInt, 32, 1};
  t.shape = shape;
  impl_->matcher.FillNextTokenBitmask(&t, 0);
}

bool ConstraintMatcher::terminated() const { return impl_->matcher.IsTerminated(); }

}  // namespace m2
