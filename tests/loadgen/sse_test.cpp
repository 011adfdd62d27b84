// The serving benchmark's stream reading: SSE framing split at every byte
// boundary, OpenAI chunks (completions and chat) turned into timings and
// usage, Prometheus prefix-cache counters, base URLs.
#include <gtest/gtest.h>

#include "loadgen/openai_request.h"
#include "loadgen/prefix_cache_metrics.h"
#include "loadgen/sse_parser.h"

namespace m2::loadgen {
namespace {

std::vector<std::string> feed_all(std::string_view text, size_t piece) {
  SseParser p;
  std::vector<std::string> out;
  for (size_t i = 0; i < text.size(); i += piece)
    for (auto& e : p.feed(text.substr(i, piece))) out.push_back(std::move(e));
  if (std::string last = p.finish(); !last.empty()) out.push_back(std::move(last));
  return out;
}

TEST(BenchSse, EventsWhateverTheSplit) {
  const std::string stream =
      ": keep-alive comment\n\n"
      "data: {\"a\":1}\n\n"
      "event: message\r\ndata:{\"b\":2}\r\n\r\n"
      "data: line one\rdata: line two\r\r"
      "id: 7\nretry: 100\n\n"  // no data: no event
      "data: [DONE]\n\n";
  const std::vector<std::string> want = {"{\"a\":1}", "{\"b\":2}", "line one\nline two", "[DONE]"};
  for (size_t piece : {size_t{1}, size_t{2}, size_t{3}, size_t{7}, stream.size()}) {
    EXPECT_EQ(feed_all(stream, piece), want) << "pieces of " << piece;
  }
}

TEST(BenchSse, EventWithoutFinalBlankLineIsKeptByFinish) {
  EXPECT_EQ(feed_all("data: x\n\ndata: tail", 4), (std::vector<std::string>{"x", "tail"}));
  EXPECT_EQ(feed_all("data:\n\n", 1), (std::vector<std::string>{""}));  // empty data is still an event
}

TEST(BenchStream, CompletionChunksGiveTtftItlAndUsage) {
  RequestSample s;
  double last = 0;
  auto feed = [&](const std::string& json, double t) {
    return read_stream_event(json, Endpoint::kCompletions, t, &last, &s);
  };
  EXPECT_TRUE(feed(R"({"choices":[{"index":0,"text":""}]})", 0.05));  // no output: no timing
  EXPECT_TRUE(feed(R"({"choices":[{"index":0,"text":"Hel"}]})", 0.10));
  EXPECT_TRUE(feed(R"({"choices":[{"index":0,"text":"lo"}]})", 0.13));
  EXPECT_TRUE(feed(R"({"choices":[{"index":0,"text":"!","finish_reason":"length"}]})", 0.18));
  EXPECT_TRUE(feed(R"({"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":4,
                       "prompt_tokens_details":{"cached_tokens":8}}})", 0.19));
  EXPECT_FALSE(feed("[DONE]", 0.2));
  EXPECT_DOUBLE_EQ(s.ttft_s, 0.10);
  ASSERT_EQ(s.itl_s.size(), 2u);
  EXPECT_NEAR(s.itl_s[0], 0.03, 1e-12);
  EXPECT_NEAR(s.itl_s[1], 0.05, 1e-12);
  EXPECT_EQ(s.chunks, 3);
  EXPECT_TRUE(s.usage_reported);
  EXPECT_EQ(s.prompt_tokens, 12);
  EXPECT_EQ(s.output_tokens, 4);
  EXPECT_EQ(s.cached_tokens, 8);
  EXPECT_EQ(s.reply_content, "Hello!");
  EXPECT_TRUE(s.error.empty());
}

TEST(BenchStream, ChatRoleChunkIsNotOutputButReasoningIs) {
  RequestSample s;
  double last = 0;
  read_stream_event(R"({"choices":[{"delta":{"role":"assistant","content":""}}]})", Endpoint::kChat, 0.01, &last, &s);
  EXPECT_LT(s.ttft_s, 0);
  read_stream_event(R"({"choices":[{"delta":{"reasoning_content":"hmm"}}]})", Endpoint::kChat, 0.02, &last, &s);
  read_stream_event(R"({"choices":[{"delta":{"content":"Hi"}}]})", Endpoint::kChat, 0.04, &last, &s);
  read_stream_event(R"({"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{"}}]}}]})",
                    Endpoint::kChat, 0.07, &last, &s);
  EXPECT_DOUBLE_EQ(s.ttft_s, 0.02);
  EXPECT_EQ(s.chunks, 3);
  EXPECT_EQ(s.reply_reasoning, "hmm");
  EXPECT_EQ(s.reply_content, "Hi");
}

TEST(BenchStream, ErrorEventsAreRecorded) {
  RequestSample s;
  double last = 0;
  read_stream_event(R"({"error":{"message":"out of KV blocks","type":"server_error"}})", Endpoint::kChat, 0.1, &last,
                    &s);
  EXPECT_EQ(s.error, "out of KV blocks");
  RequestSample t;
  read_stream_event("not json", Endpoint::kChat, 0.1, &last, &t);
  EXPECT_NE(t.error.find("unparseable"), std::string::npos);
}

TEST(BenchStream, TpotExcludesTheFirstToken) {
  RequestSample s;
  s.success = true;
  s.ttft_s = 0.5;
  s.e2e_s = 1.5;
  s.output_tokens = 11;
  EXPECT_DOUBLE_EQ(s.tpot_s(), 0.1);
  s.output_tokens = 1;
  EXPECT_LT(s.tpot_s(), 0);
}

TEST(BenchStream, RequestBodyAsksForExactLengthsAndUsage) {
  RequestOptions o{.model = "m"};  // (assigning a literal trips GCC 12's false -Wrestrict)
  o.extra_body = {{"top_k", 5}, {"temperature", 0.7}};
  const Json body = Json::parse(request_body(o, Json::array({1, 2, 3}), 32));
  EXPECT_EQ(body["prompt"], Json::array({1, 2, 3}));
  EXPECT_EQ(body["max_tokens"], 32);
  EXPECT_EQ(body["ignore_eos"], true);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
  EXPECT_EQ(body["top_k"], 5);
  EXPECT_EQ(body["temperature"], 0.7);  // --extra-body wins
  o.endpoint = Endpoint::kChat;
  o.ignore_eos = false;
  const Json chat = Json::parse(request_body(o, Json::array({{{"role", "user"}, {"content", "x"}}}), 8));
  EXPECT_TRUE(chat.contains("messages"));
  EXPECT_FALSE(chat.contains("ignore_eos"));
}

TEST(BenchMetrics, PrefixCacheCountersOfM2cppAndVllm) {
  const std::string ours =
      "# HELP m2cpp:prefix_cache_hits_total x\n# TYPE m2cpp:prefix_cache_hits_total counter\n"
      "m2cpp:prefix_cache_hits_total 120\nm2cpp:prefix_cache_queries_total 400\n";
  auto c = prefix_cache_counters(ours);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->hits, 120);
  EXPECT_EQ(c->queries, 400);
  const std::string vllm =
      "vllm:prefix_cache_queries_total{engine=\"0\",model_name=\"a b}\"} 100.0\n"
      "vllm:prefix_cache_queries_total{engine=\"1\",model_name=\"a b}\"} 50\n"
      "vllm:prefix_cache_hits_total{engine=\"0\",model_name=\"x\"} 30\n"
      "vllm:prefix_cache_hits_total{engine=\"1\",model_name=\"x\"} 1.5e1\n";
  c = prefix_cache_counters(vllm);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->hits, 45);
  EXPECT_EQ(c->queries, 150);
  EXPECT_FALSE(prefix_cache_counters("sglang:cache_hit_rate 0.5\n").has_value());
}

TEST(BenchUrl, BaseUrls) {
  auto u = parse_base_url("http://localhost:8000");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "localhost");
  EXPECT_EQ(u->port, "8000");
  EXPECT_EQ(u->prefix, "");
  u = parse_base_url("http://10.0.0.2/proxy/v1/");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->port, "80");
  EXPECT_EQ(u->prefix, "/proxy");
  u = parse_base_url("http://[::1]:9000");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, "9000");
  EXPECT_FALSE(parse_base_url("https://example.com").ok());
  EXPECT_FALSE(parse_base_url("localhost:8000").ok());
  EXPECT_FALSE(parse_base_url("http://host:80x").ok());
}

}  // namespace
}  // namespace m2::loadgen
