// The server's request handling that needs no socket: sampling fields and
// the fields every OpenAI route reads, context fitting, the chat prompt with
// tool_choice forcing and the engine job of a chat turn, the Anthropic
// request conversion, replay files, error shapes, metrics text, the
// constant-time key comparison.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "server/anthropic_request.h"
#include "server/api_error.h"
#include "server/chat_prompt.h"
#include "server/metrics.h"
#include "server/openai_generation.h"
#include "server/replay.h"
#include "server/sampling_request.h"
#include "server/server.h"
#include "tiny_chat_test_base.h"

namespace m2::server {
namespace {

std::string data(const std::string& rel) { return std::string(M2CPP_SOURCE_DIR) + "/tests/data/" + rel; }

const ThinkingSigner& signer() {
  static const ThinkingSigner s;
  return s;
}

OrderedJson J(const char* text) { return OrderedJson::parse(text); }

TEST(SamplingRequest, ReadsFieldsOverDefaults) {
  SamplingParams defaults;
  defaults.top_k = 40;
  auto r = parse_sampling_request(
      J(R"({"n": 2, "temperature": 0.5, "top_p": 0.9, "seed": -1, "max_completion_tokens": 7,
            "stop": "END", "stop_token_ids": [5], "logit_bias": {"12": -100}, "logprobs": true,
            "top_logprobs": 3, "min_tokens": 2, "ignore_eos": true, "user": "u"})"),
      defaults, LogprobsStyle::kChat);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->params.n, 2);
  EXPECT_FLOAT_EQ(r->params.temperature, 0.5f);
  EXPECT_EQ(r->params.top_k, 40);
  EXPECT_EQ(*r->params.seed, static_cast<uint64_t>(-1));
  EXPECT_EQ(*r->max_tokens, 7);
  EXPECT_EQ(r->params.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(r->params.logit_bias.at(12), -100.0f);
  EXPECT_EQ(r->params.logprobs, 3);
  EXPECT_TRUE(r->params.ignore_eos);
  auto c = parse_sampling_request(J(R"({"logprobs": 2, "echo": true})"), defaults, LogprobsStyle::kCompletion);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->params.logprobs, 2);
}

TEST(SamplingRequest, RefusesWrongTypesAndUnsupportedFields) {
  for (const char* body : {R"({"temperature": "hot"})", R"({"n": 0})", R"({"max_tokens": 1.5})",
                           R"({"max_tokens": 0})", R"({"stop": [1]})", R"({"logit_bias": {"x": 1}})",
                           R"({"logit_bias": {"1": 500}})", R"({"top_logprobs": 2})", R"({"top_logprobs": 99, "logprobs": true})",
                           R"({"include_stop_str_in_output": true})", R"({"best_of": 3})",
                           R"({"seed": "x"})"}) {
    EXPECT_FALSE(parse_sampling_request(J(body), SamplingParams(), LogprobsStyle::kChat).ok()) << body;
  }
  auto ok = parse_sampling_request(J(R"({"response_format": {"type": "text"}, "max_tokens": 3.0})"), SamplingParams(),
                                   LogprobsStyle::kChat);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok->max_tokens, 3);
}

TEST(SamplingRequest, FitsTheContext) {
  SamplingRequest r;
  EXPECT_TRUE(fit_to_context(r, 100, 2048, false).ok());
  EXPECT_EQ(r.params.max_tokens, 1948);
  r.max_tokens = 5000;
  Status s = fit_to_context(r, 100, 2048, false);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("2048"), std::string::npos);
  EXPECT_NE(s.message().find("5100"), std::string::npos);
  EXPECT_TRUE(fit_to_context(r, 100, 2048, true).ok());  // Anthropic: clamped
  EXPECT_EQ(r.params.max_tokens, 1948);
  s = fit_to_context(r, 2048, 2048, true);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("your prompt is 2048 tokens"), std::string::npos);
}

TEST(OpenAiRequest, ReadsTheSharedFields) {
  auto r = parse_openai_request(J(R"({"stream": true, "stream_options": {"include_usage": true},
                                      "return_tokens_as_token_ids": true, "n": 2, "logprobs": 1})"),
                                SamplingParams(), LogprobsStyle::kCompletion);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->stream && r->include_usage && r->tokens_as_ids);
  EXPECT_EQ(r->sampling.params.n, 2);
  EXPECT_EQ(r->sampling.params.logprobs, 1);
  auto none = parse_openai_request(J("{}"), SamplingParams(), LogprobsStyle::kChat);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->stream || none->include_usage || none->tokens_as_ids);
  // The first wrong field is named: the shared ones before the sampling fields.
  auto bad = parse_openai_request(J(R"({"temperature": "hot", "return_tokens_as_token_ids": 1})"), SamplingParams(),
                                  LogprobsStyle::kChat);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "'return_tokens_as_token_ids' must be a boolean, got an integer");
  EXPECT_FALSE(parse_openai_request(J(R"({"stream_options": 1})"), SamplingParams(), LogprobsStyle::kChat).ok());
  EXPECT_FALSE(parse_openai_request(J(R"({"temperature": "hot"})"), SamplingParams(), LogprobsStyle::kChat).ok());
}

class ChatPromptTest : public TinyChatTest {
 protected:
  Result<ChatPrompt> build(const char* body) { return build_chat_prompt(J(body), *template_, *tokenizer_); }
  std::string decode(const std::vector<int32_t>& ids) { return tokenizer_->decode(ids, false).value(); }
};

constexpr const char* kTool = R"({"type": "function", "function": {"name": "get_weather", "parameters":
  {"type": "object", "properties": {"days": {"type": "integer"}}}}})";

TEST_F(ChatPromptTest, RendersAndTokenizes) {
  auto p = build(R"({"messages": [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "Hi"}]})");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->text, "]~!b[]~b]system\nBe brief.[e~[\n]~b]user\nHi[e~[\n]~b]ai\n<think>\n");
  EXPECT_EQ(decode(p->tokens), p->text);
  EXPECT_TRUE(p->parse.starts_in_reasoning);
  EXPECT_FALSE(p->parse.parse_tool_calls);
  EXPECT_EQ(p->forced_after_token, -1);
}

TEST_F(ChatPromptTest, ToolChoiceForcesTheOpening) {
  const std::string tools = std::string("[") + kTool + "]";
  auto p = build(("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": " + tools +
                  ", \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}}}").c_str());
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->forced_after_token, *tokenizer_->token_to_id("</think>"));
  EXPECT_EQ(decode(p->forced_after), "\n\n<minimax:tool_call>\n<invoke name=\"get_weather\">");
  EXPECT_TRUE(p->parse.parse_tool_calls);
  EXPECT_EQ(p->parse.schemas.param_types("get_weather", "days").bits, text::ParamTypes::kInteger);
  auto r = build(("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": " + tools +
                  ", \"tool_choice\": \"required\"}").c_str());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(decode(r->forced_after), "\n\n<minimax:tool_call>\n");
  auto none = build(("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": " + tools +
                     ", \"tool_choice\": \"none\"}").c_str());
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->parse.parse_tool_calls);
  ASSERT_TRUE(none->parse.allowed_tools.has_value());
  EXPECT_TRUE(none->parse.allowed_tools->empty()) << "a call written anyway is dropped";
  EXPECT_TRUE(none->forced_after.empty());
}

TEST_F(ChatPromptTest, ContinuedTurnsAndTheParserState) {
  auto answer = build(R"({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "{"}],
                          "continue_final_message": true})");
  ASSERT_TRUE(answer.ok()) << answer.status().message();
  EXPECT_EQ(answer->text.substr(answer->text.size() - 8), "]~b]ai\n{");
  EXPECT_FALSE(answer->parse.starts_in_reasoning) << "the model continues the answer";
  auto thinking = build(R"({"messages": [{"role": "user", "content": "q"},
      {"role": "assistant", "content": "", "reasoning_content": "First,"}], "continue_final_message": true})");
  ASSERT_TRUE(thinking.ok()) << thinking.status().message();
  EXPECT_TRUE(thinking->parse.starts_in_reasoning) << "the model continues its reasoning";
  auto closed = build(R"({"messages": [{"role": "user", "content": "q"}], "add_generation_prompt": false})");
  ASSERT_TRUE(closed.ok());
  EXPECT_EQ(closed->text.substr(closed->text.size() - 5), "[e~[\n");
  EXPECT_FALSE(closed->parse.starts_in_reasoning);
}

TEST_F(ChatPromptTest, RefusesBadMessagesAndToolChoices) {
  for (const char* body : {
           R"({})", R"({"messages": []})", R"({"messages": "x"})", R"({"messages": [{"role": "robot", "content": "x"}]})",
           R"({"messages": [{"content": "x"}]})", R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"})",
           R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]})",
           R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "sometimes"})",
           R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": {"type": "function", "function": {"name": "f"}}})"}) {
    EXPECT_FALSE(build(body).ok()) << body;
  }
}

TEST_F(ChatPromptTest, TurnIsOneFittedEngineJob) {
  ServerContext ctx;
  ctx.tokenizer = tokenizer_.get();
  ctx.chat_template = template_.get();
  ctx.max_model_len = 256;
  ctx.vocab_size = tokenizer_->vocab_size();
  const OrderedJson body = J((std::string(R"({"messages": [{"role": "user", "content": "x"}], "tools": [)") + kTool +
                              R"(], "tool_choice": "required"})").c_str());
  auto t = build_chat_turn(body, SamplingRequest(), ctx, false);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->job.prompt, t->prompt.tokens);
  EXPECT_EQ(t->job.params.max_tokens, 256 - static_cast<int64_t>(t->prompt.tokens.size()));
  EXPECT_EQ(t->job.params.forced_after_token, t->prompt.forced_after_token);
  EXPECT_EQ(t->job.params.forced_after, t->prompt.forced_after);
  EXPECT_FALSE(t->job.params.constraint) << "no compiler: the call is forced open, its arguments free";
  auto compiler = ConstraintCompiler::create(*tokenizer_, ctx.vocab_size, {*tokenizer_->token_to_id("[e~[")});
  ASSERT_TRUE(compiler.ok()) << compiler.status().message();
  ctx.constraints = compiler->get();
  auto held = build_chat_turn(body, SamplingRequest(), ctx, false);
  ASSERT_TRUE(held.ok()) << held.status().message();
  EXPECT_TRUE(held->job.params.constraint) << "the arguments are held to the schema";
  EXPECT_EQ(held->job.params.constraint_after_token, held->prompt.reasoning_end_token);
  ctx.constraints = nullptr;
  SamplingRequest more;
  more.max_tokens = 1000;  // more than the context has left: refused, or clamped (Anthropic)
  EXPECT_FALSE(build_chat_turn(body, more, ctx, false).ok());
  auto clamped = build_chat_turn(body, more, ctx, true);
  ASSERT_TRUE(clamped.ok()) << clamped.status().message();
  EXPECT_EQ(clamped->job.params.max_tokens, t->job.params.max_tokens);
  EXPECT_FALSE(build_chat_turn(J(R"({"messages": []})"), SamplingRequest(), ctx, false).ok());
}

TEST(AnthropicRequest, ConvertsBlocksToChatMessages) {
  std::string body = R"({
    "model": "m", "max_tokens": 10, "system": [{"type": "text", "text": "A"}, {"type": "text", "text": "B"}],
    "stop_sequences": ["X"], "temperature": 0.2, "top_k": 5,
    "tools": [{"name": "t", "description": "d", "input_schema": {"type": "object"}}],
    "tool_choice": {"type": "any"},
    "messages": [
      {"role": "user", "content": "q"},
      {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm", "signature": "SIG"},
                                        {"type": "text", "text": "ok"},
                                        {"type": "tool_use", "id": "toolu_1", "name": "t", "input": {"a": 1}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "r1"},
                                   {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true,
                                    "content": [{"type": "text", "text": "boom"}]},
                                   {"type": "text", "text": "next"}]}]})";
  body.replace(body.find("SIG"), 3, signer().sign("hmm"));
  auto r = parse_anthropic_request(J(body.c_str()), SamplingParams(), signer(), false);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const OrderedJson& m = r->chat_body["messages"];
  ASSERT_EQ(m.size(), 6u);
  EXPECT_EQ(m[0], J(R"({"role": "system", "content": "A\nB"})"));
  EXPECT_EQ(m[2]["reasoning_content"], "hmm");
  EXPECT_EQ(m[2]["content"], "ok");
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["arguments"], J(R"({"a": 1})"));
  EXPECT_EQ(m[3], J(R"({"role": "tool", "tool_call_id": "toolu_1", "content": "r1"})"));
  EXPECT_EQ(m[4]["content"], "Error: boom");
  EXPECT_EQ(m[5], J(R"({"role": "user", "content": "next"})"));
  EXPECT_EQ(r->chat_body["tools"][0]["function"]["parameters"], J(R"({"type": "object"})"));
  EXPECT_EQ(r->chat_body["tool_choice"], "required");
  EXPECT_EQ(r->sampling.params.stop, std::vector<std::string>{"X"});
  EXPECT_EQ(r->sampling.params.top_k, 5);
  EXPECT_EQ(*r->sampling.max_tokens, 10);
}

TEST(AnthropicRequest, ThinkingBlocksMustCarryThisServersSignature) {
  const ThinkingSigner other;
  const std::string sig = signer().sign("My plan.");
  EXPECT_TRUE(signer().verify("My plan.", sig));
  EXPECT_FALSE(signer().verify("My plan!", sig));
  EXPECT_FALSE(other.verify("My plan.", sig)) << "another key: another server";
  EXPECT_EQ(sig.size(), 44u) << "base64 of 32 bytes";
  auto body = [](const std::string& thinking, const std::string& signature) {
    OrderedJson b = J(R"({"max_tokens": 5, "messages": [{"role": "user", "content": "q"},
        {"role": "assistant", "content": [{"type": "thinking"}, {"type": "text", "text": "ok"}]},
        {"role": "user", "content": "more"}]})");
    b["messages"][1]["content"][0]["thinking"] = thinking;
    if (!signature.empty()) b["messages"][1]["content"][0]["signature"] = signature;
    return b;
  };
  auto good = parse_anthropic_request(body("My plan.", sig), SamplingParams(), signer(), false);
  ASSERT_TRUE(good.ok()) << good.status().message();
  EXPECT_EQ(good->chat_body["messages"][1]["reasoning_content"], "My plan.");
  auto tampered = parse_anthropic_request(body("My plan, changed.", sig), SamplingParams(), signer(), false);
  ASSERT_FALSE(tampered.ok());
  EXPECT_EQ(tampered.status().message().rfind("messages[1].content[0].signature: the thinking block is not as", 0), 0u)
      << tampered.status().message();
  auto unsigned_block = parse_anthropic_request(body("My plan.", ""), SamplingParams(), signer(), true);
  ASSERT_FALSE(unsigned_block.ok()) << "count_tokens checks them too";
  EXPECT_EQ(unsigned_block.status().message(), "messages[1].content[0] needs a string 'signature'");
}

TEST(AnthropicRequest, FinalAssistantMessageIsAPrefill) {
  auto r = parse_anthropic_request(J(R"({"max_tokens": 5, "messages": [{"role": "user", "content": "q"},
      {"role": "assistant", "content": [{"type": "text", "text": "The answer is"}]}]})"),
                                   SamplingParams(), signer(), false);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->chat_body["continue_final_message"], true);
  EXPECT_EQ(r->chat_body["messages"].back()["content"], "The answer is");
  // An empty final assistant message asks for a new turn.
  auto empty = parse_anthropic_request(J(R"({"max_tokens": 5, "messages": [{"role": "user", "content": "q"},
      {"role": "assistant", "content": []}]})"), SamplingParams(), signer(), false);
  ASSERT_TRUE(empty.ok()) << empty.status().message();
  EXPECT_FALSE(empty->chat_body.contains("continue_final_message"));
  EXPECT_EQ(empty->chat_body["messages"].size(), 1u);
  auto space = parse_anthropic_request(J(R"({"max_tokens": 5, "messages": [{"role": "user", "content": "q"},
      {"role": "assistant", "content": "Hi "}]})"), SamplingParams(), signer(), false);
  ASSERT_FALSE(space.ok());
  EXPECT_EQ(space.status().message(), "messages[1]: final assistant content cannot end with trailing whitespace");
}

TEST(AnthropicRequest, RefusesWhatTheModelCannotRead) {
  for (const char* body : {
           R"({"messages": [{"role": "user", "content": "x"}]})",  // no max_tokens
           R"({"max_tokens": 5, "messages": [{"role": "system", "content": "x"}]})",
           R"({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "image"}]}]})",
           R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "web_search_20250305", "name": "w"}]})",
           R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "tool_choice": {"type": "maybe"}})"}) {
    EXPECT_FALSE(parse_anthropic_request(J(body), SamplingParams(), signer(), false).ok()) << body;
  }
  EXPECT_TRUE(parse_anthropic_request(J(R"({"messages": [{"role": "user", "content": "x"}]})"), SamplingParams(), signer(), true).ok());
}

TEST(Replay, PlainTextAndMatchedEntries) {
  auto tok = text::Tokenizer::load_from_dir(data("m2-tiny-chat"));
  ASSERT_TRUE(tok.ok());
  const std::string dir = ::testing::TempDir();
  std::ofstream(dir + "/replay.txt") << "Hello</think>\n\nHi[e~[";
  auto plain = ReplaySource::load(dir + "/replay.txt", **tok);
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ((*tok)->decode(*plain->select("anything"), false).value(), "Hello</think>\n\nHi[e~[");
  std::ofstream(dir + "/replay.json") << R"({"outputs": [{"match": "AAA", "output": "a"}, {"output": "b"}]})";
  auto j = ReplaySource::load(dir + "/replay.json", **tok);
  ASSERT_TRUE(j.ok());
  EXPECT_EQ((*tok)->decode(*j->select("xxAAAxx"), false).value(), "a");
  EXPECT_EQ((*tok)->decode(*j->select("zzz"), false).value(), "b");
  std::ofstream(dir + "/bad.json") << R"({"outputs": [{"match": 1}]})";
  EXPECT_FALSE(ReplaySource::load(dir + "/bad.json", **tok).ok());
}

TEST(ApiError, BothShapes) {
  ApiError e;
  e.status = 429;
  e.message = "full";
  e.retry_after_s = 2;
  EXPECT_EQ(error_json(e, ApiFlavor::kOpenAI),
            J(R"({"error": {"message": "full", "type": "rate_limit_error", "param": null, "code": 429}})"));
  EXPECT_EQ(error_json(e, ApiFlavor::kAnthropic),
            J(R"({"type": "error", "error": {"type": "rate_limit_error", "message": "full"}})"));
  HttpResponse r = error_response(e, ApiFlavor::kOpenAI);
  EXPECT_EQ(r.status, 429);
  ASSERT_EQ(r.headers.size(), 1u);
  EXPECT_EQ(r.headers[0].first, "Retry-After");
  e.status = 413;
  EXPECT_EQ(error_json(e, ApiFlavor::kAnthropic)["error"]["type"], "request_too_large");
}

TEST(Metrics, PrometheusText) {
  Metrics m;
  m.count_request("/v1/chat/completions", 200);
  m.count_request("/v1/chat/completions", 200);
  m.count_tokens(10, 5);
  m.observe_request(0.05, 0.02, 0.3, 7, 3);
  EngineLoopStats s;
  s.engine.kv_blocks_used = 3;
  s.engine.kv_blocks_total = 12;
  s.engine.waiting = 1;
  s.queued = 2;
  const std::string t = m.render(s);
  EXPECT_NE(t.find("m2cpp:http_requests_total{route=\"/v1/chat/completions\",status=\"200\"} 2\n"), std::string::npos);
  EXPECT_NE(t.find("m2cpp:prompt_tokens_total 10\n"), std::string::npos);
  EXPECT_NE(t.find("m2cpp:time_to_first_token_seconds_bucket{le=\"0.06\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("m2cpp:time_to_first_token_seconds_bucket{le=\"0.04\"} 0\n"), std::string::npos);
  EXPECT_NE(t.find("m2cpp:num_requests_waiting 3\n"), std::string::npos);
  EXPECT_NE(t.find("m2cpp:kv_cache_usage_perc 0.25\n"), std::string::npos);
}

TEST(Metrics, RouteLabelsComeFromAFixedSet) {
  Metrics m;
  // Unauthenticated clients choose the path: junk, 404s and 401s must not add series.
  for (int i = 0; i < 1000; ++i) m.count_request("/junk/" + std::to_string(i), 404);
  for (int i = 0; i < 10; ++i) m.count_request("/v1/models/name-" + std::to_string(i), 404);
  m.count_request("/v1/chat/completions/extra", 401);
  m.count_request("/health", 200);
  const std::string t = m.render(EngineLoopStats());
  EXPECT_NE(t.find("m2cpp:http_requests_total{route=\"other\",status=\"404\"} 1000\n"), std::string::npos) << t;
  EXPECT_NE(t.find("m2cpp:http_requests_total{route=\"/v1/models/{model}\",status=\"404\"} 10\n"), std::string::npos);
  EXPECT_NE(t.find("m2cpp:http_requests_total{route=\"other\",status=\"401\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("m2cpp:http_requests_total{route=\"/health\",status=\"200\"} 1\n"), std::string::npos);
  EXPECT_EQ(t.find("junk"), std::string::npos);
  EXPECT_EQ(route_label("/v1/completions"), std::string("/v1/completions"));
  EXPECT_EQ(route_label("/v1/completions?x"), std::string("other"));  // paths, not targets, are labelled
}

TEST(SecureEquals, ComparesWholeStrings) {
  EXPECT_TRUE(secure_equals("key", "key"));
  EXPECT_FALSE(secure_equals("key", "kez"));
  EXPECT_FALSE(secure_equals("key", "key2"));
  EXPECT_FALSE(secure_equals("", "key"));
  EXPECT_TRUE(secure_equals("", ""));
}

}  // namespace
}  // namespace m2::server
