#include "loadgen/openai_request.h"

#include "loadgen/sse_parser.h"

namespace m2::loadgen {
namespace {

using clock = std::chrono::steady_clock;

std::string string_field(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The output a choice of a chunk carries; false when it carries none (the
// role-only first chat chunk, an empty keep-alive, the usage-only last one).
bool choice_output(const Json& choice, Endpoint endpoint, RequestSample* s) {
  if (endpoint == Endpoint::kCompletions) {
    const std::string text = string_field(choice, "text");
    s->reply_content += text;
    return !text.empty();
  }
  auto d = choice.find("delta");
  if (d == choice.end() || !d->is_object()) return false;
  const std::string content = string_field(*d, "content");
  std::string reasoning = string_field(*d, "reasoning_content");
  if (reasoning.empty()) reasoning = string_field(*d, "reasoning");
  s->reply_content += content;
  s->reply_reasoning += reasoning;
  auto tools = d->find("tool_calls");
  return !content.empty() || !reasoning.empty() || (tools != d->end() && tools->is_array() && !tools->empty());
}

std::string error_message(const Json& j) {
  auto e = j.find("error");
  if (e == j.end()) return {};
  if (e->is_object()) {
    const std::string m = string_field(*e, "message");
    return m.empty() ? e->dump() : m;
  }
  return e->is_string() ? e->get<std::string>() : e->dump();
}

}  // namespace

const char* endpoint_path(Endpoint e) {
  return e == Endpoint::kChat ? "/v1/chat/completions" : "/v1/completions";
}

std::string request_body(const RequestOptions& o, const Json& input, int64_t max_tokens) {
  Json body = {{"model", o.model},
               {o.endpoint == Endpoint::kChat ? "messages" : "prompt", input},
               {"max_tokens", max_tokens},
               {"temperature", o.temperature},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (o.ignore_eos) body["ignore_eos"] = true;
  body.merge_patch(o.extra_body);
  return body.dump();
}

bool read_stream_event(const std::string& data, Endpoint endpoint, double now_s, double* last_chunk_s,
                       RequestSample* s) {
  if (data == "[DONE]") return false;
  auto j = parse_json(data, "stream event");
  if (!j.ok() || !j->is_object()) {
    if (s->error.empty()) s->error = "unparseable stream event: " + data.substr(0, 200);
    return true;
  }
  if (std::string e = error_message(*j); !e.empty()) {
    if (s->error.empty()) s->error = e;
    return true;
  }
  bool output = false;
  if (auto c = j->find("choices"); c != j->end() && c->is_array())
    for (const Json& choice : *c) output = choice_output(choice, endpoint, s) || output;
  if (output) {
    if (s->ttft_s < 0) {
      s->ttft_s = now_s;
    } else {
      s->itl_s.push_back(now_s - *last_chunk_s);
    }
    *last_chunk_s = now_s;
    ++s->chunks;
  }
  if (auto u = j->find("usage"); u != j->end() && u->is_object()) {
    s->usage_reported = true;
    s->prompt_tokens = u->value("prompt_tokens", int64_t{-1});
    s->output_tokens = u->value("completion_tokens", int64_t{0});
    if (auto d = u->find("prompt_tokens_details"); d != u->end() && d->is_object())
      s->cached_tokens = d->value("cached_tokens", int64_t{-1});
  }
  return true;
}

RequestSample send_request(HttpClient& client, const RequestOptions& o, const Json& input, int64_t max_tokens,
                           clock::time_point level_start) {
  RequestSample s;
  s.expected_output_len = max_tokens;
  const std::string body = request_body(o, input, max_tokens);
  SseParser sse;
  std::string error_body;
  bool done = false;
  double last_chunk_s = 0;
  const clock::time_point t0 = clock::now();
  s.start_s = std::chrono::duration<double>(t0 - level_start).count();
  auto status = client.post_streaming(endpoint_path(o.endpoint), body, [&](int http_status, std::string_view piece) {
    const double now_s = std::chrono::duration<double>(clock::now() - t0).count();
    if (http_status != 200) {
      if (error_body.size() < 4096) error_body += piece;
      return;
    }
    for (const std::string& event : sse.feed(piece))
      if (!done) done = !read_stream_event(event, o.endpoint, now_s, &last_chunk_s, &s);
  });
  s.e2e_s = std::chrono::duration<double>(clock::now() - t0).count();
  if (!status.ok()) {
    s.error = status.status().message();
    return s;
  }
  if (*status == 200 && !done) {
    // A last event the stream did not close with a blank line.
    const double now_s = std::chrono::duration<double>(clock::now() - t0).count();
    if (const std::string last = sse.finish(); !last.empty())
      read_stream_event(last, o.endpoint, now_s, &last_chunk_s, &s);
  }
  if (*status != 200) {
    auto j = parse_json(error_body, "error body");
    const std::string message = j.ok() && j->is_object() ? error_message(*j) : error_body.substr(0, 300);
    s.error = fmt::format("HTTP {}: {}", *status, message);
    return s;
  }
  if (!s.usage_reported) s.output_tokens = s.chunks;
  s.success = s.error.empty() && s.ttft_s >= 0;
  if (s.error.empty() && s.ttft_s < 0) s.error = "the stream carried no output";
  return s;
}

}  // namespace m2::loadgen
