// POST /v1/completions: raw prompts (text, token ids, or a list of either;
// one engine request per prompt, choice index = prompt × n + completion),
// `echo`, completion-style `logprobs`, vLLM's return_tokens_as_token_ids.
#include <optional>

#include "server/routed_experts.h"
#include "server/json_fields.h"
#include "server/openai_generation.h"
#include "server/routes.h"
#include "server/structured_output.h"

namespace m2::server {
namespace {

Result<std::vector<int32_t>> token_list(const OrderedJson& list, int vocab, size_t which) {
  std::vector<int32_t> ids;
  for (const auto& v : list) {
    if (!v.is_number_integer()) return errorf("prompt[{}] must hold only token ids (integers)", which);
    const int64_t id = v.get<int64_t>();
    if (id < 0 || id >= vocab) return errorf("prompt token {} is outside the vocabulary [0, {})", id, vocab);
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

Result<std::vector<PromptInput>> read_prompts(const OrderedJson& body, const text::Tokenizer& tok, int vocab) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) return errorf("'prompt' is required");
  const OrderedJson& p = *it;
  std::vector<PromptInput> out;
  auto from_text = [&](const std::string& s) -> Status {
    auto ids = tok.encode(s, true);
    if (!ids.ok()) return ids.status();
    out.push_back({std::move(*ids), s});
    return Status();
  };
  auto from_ids = [&](const OrderedJson& list, size_t which) -> Status {
    auto ids = token_list(list, vocab, which);
    if (!ids.ok()) return ids.status();
    auto text = tok.decode(*ids, false);
    out.push_back({std::move(*ids), text.ok() ? *text : std::string()});
    return Status();
  };
  if (p.is_string()) {
    M2_RETURN_IF_ERROR(from_text(p.get<std::string>()));
  } else if (p.is_array() && !p.empty() && p[0].is_number()) {
    M2_RETURN_IF_ERROR(from_ids(p, 0));
  } else if (p.is_array() && !p.empty()) {
    for (size_t i = 0; i < p.size(); ++i) {
      if (p[i].is_string()) {
        M2_RETURN_IF_ERROR(from_text(p[i].get<std::string>()));
      } else if (p[i].is_array()) {
        M2_RETURN_IF_ERROR(from_ids(p[i], i));
      } else {
        return errorf("prompt[{}] must be a string or a list of token ids, got {}", i, json_type(p[i]));
      }
    }
  } else {
    return errorf("'prompt' must be a string, a list of token ids, or a list of either (non-empty), got {}",
                  json_type(p));
  }
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].tokens.empty()) return errorf("prompt {} is empty", i);
  return out;
}

const char* completion_finish(FinishReason r) {
  return r == FinishReason::kLength ? "length" : r == FinishReason::kAbort ? "abort" : "stop";
}

class CompletionGeneration final : public OpenAiGeneration {
 public:
  CompletionGeneration(ServerContext& ctx, std::shared_ptr<ResponseWriter> writer, const HttpRequest& request,
                       const OpenAiRequest& r, std::vector<PromptInput> prompts, bool echo)
      : OpenAiGeneration(ctx, std::move(writer), request, "cmpl-", r),
        prompts_(std::move(prompts)),
        n_(r.sampling.params.n),
        echo_(echo) {
    for (size_t i = 0; i < prompts_.size() * static_cast<size_t>(n_); ++i) choices_.emplace_back(formatter_);
  }

 private:
  struct Choice {
    explicit Choice(const TokenFormatter& f) : logprobs(f) {}
    std::string text;
    size_t offset = 0;  // characters sent so far (text_offset of the next token)
    CompletionLogprobs logprobs;
    bool started = false;
    const char* finish = nullptr;
    OrderedJson stop_reason;
    OrderedJson routed_experts;  // return_routed_experts: the encoding of routed_experts.h
  };

  OrderedJson choice_json(size_t index, std::string text, Choice& c, bool final) {
    OrderedJson j = OrderedJson::object();
    j["index"] = index;
    j["text"] = std::move(text);
    j["logprobs"] = want_logprobs_ ? c.logprobs.json() : OrderedJson(nullptr);
    j["finish_reason"] = final && c.finish ? OrderedJson(c.finish) : OrderedJson(nullptr);
    j["stop_reason"] = final ? c.stop_reason : OrderedJson(nullptr);
    if (final && return_routed_) j["routed_experts"] = c.routed_experts;
    return j;
  }

  OrderedJson stream_chunk(OrderedJson choices) const override {
    return envelope("text_completion", std::move(choices));
  }

  void on_admitted() override {
    if (stream_) writer_->begin_stream(200, "text/event-stream", {});
  }

  void on_output(size_t job, RequestOutput& o) override {
    const size_t index = job * static_cast<size_t>(n_) + static_cast<size_t>(o.index);
    Choice& c = choices_.at(index);
    std::string piece;
    if (!c.started) {
      c.started = true;
      if (echo_) {
        const PromptInput& p = prompts_[job];
        if (want_logprobs_) {
          // Each prompt token's text at its offset in the echoed prompt.
          size_t offset = 0;
          for (size_t i = 0; i < p.tokens.size(); ++i) {
            const std::vector<TokenLogprob>* entry =
                i < o.prompt_logprobs.size() ? &o.prompt_logprobs[i] : nullptr;
            c.logprobs.add_prompt(p.tokens[i], entry, offset);
            offset += formatter_.text(p.tokens[i]).size();
          }
        }
        piece = p.text;
      }
    }
    const size_t base = c.text.size() + piece.size();
    if (want_logprobs_) {
      size_t offset = base;
      for (const SampledToken& t : o.new_logprobs) {
        c.logprobs.add(t, offset);
        offset += formatter_.text(t.id).size();
      }
    }
    piece += o.new_text;
    if (o.finished) {
      c.finish = completion_finish(o.finish_reason);
      c.stop_reason = stop_reason_json(o);
      if (return_routed_) c.routed_experts = routed_experts_json(o.routed_experts, ctx_);
    }
    if (!stream_) {
      c.text += piece;
      return;
    }
    if (piece.empty() && c.logprobs.empty() && !o.finished) return;
    c.text += piece;
    writer_->write(sse_data(stream_chunk(OrderedJson::array({choice_json(index, piece, c, o.finished)}))));
    c.logprobs.clear();  // streamed logprobs are per chunk
  }

  void on_complete() override {
    const std::string finish = choices_.empty() || !choices_[0].finish ? "" : choices_[0].finish;
    if (stream_) return end_stream(finish);
    OrderedJson choices = OrderedJson::array();
    for (size_t i = 0; i < choices_.size(); ++i) choices.push_back(choice_json(i, choices_[i].text, choices_[i], true));
    OrderedJson j = envelope("text_completion", std::move(choices));
    j["usage"] = usage();
    respond_json(j, finish);
  }

  std::vector<PromptInput> prompts_;
  int n_;
  bool echo_;
  std::vector<Choice> choices_;
 public:
  bool return_routed_ = false;
};

}  // namespace

Result<CompletionRequest> parse_completion_request(const ServerContext& ctx, const OrderedJson& body) {
  CompletionRequest out;
  M2_ASSIGN_OR_RETURN(out.openai, parse_openai_request(body, ctx.defaults, LogprobsStyle::kCompletion));
  M2_ASSIGN_OR_RETURN(const std::optional<bool> echo, opt_bool(body, "echo"));
  out.echo = echo.value_or(false);
  if (auto suffix = opt_string(body, "suffix"); !suffix.ok() || (*suffix && !(*suffix)->empty()))
    return errorf("'suffix' is not supported");
  M2_ASSIGN_OR_RETURN(out.prompts, read_prompts(body, *ctx.tokenizer, ctx.vocab_size));
  M2_ASSIGN_OR_RETURN(const RoutingFields routing, parse_routing_fields(body, ctx));
  if (routing.replay && out.prompts.size() > 1)
    return errorf("routing_replay takes one prompt, got {}", out.prompts.size());
  out.return_routed_experts = routing.return_routed_experts;
  const SamplingRequest& sampling = out.openai.sampling;
  if (out.prompts.size() * static_cast<size_t>(sampling.params.n) > 1024)
    return errorf("too many completions in one request (prompts x n > 1024)");
  const bool want_logprobs = sampling.params.logprobs >= 0;
  // An output format constrains each completion from its first token (a
  // completion prompt opens no reasoning the server knows of).
  M2_ASSIGN_OR_RETURN(const auto format, read_output_format(body));
  std::shared_ptr<const Constraint> constraint;
  if (format) {
    M2_ASSIGN_OR_RETURN(constraint, compile_constraint(ctx, format->source, format->field));
  }
  for (const PromptInput& p : out.prompts) {
    SamplingRequest s = sampling;
    M2_RETURN_IF_ERROR(fit_to_context(s, static_cast<int64_t>(p.tokens.size()), ctx.max_model_len, false));
    // echo with logprobs reports the prompt tokens' logprobs too.
    s.params.constraint = constraint;
    if (out.echo && want_logprobs) s.params.prompt_logprobs = std::max(s.params.prompt_logprobs, s.params.logprobs);
    if (ctx.replay) {
      if (auto replay = ctx.replay->select(p.text)) s.params.forced_tokens = std::move(*replay);
    }
    M2_RETURN_IF_ERROR(apply_routing_fields(routing, static_cast<int64_t>(p.tokens.size()), &s.params));
    M2_RETURN_IF_ERROR(s.params.validate(ctx.vocab_size));
    out.jobs.push_back({p.tokens, std::move(s.params)});
  }
  return out;
}

void handle_completions(ServerContext& ctx, const HttpRequest& request, const OrderedJson& body,
                        std::shared_ptr<ResponseWriter> writer) {
  auto r = parse_completion_request(ctx, body);
  if (!r.ok()) return respond_error(ctx, request, *writer, bad_request(r.status().message()), ApiFlavor::kOpenAI);
  auto gen = std::make_shared<CompletionGeneration>(ctx, std::move(writer), request, r->openai, std::move(r->prompts),
                                                    r->echo);
  gen->return_routed_ = r->return_routed_experts;
  gen->start(std::move(r->jobs));
}

}  // namespace m2::server
