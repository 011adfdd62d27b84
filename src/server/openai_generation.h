// What /v1/chat/completions and /v1/completions share: the request fields
// both read before their own (stream, stream_options.include_usage, vLLM's
// return_tokens_as_token_ids, the sampling fields), and a Generation base
// that writes their common parts: the response envelope, `usage`, the end
// of a stream (the usage chunk, then `data: [DONE]`) and a failure after the
// stream began (the error object as one more event, then `data: [DONE]`).
#pragma once

#include <memory>
#include <string>

#include "server/generation.h"
#include "server/logprobs_json.h"
#include "server/sampling_request.h"
#include "util/json.h"
#include "util/status.h"

namespace m2::server {

struct OpenAiRequest {
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool tokens_as_ids = false;  // return_tokens_as_token_ids
  SamplingRequest sampling;
};

// Errors are the client's (400), the first wrong field in the order above.
Result<OpenAiRequest> parse_openai_request(const OrderedJson& body, const SamplingParams& defaults,
                                           LogprobsStyle style);

// /v1/completions: one prompt of `prompt` (text, token ids, or a list of either).
struct PromptInput {
  std::vector<int32_t> tokens;
  std::string text;  // as given, or decoded from the ids (echo, replay matching)
};

// A /v1/completions body checked and turned into its engine jobs (one per
// prompt), all before anything is started: what the route does with a body,
// and what the request fuzzer (tests/fuzz/fuzz_request_json.cpp) drives.
struct CompletionRequest {
  OpenAiRequest openai;
  bool echo = false;
  bool return_routed_experts = false;
  std::vector<PromptInput> prompts;
  std::vector<EngineJob> jobs;
};
Result<CompletionRequest> parse_completion_request(const ServerContext& ctx, const OrderedJson& body);

class OpenAiGeneration : public Generation {
 protected:
  // `id_prefix`: "chatcmpl-", "cmpl-" (a random suffix follows).
  OpenAiGeneration(ServerContext& ctx, std::shared_ptr<ResponseWriter> writer, const HttpRequest& request,
                   const char* id_prefix, const OpenAiRequest& r);

  // The streamed object around `choices` (the last chunk carries none).
  virtual OrderedJson stream_chunk(OrderedJson choices) const = 0;

  // {id, object, created, model, choices}: the head of every response and chunk.
  OrderedJson envelope(const char* object, OrderedJson choices) const;
  // {prompt_tokens, completion_tokens, total_tokens, prompt_tokens_details: {cached_tokens}}
  virtual OrderedJson usage() const;
  // After the last choice's chunk: the usage chunk (include_usage), [DONE].
  void end_stream(const std::string& finish_reason);

  const bool include_usage_, want_logprobs_;
  const TokenFormatter formatter_;

 private:
  void on_error(const ApiError& error) final;
};

}  // namespace m2::server
