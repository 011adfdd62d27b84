// libFuzzer harness: the request body of every route, through the functions
// the routes call on a request thread (server.cpp serve_body, routes.h), on
// the m2-tiny-chat tokenizer and template. Input: one byte choosing the
// route, then the body's bytes.
//
// Property: any body either fails with a Status (the route's 400) or yields
// engine jobs the engine accepts. An exception escaping these functions is
// a finding: the server would answer 500 (Server::guarded), which for
// client input is a bug.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "../server/tiny_chat_context.h"
#include "fuzz_check.h"
#include "server/anthropic_request.h"
#include "server/api_error.h"
#include "server/chat_prompt.h"
#include "server/json_fields.h"
#include "server/openai_generation.h"
#include "server/server_context.h"
#include "text/chat_request.h"

namespace m2::server {
namespace {

struct Fixture {
  Fixture() {
    const Status loaded = load_tiny_chat(M2CPP_SOURCE_DIR, tokenizer, chat_template, ctx);
    FUZZ_CHECK(loaded.ok(), "%s", loaded.message().c_str());
    ctx.options.served_model_names = {"m2-tiny-chat"};
  }
  std::unique_ptr<text::Tokenizer> tokenizer;
  std::unique_ptr<text::ChatTemplate> chat_template;
  ServerContext ctx;
};

Fixture& fixture() {
  static Fixture* f = new Fixture();  // never destroyed: the fuzzer exits without unwinding
  return *f;
}

void check_job(const EngineJob& job, const ServerContext& ctx) {
  FUZZ_CHECK(!job.prompt.empty(), "an engine job without prompt tokens");
  for (int32_t id : job.prompt) FUZZ_CHECK(id >= 0 && id < ctx.vocab_size, "prompt token %d", id);
  FUZZ_CHECK(static_cast<int64_t>(job.prompt.size()) + job.params.max_tokens <= ctx.max_model_len,
             "prompt %zu + max_tokens %lld over the context", job.prompt.size(),
             static_cast<long long>(job.params.max_tokens));
  FUZZ_CHECK(job.params.validate(ctx.vocab_size).ok(), "a job the engine refuses");
}

enum Route { kChat, kCompletions, kMessages, kCountTokens, kTokenize, kDetokenize, kNumRoutes };

void run(Route route, const OrderedJson& body, ServerContext& ctx) {
  switch (route) {
    case kChat: {  // handle_chat_completions
      auto r = parse_openai_request(body, ctx.defaults, LogprobsStyle::kChat);
      if (!r.ok()) return;
      auto turn = build_chat_turn(body, r->sampling, ctx, false);
      if (turn.ok()) check_job(turn->job, ctx);
      return;
    }
    case kCompletions: {  // handle_completions
      auto r = parse_completion_request(ctx, body);
      if (!r.ok()) return;
      FUZZ_CHECK(r->jobs.size() == r->prompts.size(), "one job per prompt");
      for (const EngineJob& job : r->jobs) check_job(job, ctx);
      return;
    }
    case kMessages: {  // handle_messages
      auto req = parse_anthropic_request(body, ctx.defaults, ctx.thinking_signer, false);
      if (!req.ok()) return;
      auto turn = build_chat_turn(req->chat_body, std::move(req->sampling), ctx, true);
      if (turn.ok()) check_job(turn->job, ctx);
      return;
    }
    case kCountTokens: {  // handle_count_tokens
      auto req = parse_anthropic_request(body, ctx.defaults, ctx.thinking_signer, true);
      if (req.ok()) (void)build_chat_prompt(req->chat_body, *ctx.chat_template, *ctx.tokenizer);
      return;
    }
    case kTokenize: {  // Server::serve_body, /tokenize
      auto add_special = opt_bool(body, "add_special_tokens");
      if (!add_special.ok() || !opt_bool(body, "return_token_strs").ok()) return;
      Result<std::vector<int32_t>> ids = errorf("neither");
      if (body.contains("messages")) {
        auto text = ctx.chat_template->render_request(body);
        if (text.ok()) ids = ctx.tokenizer->encode(*text, add_special->value_or(false));
      } else if (auto prompt = opt_string(body, "prompt"); prompt.ok() && *prompt) {
        ids = ctx.tokenizer->encode(**prompt, add_special->value_or(true));
      }
      if (!ids.ok()) return;
      for (int32_t id : *ids) FUZZ_CHECK(ctx.tokenizer->id_to_token(id).has_value(), "encode gave id %d", id);
      (void)dump_json(OrderedJson{{"tokens", *ids}});
      return;
    }
    case kDetokenize: {  // Server::serve_body, /detokenize
      auto ids = opt_int_list(body, "tokens");
      if (!ids.ok()) return;
      std::vector<int32_t> tokens;
      for (int64_t id : *ids) {
        if (id < 0 || id >= ctx.vocab_size) return;
        tokens.push_back(static_cast<int32_t>(id));
      }
      auto text = ctx.tokenizer->decode(tokens, false);
      if (text.ok()) (void)dump_json(OrderedJson{{"prompt", *text}});  // the response must serialise
      return;
    }
    case kNumRoutes: return;
  }
}

}  // namespace
}  // namespace m2::server

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace m2::server;
  if (size < 1) return 0;
  Fixture& f = fixture();
  const Route route = static_cast<Route>(data[0] % kNumRoutes);
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  auto parsed = m2::text::parse_ordered_json(text, "request body");
  if (!parsed.ok() || !parsed->is_object()) return 0;
  if (!opt_string(*parsed, "model").ok()) return 0;
  run(route, *parsed, f.ctx);
  return 0;
}
