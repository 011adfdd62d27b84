#include "engine/engine.h"

#include <algorithm>
#include <random>

#include "engine/sampler.h"

#include "util/log.h"
#include "util/thread_pool.h"

namespace m2 {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
    default: return "";
  }
}

Result<std::unique_ptr<Engine>> Engine::create(MiniMaxM2& model, const text::Tokenizer* tokenizer,
                                               const EngineConfig& config) {
  if (config.block_size <= 0) return errorf("block size must be positive, got {}", config.block_size);
  if (config.kv_dtype != DType::kF32 && config.kv_dtype != DType::kBF16 && config.kv_dtype != DType::kF8E4M3)
    return errorf("KV cache dtype {} is not supported (F32, BF16, F8_E4M3)", dtype_name(config.kv_dtype));
  const KvCacheShape one = model.kv_shape(config.block_size, 1, config.kv_dtype);
  const int64_t block_bytes = static_cast<int64_t>(KvCache::storage_bytes(one));  // all layers, K and V
  int64_t num_blocks = config.num_blocks;
  if (num_blocks <= 0) {
    const int64_t bytes = config.kv_cache_bytes > 0 ? config.kv_cache_bytes : (256ll << 20);
    num_blocks = bytes / block_bytes;
  }
  if (num_blocks < 1) return errorf("the KV cache budget holds no block ({} bytes per block)", block_bytes);
  return std::unique_ptr<Engine>(new Engine(model, tokenizer, config, num_blocks));
}

Engine::Engine(MiniMaxM2& model, const text::Tokenizer* tokenizer, const EngineConfig& config, int64_t num_blocks)
    : model_(model),
      tokenizer_(tokenizer),
      config_(config),
      blocks_(num_blocks, config.block_size, config.prefix_cache),
      scheduler_(config.scheduler, blocks_) {
  cache_ = model.make_kv_cache(config.block_size, num_blocks, config.kv_dtype);
  const int64_t pool_tokens = num_blocks * config.block_size;
  max_model_len_ = config.max_model_len > 0 ? config.max_model_len : model.config().max_position_embeddings;
  if (max_model_len_ > pool_tokens) {
    log_warn("max model length {} exceeds the KV pool ({} blocks of {} tokens); capping it at {}", max_model_len_,
             num_blocks, config.block_size, pool_tokens);
    max_model_len_ = pool_tokens;
  }
  eos_ids_ = config.eos_ids;
  if (tokenizer_ && tokenizer_->eos_id()) eos_ids_.push_back(*tokenizer_->eos_id());
  std::sort(eos_ids_.begin(), eos_ids_.end());
  eos_ids_.erase(std::unique(eos_ids_.begin(), eos_ids_.end()), eos_ids_.end());
}

Status Engine::add_request(const std::string& request_id, std::vector<int32_t> prompt, const SamplingParams& params,
                           int priority) {
  const int vocab = model_.config().vocab_size;
  M2_RETURN_IF_ERROR(params.validate(vocab));
  if (requests_.count(request_id)) return errorf("request id '{}' is already in use", request_id);
  if (prompt.empty()) return errorf("the prompt is empty");
  for (int32_t id : prompt) {
    if (id < 0 || id >= vocab) return errorf("prompt token {} is outside the vocabulary [0, {})", id, vocab);
  }
  if (static_cast<int64_t>(prompt.size()) >= max_model_len_)
    return errorf("the prompt is {} tokens but the context holds {} (prompt plus at least one generated token)",
                  prompt.size(), max_model_len_);
  if (!params.stop.empty() && !tokenizer_) return errorf("stop strings need a tokenizer in the model directory");

  std::random_device rd;
  std::vector<int64_t> ids;
  for (int i = 0; i < params.n; ++i) {
    auto seq = std::make_unique<Sequence>();
    seq->id = next_seq_id_++;
    seq->request_id = request_id;
    seq->index = i;
    seq->priority = priority;
    seq->arrival = next_arrival_++;
    seq->params = params;
    seq->seed = params.seed ? *params.seed + static_cast<uint64_t>(i) : (static_cast<uint64_t>(rd()) << 32) ^ rd();
    seq->tokens = prompt;
    seq->num_prompt_tokens = static_cast<int64_t>(prompt.size());
    seq->forced.assign(params.forced_tokens.begin(), params.forced_tokens.end());
    seq->forced_after_armed = params.forced_after_token >= 0 && !params.forced_after.empty();
    if (params.prompt_logprobs >= 0) seq->prompt_logprobs.resize(prompt.size());
    if (tokenizer_) {
      SeqText& t = texts_[seq->id];
      t.detok = std::make_unique<text::IncrementalDetokenizer>(*tokenizer_, params.skip_special_tokens);
      t.stops = std::make_unique<StopStringMatcher>(params.stop);
    }
    ids.push_back(seq->id);
    seqs_[seq->id] = std::move(seq);
  }
  requests_[request_id] = ids;
  // Siblings start once the first one's prompt is in the cache, so that they
  // share its blocks instead of computing the prompt n times.
  scheduler_.add(seqs_[ids[0]].get());
  for (size_t i = 1; i < ids.size(); ++i) {
    if (config_.prefix_cache && params.prompt_logprobs < 0) {
      pending_siblings_[ids[0]].push_back(ids[i]);
    } else {
      scheduler_.add(seqs_[ids[i]].get());
    }
  }
  return Status();
}

void Engine::abort(const std::string& request_id) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return;
  for (int64_t id : it->second) {
    auto s = seqs_.find(id);
    if (s == seqs_.end()) continue;
    scheduler_.remove(s->second.get());
    pending_siblings_.erase(id);
    texts_.erase(id);
    seqs_.erase(s);
  }
  requests_.erase(it);
}

void Engine::finish(Sequence& seq, FinishReason reason, RequestOutput& out, std::string stop_string,
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

void Engine::append_token(Sequence& seq, const SampledToken& tok, RequestOutput& out) {
  const SamplingParams& p = seq.params;
  seq.tokens.push_back(tok.id);
  if (seq.forced_after_armed && tok.id == p.forced_after_token) {
    seq.forced.insert(seq.forced.begin(), p.forced_after.begin(), p.forced_after.end());
    seq.forced_after_armed = false;
  }
  ++seq.output_counts[tok.id];
  out.new_token_ids.push_back(tok.id);
  if (p.logprobs >= 0) {
    seq.output_logprobs.push_back(tok);
    out.new_logprobs.push_back(tok);
  }
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
  }
  if (n_out >= p.max_tokens || seq.num_tokens() >= max_model_len_) finish(seq, FinishReason::kLength, out);
}

Result<std::vector<RequestOutput>> Engine::step() {
  SchedulerOutput so = scheduler_.schedule();
  stats_.preemptions += static_cast<int64_t>(so.preempted.size());
  std::vector<RequestOutput> outputs;
  if (so.chunks.empty()) {
    if (scheduler_.has_work()) return errorf("engine: no sequence fits the KV pool ({} blocks)", blocks_.num_blocks());
    return outputs;
  }
  // The step's batch: each chunk's tokens, positions and cache slots.
  StepInput in;
  struct Rows { int64_t first_logit = -1, num_logits = 0; };
  std::vector<Rows> rows(so.chunks.size());
  std::vector<size_t> sampling;  // chunks that reach the end of their sequence's known tokens
  bool full_logits = false;      // a chunk needs prompt logprobs: the step's logits come to the host
  int64_t row = 0;
  for (size_t c = 0; c < so.chunks.size(); ++c) {
    Sequence& seq = *so.chunks[c].seq;
    const int64_t n = so.chunks[c].num_tokens, start = seq.num_computed;
    for (int64_t i = 0; i < n; ++i) {
      in.tokens.push_back(seq.tokens[start + i]);
      in.positions.push_back(static_cast<int32_t>(start + i));
      in.slots.push_back(blocks_.slot(seq, start + i));
    }
    in.seqs.push_back({row, n, start + n, seq.block_table});
    const bool completes = start + n == seq.num_tokens();
    const bool prompt_lp = seq.params.prompt_logprobs >= 0 && start < seq.num_prompt_tokens;
    rows[c].first_logit = static_cast<int64_t>(in.logit_rows.size());
    if (prompt_lp) {
      for (int64_t i = 0; i < n; ++i) in.logit_rows.push_back(row + i);
      rows[c].num_logits = n;
      full_logits = true;
    } else if (completes) {
      in.logit_rows.push_back(row + n - 1);
      rows[c].num_logits = 1;
    }
    if (completes) sampling.push_back(c);
    row += n;
  }
  // Each sampling sequence's row: its last logit row.
  std::vector<SampleRowInputs> inputs(sampling.size());
  std::vector<SampleRow> sample_rows(sampling.size());
  for (size_t i = 0; i < sampling.size(); ++i)
    sample_rows[i] = make_sample_row(*so.chunks[sampling[i]].seq, eos_ids_, &inputs[i]);
  std::vector<SampledToken> sampled(sampling.size());
  if (full_logits) {
    M2_RETURN_IF_ERROR(model_.forward(in, *cache_, &logits_));
  } else {
    // Sampling where the logits are: only the tokens come back.
    M2_RETURN_IF_ERROR(model_.forward_sample(in, *cache_, sample_rows, sampled));
  }
  ++stats_.steps;

  const int64_t V = model_.config().vocab_size;
  // Prompt logprobs and cache bookkeeping.
  for (size_t c = 0; c < so.chunks.size(); ++c) {
    Sequence& seq = *so.chunks[c].seq;
    const int64_t n = so.chunks[c].num_tokens, start = seq.num_computed;
    const bool is_decode = n == 1 && start + 1 == seq.num_tokens() && seq.num_output() > 0 && seq.num_preemptions == 0;
    (is_decode ? stats_.decode_tokens : stats_.prefill_tokens) += n;
    if (seq.params.prompt_logprobs >= 0 && rows[c].num_logits == n) {
      for (int64_t i = 0; i < n; ++i) {
        const int64_t target = start + i + 1;  // the token these logits predict
        if (target >= seq.num_prompt_tokens) break;
        std::span<const float> lg(logits_.data() + (rows[c].first_logit + i) * V, V);
        float z = 0;
        const float lp = token_logprob(lg, seq.tokens[target], &z);
        std::vector<TokenLogprob> entry{{seq.tokens[target], lp}};
        for (const auto& t : top_logprobs(lg, seq.params.prompt_logprobs, z)) entry.push_back(t);
        seq.prompt_logprobs[target] = std::move(entry);
      }
    }
    seq.num_computed += n;
    blocks_.commit_full_blocks(seq);
    auto sib = pending_siblings_.find(seq.id);
    if (sib != pending_siblings_.end() && seq.num_computed >= seq.num_prompt_tokens) {
      for (int64_t id : sib->second) scheduler_.add(seqs_.at(id).get());
      pending_siblings_.erase(sib);
    }
  }
  if (full_logits) {
    // The host path (the same math as Backend::sample), one sequence per task.
    ThreadPool::global().parallel_for(static_cast<int64_t>(sampling.size()), [&](int64_t i, int) {
      const size_t c = sampling[i];
      float* lg = logits_.data() + (rows[c].first_logit + rows[c].num_logits - 1) * V;
      sampled[i] = sample_row(std::span<float>(lg, V), sample_rows[i]);
    });
  }
  for (size_t i = 0; i < sampling.size(); ++i)
    if (sample_rows[i].forced >= 0) so.chunks[sampling[i]].seq->forced.pop_front();
  for (size_t i = 0; i < sampling.size(); ++i) {
    Sequence& seq = *so.chunks[sampling[i]].seq;
    RequestOutput out;
    out.request_id = seq.request_id;
    out.index = seq.index;
    if (seq.num_output() == 0) out.prompt_logprobs = seq.prompt_logprobs;
    append_token(seq, sampled[i], out);
    out.num_prompt_tokens = seq.num_prompt_tokens;
    out.num_cached_tokens = seq.num_cached_prompt;
    out.num_output_tokens = seq.num_output();
    outputs.push_back(std::move(out));
  }
  // Finished sequences leave at once; their blocks go back to the pool.
  for (const RequestOutput& o : outputs) {
    if (!o.finished) continue;
    auto& ids = requests_[o.request_id];
    const int64_t id = ids[o.index];
    scheduler_.remove(seqs_.at(id).get());
    texts_.erase(id);
    seqs_.erase(id);
    if (std::none_of(ids.begin(), ids.end(), [&](int64_t s) { return seqs_.count(s) != 0; })) requests_.erase(o.request_id);
  }
  return outputs;
}

EngineStats Engine::stats() const {
  EngineStats s = stats_;
  s.running = scheduler_.num_running();
  s.waiting = scheduler_.num_waiting();
  s.kv_blocks_total = blocks_.num_blocks();
  s.kv_blocks_used = blocks_.num_used_blocks();
  s.prefix = blocks_.stats();
  return s;
}

}  // namespace m2
