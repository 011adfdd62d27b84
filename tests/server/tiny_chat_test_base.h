// The tokenizer and chat template of tests/data/m2-tiny-chat, loaded once per
// test, and a ServerContext over them (tiny_chat_context.h): what the
// request-parsing tests of the chat, tool and thinking fields build prompts with.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "server/server_context.h"
#include "text/chat_template.h"
#include "text/tokenizer/tokenizer.h"
#include "tiny_chat_context.h"

namespace m2::server {

class TinyChatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const Status loaded = load_tiny_chat(M2CPP_SOURCE_DIR, tokenizer_, template_, ctx_);
    ASSERT_TRUE(loaded.ok()) << loaded.message();
  }

  std::unique_ptr<text::Tokenizer> tokenizer_;
  std::unique_ptr<text::ChatTemplate> template_;
  ServerContext ctx_;
};

}  // namespace m2::server
