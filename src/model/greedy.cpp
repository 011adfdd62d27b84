#include "model/greedy.h"

#include <algorithm>
#include <numeric>
#include <string>

namespace m2 {
SingleSequence::SingleSequence(MiniMaxM2& model, int64_t tokens, int block_size, DType kv_dtype)
    : blocks((tokens + block_size - 1) / block_size) {
  std::iota(blocks.begin(), blocks.end(), 0);
  cache = model.make_kv_cache(block_size, static_cast<int64_t>(blocks.size()), kv_dtype);
}

StepInput SingleSequence::step(std::span<const int32_t> tokens, int64_t start, bool all_logits) const {
  StepInput in;
  const int64_t n = static_cast<int64_t>(tokens.size());
  in.tokens.assign(tokens.begin(), tokens.end());
  for (int64_t i = 0; i < n; ++i) {
    in.positions.push_back(static_cast<int32_t>(start + i));
    in.slots.push_back(start + i);  // blocks in order: block p / bs holds position p
  }
  in.seqs.push_back({0, n, start + n, blocks});
  if (all_logits) {
    in.logit_rows.resize(n);
    std::iota(in.logit_rows.begin(), in.logit_rows.end(), 0);
  } else {
    in.logit_rows.push_back(n - 1);
  }
  return in;
}

namespace {

// Forces the step's rows [start, start + T) that `routing` ([rows, L, k])
// covers; the others (first id -1) are routed freely.
void force_routing(StepInput& in, std::span<const int32_t> routing, int64_t start, int64_t L, int64_t k) {
  const int64_t T = static_cast<int64_t>(in.tokens.size());
  const int64_t replayed = static_cast<int64_t>(routing.size()) / (L * k);
  if (start >= replayed) return;
  in.forced_experts.assign(static_cast<size_t>(L * T * k), -1);
  for (int64_t t = 0; t < T && start + t < replayed; ++t)
    for (int64_t l = 0; l < L; ++l)
      std::copy_n(routing.data() + ((start + t) * L + l) * k, k, in.forced_experts.data() + (l * T + t) * k);
}

Status check_routing(const MiniMaxM2& model, std::span<const int32_t> routing, int64_t rows, const std::string& what) {
  const int64_t per_row = static_cast<int64_t>(model.config().num_hidden_layers) * model.config().num_experts_per_tok;
  if (static_cast<int64_t>(routing.size()) % per_row != 0 || static_cast<int64_t>(routing.size()) / per_row > rows)
    return errorf("the routing replay holds {} ids: not rows of {} layers x top {} for at most the {} rows {}",
                  routing.size(), model.config().num_hidden_layers, model.config().num_experts_per_tok, rows, what);
  return {};
}

// One step of generate_greedy: rows [start, start + tokens.size()) with the
// options' routing replay and capture ([rows, L, k] there, [L, T, k] in a step).
Status greedy_step(MiniMaxM2& model, SingleSequence& seq, std::span<const int32_t> tokens, int64_t start,
                   const GreedyOptions& o, std::vector<float>* logits) {
  StepInput in = seq.step(tokens, start, false);
  const int64_t T = static_cast<int64_t>(tokens.size());
  const int64_t L = model.config().num_hidden_layers, k = model.config().num_experts_per_tok;
  force_routing(in, o.routing_in, start, L, k);
  in.capture_routing = o.routing_out != nullptr;
  M2_RETURN_IF_ERROR(model.forward(in, *seq.cache, logits));
  if (!o.routing_out) return Status();
  const std::span<const int32_t> got = model.last_routing();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t l = 0; l < L; ++l)
      o.routing_out->insert(o.routing_out->end(), got.begin() + (l * T + t) * k, got.begin() + (l * T + t + 1) * k);
  return Status();
}

}  // namespace

Result<std::vector<float>> all_logits(MiniMaxM2& model, std::span<const int32_t> ids, DType kv_dtype,
                                      std::span<const int32_t> routing) {
  M2_RETURN_IF_ERROR(check_routing(model, routing, static_cast<int64_t>(ids.size()), "of the prompt"));
  SingleSequence seq(model, static_cast<int64_t>(ids.size()), 16, kv_dtype);
  StepInput in = seq.step(ids, 0, true);
  force_routing(in, routing, 0, model.config().num_hidden_layers, model.config().num_experts_per_tok);
  std::vector<float> logits;
  M2_RETURN_IF_ERROR(model.forward(in, *seq.cache, &logits));
  return logits;
}

Result<std::vector<int32_t>> generate_greedy(MiniMaxM2& model, std::span<const int32_t> prompt,
                                             const GreedyOptions& o) {
  if (prompt.empty()) return errorf("generate: empty prompt");
  const int64_t total = static_cast<int64_t>(prompt.size()) + o.max_tokens;
  if (total > model.config().max_position_embeddings)
    return errorf("generate: {} prompt + {} new tokens exceed the model's {} positions", prompt.size(),
                  o.max_tokens, model.config().max_position_embeddings);
  M2_RETURN_IF_ERROR(check_routing(model, o.routing_in, total - 1,
                                   fmt::format("stepped ({} prompt + {} generated - 1)", prompt.size(), o.max_tokens)));
  if (o.routing_out) o.routing_out->clear();
  SingleSequence seq(model, total, o.block_size, o.kv_dtype);
  const int64_t V = model.config().vocab_size;
  std::vector<float> logits;
  // Prefill, in chunks if asked (the result must not depend on chunking).
  const int64_t chunk = o.prefill_chunk > 0 ? o.prefill_chunk : static_cast<int64_t>(prompt.size());
  for (int64_t p = 0; p < static_cast<int64_t>(prompt.size()); p += chunk) {
    const int64_t n = std::min<int64_t>(chunk, static_cast<int64_t>(prompt.size()) - p);
    M2_RETURN_IF_ERROR(greedy_step(model, seq, prompt.subspan(p, n), p, o, &logits));
  }
  std::vector<int32_t> out;
  int64_t pos = static_cast<int64_t>(prompt.size());
  for (int i = 0; i < o.max_tokens; ++i) {
    const int32_t next = static_cast<int32_t>(std::max_element(logits.begin(), logits.begin() + V) - logits.begin());
    out.push_back(next);
    if (!o.ignore_eos && std::find(o.eos_ids.begin(), o.eos_ids.end(), next) != o.eos_ids.end()) break;
    if (i + 1 == o.max_tokens) break;
    const int32_t tok[1] = {next};
    M2_RETURN_IF_ERROR(greedy_step(model, seq, tok, pos, o, &logits));
    ++pos;
  }
  return out;
}

}  // namespace m2
