#include "engine/output_processor.h"

#include <algorithm>

namespace m2 {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
    default: return "";
  }
}

OutputProcessor::OutputProcessor(const text::Tokenizer* tokenizer, std::vector<int32_t> eos_ids,
                                 int64_t max_model_len)
    : tokenizer_(tokenizer), eos_ids_(std::move(eos_ids)), max_model_len_(max_model_len) {
  if (tokenizer_ && tokenizer_->eos_id()) eos_ids_.push_back(*tokenizer_->eos_id());
  std::sort(eos_ids_.begin(), eos_ids_.end());
  eos_ids_.erase(std::unique(eos_ids_.begin(), eos_ids_.end()), eos_ids_.end());
}

void OutputProcessor::add(const Sequence& seq) {
  if (!tokenizer_) return;
  SeqText& t = texts_[seq.id];
  t.detok = std::make_unique<text::IncrementalDetokenizer>(*tokenizer_, seq.params.skip_special_tokens);
  t.stops = std::make_unique<StopStringMatcher>(seq.params.stop);
  if (seq.params.text_stop) t.text_stop = (*seq.params.text_stop)();
}

void OutputProcessor::remove(int64_t seq_id) { texts_.erase(seq_id); }

void OutputProcessor::add_prompt_logprobs(const StepChunk& c, const StepResult& result) {
  Sequence& seq = *c.seq;
  const int64_t V = result.vocab;
  for (int64_t i = 0; i < c.num_tokens; ++i) {
    const int64_t target = c.start + i + 1;  // the token these logits predict
    if (target >= seq.num_prompt_tokens) break;
    std::span<const float> lg = result.logits.subspan((c.first_logit + i) * V, V);
    float z = 0;
    const float lp = token_logprob(lg, seq.tokens[target], &z);
    std::vector<TokenLogprob> entry{{seq.tokens[target], lp}};
    for (const auto& t : top_logprobs(lg, seq.params.prompt_logprobs, z)) entry.push_back(t);
    seq.prompt_logprobs[target] = std::move(entry);
  }
}

void OutputProcessor::finish(Sequence& seq, FinishReason reason, RequestOutput& out, std::string stop_string,
                             int32_t stop_token_id) {
  auto t = texts_.find(seq.id);
  if (t != texts_.end()) {
    if (stop_string.empty()) {
      auto rest = t->second.detok->finish();
      if (rest.ok()) t->second.stops->append(*rest, false);
    }
    out.new_text += t->second.stops->take_emittable(true);
  }
  seq.state = SeqState::kFinished;
  out.finished = true;
  out.finish_reason = reason;
  out.stop_string = std::move(stop_string);
  out.stop_token_id = stop_token_id;
}

void OutputProcessor::apply_reasoning_budget(Sequence& seq, int32_t token) {
  if (!seq.reasoning_open) return;
  if (token == seq.params.reasoning_end_token) {
    seq.reasoning_open = false;
  } else if (seq.num_output() >= seq.params.reasoning_budget) {
    seq.forced.push_front(seq.params.reasoning_end_token);  // before any other forced token
    seq.reasoning_open = false;
  }
}

void OutputProcessor::append_token(Sequence& seq, const SampledToken& tok, RequestOutput& out) {
  const SamplingParams& p = seq.params;
  seq.tokens.push_back(tok.id);
  if (seq.forced_after_armed && tok.id == p.forced_after_token) {
    seq.forced.insert(seq.forced.begin(), p.forced_after.begin(), p.forced_after.end());
    seq.forced_after_armed = false;
  }
  apply_reasoning_budget(seq, tok.id);
  // The grammar starts after its trigger token (the reasoning's end).
  if (seq.matcher && seq.constraint_start < 0 && tok.id == p.constraint_after_token)
    seq.constraint_start = seq.num_output();
  ++seq.output_counts[tok.id];
  out.new_token_ids.push_back(tok.id);
  if (p.logprobs >= 0) {
    seq.output_logprobs.push_back(tok);
    out.new_logprobs.push_back(tok);
  }
  // Within the first min_tokens tokens neither stop ids nor stop strings end
  // the sequence (the sampler banned the stop ids and EOS there).
  const int64_t n_out = seq.num_output();
  const bool checks_on = n_out > p.min_tokens || p.min_tokens == 0;
  if (checks_on && std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), tok.id) != p.stop_token_ids.end())
    return finish(seq, FinishReason::kStop, out, {}, tok.id);
  if (!p.ignore_eos && std::binary_search(eos_ids_.begin(), eos_ids_.end(), tok.id))
    return finish(seq, FinishReason::kStop, out);
  auto t = texts_.find(seq.id);
  if (t != texts_.end()) {
    auto delta = t->second.detok->push(tok.id);
    const std::string d = delta.ok() ? *delta : std::string();
    const auto hit = t->second.stops->append(d, checks_on);
    if (hit) return finish(seq, FinishReason::kStop, out, p.stop[*hit]);
    out.new_text += t->second.stops->take_emittable(false);
    if (t->second.text_stop && t->second.text_stop->feed(d)) return finish(seq, FinishReason::kStop, out);
  }
  if (n_out >= p.max_tokens || seq.num_tokens() >= max_model_len_) finish(seq, FinishReason::kLength, out);
}

std::vector<RequestOutput> OutputProcessor::process(const StepBatch& batch, const StepResult& result) {
  for (const StepChunk& c : batch.chunks)
    if (c.prompt_logprobs) add_prompt_logprobs(c, result);
  std::vector<RequestOutput> outputs;
  outputs.reserve(batch.sample_rows.size());
  for (size_t i = 0; i < batch.sample_rows.size(); ++i) {
    Sequence& seq = *batch.chunks[batch.sample_chunk[i]].seq;
    if (batch.sample_rows[i].forced >= 0) seq.forced.pop_front();  // it emitted that token
    RequestOutput out;
    out.request_id = seq.request_id;
    out.index = seq.index;
    if (seq.num_output() == 0) out.prompt_logprobs = seq.prompt_logprobs;
    append_token(seq, result.sampled[i], out);
    out.num_prompt_tokens = seq.num_prompt_tokens;
    out.num_cached_tokens = seq.num_cached_prompt;
    out.num_output_tokens = seq.num_output();
    outputs.push_back(std::move(out));
  }
  return outputs;
}

}  // namespace m2
