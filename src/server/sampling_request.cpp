#include "server/sampling_request.h"

#include <limits>

#include "server/json_fields.h"

namespace m2::server {
namespace {

template <typename T, typename R>
Status read_into(R result, T* out) {
  if (!result.ok()) return result.status();
  if (*result) *out = static_cast<T>(**result);
  return Status();
}

Result<int> small_int(const OrderedJson& body, const char* key, int lo, int hi, std::optional<int>* out) {
  auto v = opt_int(body, key);
  if (!v.ok()) return v.status();
  if (!*v) return 0;
  if (**v < lo || **v > hi) return errorf("'{}' must be in {}..{}, got {}", key, lo, hi, **v);
  *out = static_cast<int>(**v);
  return 0;
}

}  // namespace

Result<SamplingRequest> parse_sampling_request(const OrderedJson& body, const SamplingParams& defaults,
                                               LogprobsStyle style) {
  SamplingRequest r;
  SamplingParams& p = r.params;
  p = defaults;
  p.max_tokens = 16;
  std::optional<int> n;
  if (auto s = small_int(body, "n", 1, 128, &n); !s.ok()) return s.status();
  if (n) p.n = *n;
  M2_RETURN_IF_ERROR(read_into(opt_number(body, "temperature"), &p.temperature));
  M2_RETURN_IF_ERROR(read_into(opt_number(body, "top_p"), &p.top_p));
  std::optional<int> top_k;
  if (auto s = small_int(body, "top_k", -1, std::numeric_limits<int>::max(), &top_k); !s.ok()) return s.status();
  if (top_k) p.top_k = *top_k;
  M2_RETURN_IF_ERROR(read_into(opt_number(body, "min_p"), &p.min_p));
  M2_RETURN_IF_ERROR(read_into(opt_number(body, "presence_penalty"), &p.presence_penalty));
  M2_RETURN_IF_ERROR(read_into(opt_number(body, "frequency_penalty"), &p.frequency_penalty));
  M2_RETURN_IF_ERROR(read_into(opt_number(body, "repetition_penalty"), &p.repetition_penalty));
  auto seed = opt_int(body, "seed");
  if (!seed.ok()) return seed.status();
  if (*seed) p.seed = static_cast<uint64_t>(**seed);

  // max_completion_tokens is the newer OpenAI name; it wins when both are given.
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    auto v = opt_int(body, key);
    if (!v.ok()) return v.status();
    if (*v) {
      if (**v < 1) return errorf("'{}' must be at least 1, got {}", key, **v);
      r.max_tokens = **v;
    }
  }
  std::optional<int> min_tokens;
  if (auto s = small_int(body, "min_tokens", 0, std::numeric_limits<int>::max(), &min_tokens); !s.ok())
    return s.status();
  if (min_tokens) p.min_tokens = *min_tokens;
  M2_RETURN_IF_ERROR(read_into(opt_bool(body, "ignore_eos"), &p.ignore_eos));
  M2_RETURN_IF_ERROR(read_into(opt_bool(body, "skip_special_tokens"), &p.skip_special_tokens));
  auto stop = opt_string_list(body, "stop");
  if (!stop.ok()) return stop.status();
  p.stop = *stop;
  auto stop_ids = opt_int_list(body, "stop_token_ids");
  if (!stop_ids.ok()) return stop_ids.status();
  for (int64_t id : *stop_ids) {
    if (id < 0 || id > std::numeric_limits<int32_t>::max()) return errorf("'stop_token_ids' holds {}", id);
    p.stop_token_ids.push_back(static_cast<int32_t>(id));
  }

  if (body.contains("logit_bias") && !body["logit_bias"].is_null()) {
    const auto& lb = body["logit_bias"];
    if (!lb.is_object()) return errorf("'logit_bias' must be an object of token id -> bias, got {}", json_type(lb));
    for (const auto& [key, value] : lb.items()) {
      size_t used = 0;
      long long id = -1;
      try {
        id = std::stoll(key, &used);
      } catch (...) {
        used = 0;
      }
      if (used == 0 || used != key.size() || id < 0 || id > std::numeric_limits<int32_t>::max())
        return errorf("'logit_bias' key '{}' is not a token id", key);
      if (!value.is_number()) return errorf("'logit_bias' value for '{}' must be a number", key);
      const double bias = value.get<double>();
      if (bias < -100 || bias > 100) return errorf("'logit_bias' value for '{}' must be in [-100, 100]", key);
      p.logit_bias[static_cast<int32_t>(id)] = static_cast<float>(bias);
    }
  }

  if (style == LogprobsStyle::kChat) {
    auto want = opt_bool(body, "logprobs");
    if (!want.ok()) return want.status();
    std::optional<int> top;
    if (auto s = small_int(body, "top_logprobs", 0, 20, &top); !s.ok()) return s.status();
    if (top && !(*want && **want)) return errorf("'top_logprobs' needs 'logprobs': true");
    if (*want && **want) p.logprobs = top.value_or(0);
  } else {
    std::optional<int> k;
    if (auto s = small_int(body, "logprobs", 0, 20, &k); !s.ok()) return s.status();
    if (k) p.logprobs = *k;
  }
  std::optional<int> prompt_logprobs;
  if (auto s = small_int(body, "prompt_logprobs", 0, 20, &prompt_logprobs); !s.ok()) return s.status();
  if (prompt_logprobs) p.prompt_logprobs = *prompt_logprobs;

  auto include_stop = opt_bool(body, "include_stop_str_in_output");
  if (!include_stop.ok()) return include_stop.status();
  if (*include_stop && **include_stop) return errorf("'include_stop_str_in_output' is not supported");
  std::optional<int> best_of;
  if (auto s = small_int(body, "best_of", 1, 128, &best_of); !s.ok()) return s.status();
  if (best_of && *best_of != p.n) return errorf("'best_of' other than 'n' is not supported");
  auto user = opt_string(body, "user");  // accepted for the access log's sake only
  if (!user.ok()) return user.status();
  return r;
}

Status fit_to_context(SamplingRequest& r, int64_t prompt_tokens, int64_t max_model_len, bool clamp_max_tokens) {
  const int64_t room = max_model_len - prompt_tokens;
  if (room < 1) {
    return errorf(
        "This model's maximum context length is {} tokens. However, your prompt is {} tokens, which leaves no "
        "room for the completion. Please reduce the length of the prompt.",
        max_model_len, prompt_tokens);
  }
  int64_t max_tokens = r.max_tokens.value_or(room);
  if (max_tokens > room) {
    if (!clamp_max_tokens) {
      return errorf(
          "This model's maximum context length is {} tokens. However, you requested {} tokens ({} in the "
          "prompt, {} for the completion). Please reduce the length of the prompt or of max_tokens.",
          max_model_len, prompt_tokens + max_tokens, prompt_tokens, max_tokens);
    }
    max_tokens = room;
  }
  r.params.max_tokens = static_cast<int>(std::min<int64_t>(max_tokens, std::numeric_limits<int>::max()));
  if (r.params.min_tokens > r.params.max_tokens) r.params.min_tokens = r.params.max_tokens;
  return Status();
}

}  // namespace m2::server
