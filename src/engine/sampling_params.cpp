#include "engine/sampling_params.h"

#include <cmath>
#include <filesystem>

namespace m2 {

Status SamplingParams::validate(int vocab_size) const {
  if (n < 1 || n > 128) return errorf("n must be in 1..128, got {}", n);
  if (!(temperature >= 0.0f) || !std::isfinite(temperature)) return errorf("temperature must be >= 0, got {}", temperature);
  if (!(top_p > 0.0f && top_p <= 1.0f)) return errorf("top_p must be in (0, 1], got {}", top_p);
  if (top_k < -1) return errorf("top_k must be -1 (off), 0 (off) or positive, got {}", top_k);
  if (!(min_p >= 0.0f && min_p <= 1.0f)) return errorf("min_p must be in [0, 1], got {}", min_p);
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f))
    return errorf("presence_penalty must be in [-2, 2], got {}", presence_penalty);
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f))
    return errorf("frequency_penalty must be in [-2, 2], got {}", frequency_penalty);
  if (!(repetition_penalty > 0.0f && repetition_penalty <= 10.0f))
    return errorf("repetition_penalty must be in (0, 10], got {}", repetition_penalty);
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0 || id >= vocab_size) return errorf("logit_bias token {} is outside the vocabulary [0, {})", id, vocab_size);
    if (!std::isfinite(bias)) return errorf("logit_bias for token {} is not finite", id);
  }
  for (int32_t id : stop_token_ids) {
    if (id < 0 || id >= vocab_size) return errorf("stop_token_ids holds {} outside the vocabulary [0, {})", id, vocab_size);
  }
  for (const std::string& s : stop) {
    if (s.empty()) return errorf("stop strings must not be empty");
  }
  if (max_tokens < 1) return errorf("max_tokens must be at least 1, got {}", max_tokens);
  if (min_tokens < 0 || min_tokens > max_tokens)
    return errorf("min_tokens must be in 0..max_tokens ({}), got {}", max_tokens, min_tokens);
  if (constraint && constraint->vocab_size() != vocab_size)
    return errorf("the constraint was compiled for a vocabulary of {}, the model has {}", constraint->vocab_size(),
                  vocab_size);
  if (constraint && ignore_eos)
    return errorf("ignore_eos cannot be combined with a constrained output (its grammar ends with EOS)");
  if (constraint_after_token >= vocab_size) return errorf("constraint_after_token {} is outside the vocabulary", constraint_after_token);
  for (const auto* list : {&forced_tokens, &forced_after}) {
    for (int32_t id : *list) {
      if (id < 0 || id >= vocab_size) return errorf("forced token {} is outside the vocabulary [0, {})", id, vocab_size);
    }
  }
  if (forced_after_token >= vocab_size) return errorf("forced_after_token {} is outside the vocabulary", forced_after_token);
  if (reasoning_budget >= 0 && (reasoning_end_token < 0 || reasoning_end_token >= vocab_size))
    return errorf("a reasoning budget needs a reasoning end token in the vocabulary, got {}", reasoning_end_token);
  if (logprobs > 20) return errorf("logprobs must be at most 20, got {}", logprobs);
  if (prompt_logprobs > 20) return errorf("prompt_logprobs must be at most 20, got {}", prompt_logprobs);
  return Status();
}

void apply_generation_config(const Json& gc, SamplingParams* p) {
  auto num = [&](const char* key, auto* out) {
    auto it = gc.find(key);
    if (it != gc.end() && it->is_number()) *out = it->get<std::remove_pointer_t<decltype(out)>>();
  };
  num("temperature", &p->temperature);
  num("top_p", &p->top_p);
  num("top_k", &p->top_k);
  num("min_p", &p->min_p);
  num("repetition_penalty", &p->repetition_penalty);
  if (auto it = gc.find("do_sample"); it != gc.end() && it->is_boolean() && !it->get<bool>()) p->temperature = 0.0f;
}

SamplingParams default_sampling_params(const std::string& model_dir) {
  SamplingParams p;  // temperature 1.0, top_p 0.95, top_k 40 (MiniMax-M2 model card)
  const auto path = std::filesystem::path(model_dir) / "generation_config.json";
  std::error_code ec;
  if (!model_dir.empty() && std::filesystem::exists(path, ec)) {
    auto gc = read_json_file(path.string());
    if (gc.ok() && gc->is_object()) apply_generation_config(*gc, &p);
  }
  return p;
}

}  // namespace m2
