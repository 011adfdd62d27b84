// The tokenizer and chat template of tests/data/m2-tiny-chat, loaded once per
// test, and a ServerContext over them: what the request-parsing tests of the
// chat, tool and thinking fields build prompts with.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "server/server_context.h"
#include "text/chat_template.h"
#include "text/tokenizer/tokenizer.h"

namespace m2::server {

class TinyChatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = std::string(M2CPP_SOURCE_DIR) + "/tests/data/m2-tiny-chat";
    auto tok = text::Tokenizer::load_from_dir(dir);
    ASSERT_TRUE(tok.ok()) << tok.status().message();
    tokenizer_ = std::move(*tok);
    auto tpl = text::ChatTemplate::load_from_dir(dir);
    ASSERT_TRUE(tpl.ok()) << tpl.status().message();
    template_ = std::make_unique<text::ChatTemplate>(std::move(*tpl));
    ctx_.tokenizer = tokenizer_.get();
    ctx_.chat_template = template_.get();
    ctx_.max_model_len = 2048;
    ctx_.vocab_size = tokenizer_->vocab_size();
  }

  std::unique_ptr<text::Tokenizer> tokenizer_;
  std::unique_ptr<text::ChatTemplate> template_;
  ServerContext ctx_;
};

}  // namespace m2::server
