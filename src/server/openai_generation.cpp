#include "server/openai_generation.h"

#include "server/json_fields.h"
#include "server/routes.h"

namespace m2::server {

Result<OpenAiRequest> parse_openai_request(const OrderedJson& body, const SamplingParams& defaults,
                                           LogprobsStyle style) {
  OpenAiRequest r;
  M2_ASSIGN_OR_RETURN(std::optional<bool> stream, opt_bool(body, "stream"));
  M2_ASSIGN_OR_RETURN(r.include_usage, stream_include_usage(body));
  M2_ASSIGN_OR_RETURN(std::optional<bool> as_ids, opt_bool(body, "return_tokens_as_token_ids"));
  M2_ASSIGN_OR_RETURN(r.sampling, parse_sampling_request(body, defaults, style));
  r.stream = stream.value_or(false);
  r.tokens_as_ids = as_ids.value_or(false);
  return r;
}

OpenAiGeneration::OpenAiGeneration(ServerContext& ctx, std::shared_ptr<ResponseWriter> writer,
                                   const HttpRequest& request, const char* id_prefix, const OpenAiRequest& r)
    : Generation(ctx, std::move(writer), request, ApiFlavor::kOpenAI, id_prefix + random_hex(16), r.stream),
      include_usage_(r.include_usage),
      want_logprobs_(r.sampling.params.logprobs >= 0),
      formatter_(*ctx.tokenizer, r.tokens_as_ids) {}

OrderedJson OpenAiGeneration::envelope(const char* object, OrderedJson choices) const {
  OrderedJson j = OrderedJson::object();
  j["id"] = id_;
  j["object"] = object;
  j["created"] = created_;
  j["model"] = ctx_.model_name();
  j["choices"] = std::move(choices);
  return j;
}

OrderedJson OpenAiGeneration::usage() const {
  return {{"prompt_tokens", prompt_tokens_},
          {"completion_tokens", output_tokens_},
          {"total_tokens", prompt_tokens_ + output_tokens_},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens_}}}};
}

void OpenAiGeneration::end_stream(const std::string& finish_reason) {
  if (include_usage_) {
    OrderedJson last = stream_chunk(OrderedJson::array());
    last["usage"] = usage();
    writer_->write(sse_data(last));
  }
  writer_->write("data: [DONE]\n\n");
  writer_->end();
  log_done(200, finish_reason);
}

void OpenAiGeneration::on_error(const ApiError& error) {
  if (!stream_) return respond_error(error);
  writer_->write(sse_data(error_json(error, flavor_)));
  writer_->write("data: [DONE]\n\n");
  writer_->end();
  log_done(error.status, "");
}

}  // namespace m2::server
