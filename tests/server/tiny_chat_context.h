// The tokenizer and chat template of tests/data/m2-tiny-chat and a
// ServerContext over them, as the request-parsing code sees them on a request
// thread. Free of gtest so that both the gtest fixtures (tiny_chat_test_base.h)
// and the libFuzzer harnesses (tests/fuzz/fuzz_request_json.cpp) build it the
// same way; each reports a failure its own way.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "server/server_context.h"
#include "text/chat_template.h"
#include "text/tokenizer/tokenizer.h"
#include "util/status.h"

namespace m2::server {

// Loads the fixture's tokenizer and chat template into `tokenizer` and
// `chat_template` and points `ctx` at them, with a 2048-token context and the
// tokenizer's vocabulary size. ServerContext holds atomics and cannot move, so
// it is filled in place; the caller keeps the two owners alive beside it.
// `source_dir` is the repository root (M2CPP_SOURCE_DIR).
inline Status load_tiny_chat(const std::string& source_dir, std::unique_ptr<text::Tokenizer>& tokenizer,
                             std::unique_ptr<text::ChatTemplate>& chat_template, ServerContext& ctx) {
  const std::string dir = source_dir + "/tests/data/m2-tiny-chat";
  auto tok = text::Tokenizer::load_from_dir(dir);
  if (!tok.ok()) return tok.status();
  tokenizer = std::move(*tok);
  auto tpl = text::ChatTemplate::load_from_dir(dir);
  if (!tpl.ok()) return tpl.status();
  chat_template = std::make_unique<text::ChatTemplate>(std::move(*tpl));
  ctx.tokenizer = tokenizer.get();
  ctx.chat_template = chat_template.get();
  ctx.max_model_len = 2048;
  ctx.vocab_size = tokenizer->vocab_size();
  return {};
}

}  // namespace m2::server
