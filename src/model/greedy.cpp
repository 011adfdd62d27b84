#include "model/greedy.h"

#include <algorithm>
#include <numeric>

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

Result<std::vector<float>> all_logits(MiniMaxM2& model, std::span<const int32_t> ids, DType kv_dtype) {
  SingleSequence seq(model, static_cast<int64_t>(ids.size()), 16, kv_dtype);
  std::vector<float> logits;
  M2_RETURN_IF_ERROR(seq.run(ids, 0, true, model, &logits));
  return logits;
}

Result<std::vector<int32_t>> generate_greedy(MiniMaxM2& model, std::span<const int32_t> prompt,
                                             const GreedyOptions& o) {
  if (prompt.empty()) return errorf("generate: empty prompt");
  const int64_t total = static_cast<int64_t>(prompt.size()) + o.max_tokens;
  if (total > model.config().max_position_embeddings)
    return errorf("generate: {} prompt + {} new tokens exceed the model's {} positions", prompt.size(),
                  o.max_tokens, model.config().max_position_embeddings);
  SingleSequence seq(model, total, o.block_size, o.kv_dtype);
  const int64_t V = model.config().vocab_size;
  std::vector<float> logits;
  // Prefill, in chunks if asked (the result must not depend on chunking).
  const int64_t chunk = o.prefill_chunk > 0 ? o.prefill_chunk : static_cast<int64_t>(prompt.size());
  for (int64_t p = 0; p < static_cast<int64_t>(prompt.size()); p += chunk) {
    const int64_t n = std::min<int64_t>(chunk, static_cast<int64_t>(prompt.size()) - p);
    M2_RETURN_IF_ERROR(seq.run(prompt.subspan(p, n), p, false, model, &logits));
  }
  std::vector<int32_t> out;
  int64_t pos = static_cast<int64_t>(prompt.size());
  for (int i = 0; i < o.max_tokens; ++i) {
    const int32_t next = static_cast<int32_t>(std::max_element(logits.begin(), logits.begin() + V) - logits.begin());
    out.push_back(next);
    if (!o.ignore_eos && std::find(o.eos_ids.begin(), o.eos_ids.end(), next) != o.eos_ids.end()) break;
    if (i + 1 == o.max_tokens) break;
    const int32_t tok[1] = {next};
    M2_RETURN_IF_ERROR(seq.run(tok, pos, false, model, &logits));
    ++pos;
  }
  return out;
}

}  // namespace m2
