// The Responses API and the operations pieces that need no socket: the
// request conversion to the chat shape, the output items and their event
// sequence, the response store's byte-bounded LRU, model-name patterns,
// request ids and CORS, and the vLLM-named metrics.
#include <gtest/gtest.h>

#include "server/metrics.h"
#include "server/model_names.h"
#include "server/request_headers.h"
#include "server/response_store.h"
#include "server/responses_output.h"
#include "server/responses_request.h"

namespace m2::server {
namespace {

OrderedJson J(const char* text) { return OrderedJson::parse(text); }

const ThinkingSigner& signer() {
  static const ThinkingSigner s;
  return s;
}

Result<ResponsesRequest> parse(const char* body, const OrderedJson& previous = nullptr) {
  return parse_responses_request(J(body), SamplingParams(), previous, signer());
}

TEST(ResponsesRequest, StringInputAndInstructions) {
  auto r = parse(R"({"input": "hi", "instructions": "be brief", "max_output_tokens": 9, "temperature": 0.5})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->chat_body["messages"],
            J(R"([{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}])"));
  EXPECT_EQ(r->sampling.max_tokens, 9);
  EXPECT_FLOAT_EQ(r->sampling.params.temperature, 0.5f);
  EXPECT_TRUE(r->store);
  EXPECT_FALSE(r->stream);
  ASSERT_EQ(r->input_items.size(), 1u);
  EXPECT_EQ(r->input_items[0]["content"][0]["type"], "input_text");
  EXPECT_TRUE(r->input_items[0].contains("id"));
}

TEST(ResponsesRequest, ItemsBecomeOneAssistantTurnAndToolMessages) {
  auto r = parse(R"({"input": [
      {"role": "user", "content": [{"type": "input_text", "text": "weather?"}]},
      {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "think"}]},
      {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"location\":\"Paris\"}"},
      {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}]})",
                 J(R"([{"role": "user", "content": "earlier"}])"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  const OrderedJson& m = r->chat_body["messages"];
  ASSERT_EQ(m.size(), 4u) << m.dump();
  EXPECT_EQ(m[0]["content"], "earlier");  // the stored conversation comes first
  EXPECT_EQ(m[2]["role"], "assistant");
  EXPECT_EQ(m[2]["reasoning_content"], "think");
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(m[2]["tool_calls"][0]["id"], "call_1");
  EXPECT_EQ(m[3]["role"], "tool");
  EXPECT_EQ(m[3]["tool_call_id"], "call_1");
  EXPECT_EQ(r->new_messages.size(), 3u);  // the stored turns are not part of this input
}

TEST(ResponsesRequest, EncryptedReasoningIsThisServersSealOnly) {
  for (const std::string text :
       {std::string(), std::string("a"), std::string("ab"), std::string("abc"), std::string("Ünïcode reasoning\n")}) {
    const std::string sealed = signer().seal(text);
    EXPECT_EQ(signer().unseal(sealed), text);
    OrderedJson body = {
        {"input",
         OrderedJson::array({{{"type", "reasoning"}, {"summary", OrderedJson::array()}, {"encrypted_content", sealed}},
                             {{"role", "user"}, {"content", "next"}}})}};
    auto r = parse_responses_request(body, SamplingParams(), nullptr, signer());
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->chat_body["messages"][0]["reasoning_content"], text);
  }
  std::string tampered = signer().seal("think");
  tampered[0] = tampered[0] == 'A' ? 'B' : 'A';
  EXPECT_FALSE(signer().unseal(tampered));
  EXPECT_FALSE(signer().unseal("no dot"));
  EXPECT_FALSE(ThinkingSigner().unseal(signer().seal("think")));  // another server's key
  auto r = parse(R"({"input": [{"type": "reasoning", "summary": [], "encrypted_content": "abcd.xyz"}],
                     "include": ["reasoning.encrypted_content"]})");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'input[0].encrypted_content'"), std::string::npos);
  auto inc = parse(R"({"input": "x", "include": ["reasoning.encrypted_content"]})");
  ASSERT_TRUE(inc.ok());
  EXPECT_TRUE(inc->encrypted_reasoning);
}

TEST(ResponsesRequest, ToolsAndChoiceInChatForm) {
  auto r = parse(R"({"input": "x", "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
                     "tool_choice": {"type": "function", "name": "f"}, "parallel_tool_calls": false,
                     "reasoning": {"effort": "low", "summary": "auto"}})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->chat_body["tools"][0]["function"]["name"], "f");
  EXPECT_EQ(r->chat_body["tool_choice"], J(R"({"type": "function", "function": {"name": "f"}})"));
  EXPECT_EQ(r->chat_body["parallel_tool_calls"], false);
  EXPECT_EQ(r->chat_body["reasoning_effort"], "low");
  EXPECT_TRUE(r->summary);
}

TEST(ResponsesRequest, RefusalsNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({})", "'input'"},
      {R"({"input": 3})", "'input'"},
      {R"({"input": []})", "'input'"},
      {R"({"input": "x", "background": true})", "'background'"},
      {R"({"input": "x", "truncation": "auto"})", "'truncation'"},
      {R"({"input": "x", "tools": [{"type": "web_search"}]})", "'tools[0].type'"},
      {R"({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "u"}]}]})",
       "'input[0].content[0].type'"},
      {R"({"input": [{"type": "function_call_output", "output": "x"}]})", "'input[0].call_id'"},
      {R"({"input": [{"role": "robot", "content": "x"}]})", "'input[0].role'"},
      {R"({"input": "x", "max_output_tokens": 0})", "'max_output_tokens'"},
      {R"({"input": "x", "temperature": "hot"})", "temperature"},
      {R"({"input": "x", "reasoning": {"summary": "long"}})", "'reasoning.summary'"},
      {R"({"input": "x", "top_logprobs": 2})", "'top_logprobs'"},
      {R"({"input": "x", "conversation": "c"})", "'conversation'"},
  };
  for (const auto& [body, field] : cases) {
    auto r = parse(body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_NE(r.status().message().find(field), std::string::npos) << body << ": " << r.status().message();
  }
}

text::AssistantDelta reasoning(std::string s) {
  text::AssistantDelta d;
  d.reasoning_content = std::move(s);
  return d;
}

TEST(ResponsesOutput, ItemsAndEventOrder) {
  std::vector<OrderedJson> events;
  ResponsesOutput out(true, &signer(), [&](OrderedJson e) { events.push_back(std::move(e)); });
  out.add(reasoning("Let me "));
  out.add(reasoning("see."));
  text::AssistantDelta answer;
  answer.content = "\n\n";  // the blank lines after </think> open no message
  out.add(answer);
  text::AssistantDelta call;
  call.tool_calls.push_back({0, "call_1", "get_weather", "{\"location\":"});
  out.add(call);
  text::AssistantDelta rest;
  rest.tool_calls.push_back({0, "", "", "\"Paris\"}"});
  out.add(rest);
  out.finish(false);

  ASSERT_EQ(out.items().size(), 2u);
  EXPECT_EQ(out.items()[0]["type"], "reasoning");
  EXPECT_EQ(out.items()[0]["content"][0]["text"], "Let me see.");
  EXPECT_EQ(out.items()[0]["summary"][0]["text"], "Let me see.");
  EXPECT_EQ(signer().unseal(out.items()[0]["encrypted_content"].get<std::string>()), "Let me see.");
  EXPECT_EQ(out.items()[1]["type"], "function_call");
  EXPECT_EQ(out.items()[1]["arguments"], "{\"location\":\"Paris\"}");
  EXPECT_EQ(out.items()[1]["status"], "completed");
  EXPECT_TRUE(out.has_function_calls());

  std::vector<std::string> types;
  for (const auto& e : events) types.push_back(e["type"]);
  const std::vector<std::string> expected = {"response.output_item.added",
                                             "response.reasoning_summary_part.added",
                                             "response.content_part.added",
                                             "response.reasoning_text.delta",
                                             "response.reasoning_summary_text.delta",
                                             "response.reasoning_text.delta",
                                             "response.reasoning_summary_text.delta",
                                             "response.reasoning_text.done",
                                             "response.content_part.done",
                                             "response.reasoning_summary_text.done",
                                             "response.reasoning_summary_part.done",
                                             "response.output_item.done",
                                             "response.output_item.added",
                                             "response.function_call_arguments.delta",
                                             "response.function_call_arguments.delta",
                                             "response.function_call_arguments.done",
                                             "response.output_item.done"};
  EXPECT_EQ(types, expected);
  EXPECT_EQ(events.back()["output_index"], 1);

  const OrderedJson m = out.chat_message();
  EXPECT_EQ(m["reasoning_content"], "Let me see.");
  EXPECT_EQ(m["tool_calls"][0]["id"], "call_1");
  EXPECT_EQ(m["tool_calls"][0]["function"]["arguments"], "{\"location\":\"Paris\"}");
}

TEST(ResponsesOutput, MessageTextAndIncomplete) {
  ResponsesOutput out(false, nullptr, nullptr);
  text::AssistantDelta d;
  d.content = "\nHello";
  out.add(d);
  d.content = " world";
  out.add(d);
  out.finish(true);
  ASSERT_EQ(out.items().size(), 1u);
  EXPECT_EQ(out.items()[0]["content"][0]["text"], "Hello world");
  EXPECT_EQ(out.items()[0]["status"], "incomplete");
  EXPECT_EQ(out.chat_message()["content"], "Hello world");
}

StoredResponse entry(size_t payload) {
  StoredResponse s;
  s.response = {{"text", std::string(payload, 'x')}};
  return s;
}

TEST(ResponseStore, EvictsLeastRecentlyUsedByBytes) {
  ResponseStore store(3500);  // three entries of ~1,080 bytes (payload + 256 of bookkeeping)
  EXPECT_TRUE(store.put("a", entry(800)));
  EXPECT_TRUE(store.put("b", entry(800)));
  EXPECT_TRUE(store.put("c", entry(800)));
  EXPECT_EQ(store.size(), 3u);
  ASSERT_TRUE(store.get("a"));              // a is now the most recent
  EXPECT_TRUE(store.put("d", entry(800)));  // over the cap: b goes
  EXPECT_FALSE(store.get("b"));
  EXPECT_TRUE(store.get("a") && store.get("c") && store.get("d"));
  EXPECT_LE(store.bytes(), 3500u);
  EXPECT_FALSE(store.put("huge", entry(5000)));  // larger than the cap: not kept, nothing evicted
  EXPECT_EQ(store.size(), 3u);
  EXPECT_TRUE(store.erase("a"));
  EXPECT_FALSE(store.erase("a"));
  store.set_capacity(0);
  EXPECT_EQ(store.size(), 0u);
  EXPECT_EQ(store.bytes(), 0u);
}

TEST(ModelNames, Patterns) {
  EXPECT_TRUE(name_matches("claude-*", "claude-sonnet-4-5-20250929"));
  EXPECT_TRUE(name_matches("claude-*", "claude-"));
  EXPECT_FALSE(name_matches("claude-*", "gpt-4o"));
  EXPECT_TRUE(name_matches("gpt-?o", "gpt-4o"));
  EXPECT_TRUE(name_matches("*-mini*", "o4-mini-high"));
  EXPECT_FALSE(name_matches("m2", "m2x"));
  EXPECT_TRUE(name_matches("a*b*c", "aXbYbZc"));
  EXPECT_FALSE(name_matches("a*b*c", std::string(10000, 'a')));  // no blow-up on long names
  const std::vector<std::string> names = {"claude-*", "m2", "gpt-*"};
  EXPECT_TRUE(serves_name(names, "claude-opus-4"));
  EXPECT_FALSE(serves_name(names, "llama"));
  EXPECT_EQ(first_literal_name(names), "m2");
  EXPECT_EQ(first_literal_name({"a*"}), "");
}

HttpRequest request_with(Headers headers, std::string method = "POST") {
  HttpRequest r;
  r.method = std::move(method);
  r.headers = std::move(headers);
  return r;
}

TEST(RequestHeaders, RequestIdEchoedWhenPlainElseGenerated) {
  EXPECT_EQ(choose_request_id(request_with({{"x-request-id", "abc-123"}})), "abc-123");
  const std::string fresh = choose_request_id(request_with({{"x-request-id", "has space"}}));
  EXPECT_EQ(fresh.rfind("req_", 0), 0u);
  EXPECT_EQ(choose_request_id(request_with({{"x-request-id", std::string(200, 'a')}})).rfind("req_", 0), 0u);
  EXPECT_NE(choose_request_id(request_with({})), choose_request_id(request_with({})));
}

TEST(RequestHeaders, CorsOnlyForAllowedOrigins) {
  const std::vector<std::string> allowed = {"https://app.example"};
  EXPECT_EQ(allowed_origin(allowed, "https://app.example"), "https://app.example");
  EXPECT_EQ(allowed_origin(allowed, "https://evil.example"), "");
  EXPECT_EQ(allowed_origin({}, "https://app.example"), "");  // default: none
  EXPECT_EQ(allowed_origin({"*"}, "https://any.example"), "*");

  HttpRequest pre = request_with({{"origin", "https://app.example"},
                                  {"access-control-request-method", "POST"},
                                  {"access-control-request-headers", "authorization, content-type"}},
                                 "OPTIONS");
  ASSERT_TRUE(is_preflight(pre));
  HttpResponse ok = preflight_response(pre, allowed);
  EXPECT_EQ(ok.status, 204);
  bool saw_headers = false;
  for (const auto& [k, v] : ok.headers)
    if (k == "Access-Control-Allow-Headers") saw_headers = v == "authorization, content-type";
  EXPECT_TRUE(saw_headers);
  HttpResponse refused = preflight_response(pre, {});
  EXPECT_EQ(refused.status, 403);
  EXPECT_NE(refused.body.find("https://app.example"), std::string::npos);

  HttpRequest plain = request_with({{"origin", "https://app.example"}});
  plain.request_id = "req_1";
  const Headers h = answer_headers(plain, allowed);
  EXPECT_NE(std::find(h.begin(), h.end(),
                      std::make_pair(std::string("Access-Control-Allow-Origin"), std::string("https://app.example"))),
            h.end());
  EXPECT_NE(std::find(h.begin(), h.end(), std::make_pair(std::string("request-id"), std::string("req_1"))), h.end());
  EXPECT_EQ(answer_headers(plain, {}).size(), 2u);  // only the ids
}

TEST(Metrics, VllmNamesWithModelLabel) {
  Metrics m;
  m.set_model_name("m\"2");
  m.count_tokens(10, 5);
  m.observe_request(0.05, 0.02, 0.3, 10, 5);
  m.observe_inter_token(0.04, 2);
  m.count_finished("stop");
  m.count_finished("length");
  m.count_finished("something else");
  EngineLoopStats s;
  s.engine.running = 2;
  const std::string t = m.render(s);
  const std::string label = "model_name=\"m\\\"2\"";
  for (const std::string& line :
       {"vllm:num_requests_running{" + label + "} 2\n", "vllm:prompt_tokens_total{" + label + "} 10\n",
        "vllm:generation_tokens_total{" + label + "} 5\n",
        "vllm:request_success_total{" + label + ",finished_reason=\"stop\"} 1\n",
        "vllm:request_success_total{" + label + ",finished_reason=\"length\"} 1\n",
        "vllm:request_success_total{" + label + ",finished_reason=\"error\"} 1\n",
        "vllm:inter_token_latency_seconds_bucket{" + label + ",le=\"0.025\"} 2\n",
        "vllm:inter_token_latency_seconds_count{" + label + "} 2\n",
        "vllm:request_prompt_tokens_bucket{" + label + ",le=\"10\"} 1\n",
        "vllm:request_generation_tokens_bucket{" + label + ",le=\"2\"} 0\n",
        "vllm:e2e_request_latency_seconds_count{" + label + "} 1\n",
        "vllm:time_to_first_token_seconds_sum{" + label + "} 0.05\n", "vllm:kv_cache_usage_perc{" + label + "} 0\n"})
    EXPECT_NE(t.find(line), std::string::npos) << line << t;
  EXPECT_NE(t.find("m2cpp:prompt_tokens_total 10\n"), std::string::npos);  // ours stay
}

}  // namespace
}  // namespace m2::server
