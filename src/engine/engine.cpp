#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <random>

#include "model/sampling.h"
#include "util/log.h"
#include "util/thread_pool.h"

namespace m2 {

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
  const int64_t pool_tokens = num_blocks * config.block_size;
  int64_t max_model_len = config.max_model_len > 0 ? config.max_model_len : model.config().max_position_embeddings;
  if (max_model_len > pool_tokens) {
    log_warn("max model length {} exceeds the KV pool ({} blocks of {} tokens); capping it at {}", max_model_len,
             num_blocks, config.block_size, pool_tokens);
    max_model_len = pool_tokens;
  }
  if (config.scheduler.max_num_seqs < 1 || config.scheduler.max_num_batched_tokens < 1 ||
      config.scheduler.max_prompt_logprob_rows < 1)
    return errorf("scheduler limits: {} sequences, {} tokens, {} prompt-logprob rows per step: all must be positive",
                  config.scheduler.max_num_seqs, config.scheduler.max_num_batched_tokens,
                  config.scheduler.max_prompt_logprob_rows);
  // The step scratch first, sized for the largest step the scheduler makes,
  // so that nothing grows while serving; then the KV cache.
  StepLimits limits;
  limits.max_tokens = config.scheduler.max_num_batched_tokens;
  limits.max_seqs = config.scheduler.max_num_seqs;
  limits.max_logit_rows = config.scheduler.max_logit_rows();
  limits.max_context = max_model_len;
  limits.cache = model.kv_shape(config.block_size, num_blocks, config.kv_dtype);
  M2_ASSIGN_OR_RETURN(const size_t scratch, model.reserve(limits));
  log_debug("step scratch for {} tokens, {} sequences, {} logit rows, {} tokens of context: {:.1f} MiB", limits.max_tokens,
            limits.max_seqs, limits.max_logit_rows, limits.max_context, scratch / 1048576.0);
  if (model.backend().name() != "cpu") {  // (host memory is committed lazily: no such check there)
    const size_t kv = KvCache::storage_bytes(limits.cache), free = model.backend().memory_info().free_bytes;
    if (kv > free)
      return errorf("the KV cache of {} blocks needs {:.2f} GiB but {} has {:.2f} GiB free after the weights and the "
                    "step scratch ({:.2f} GiB): lower --kv-cache-memory / --gpu-memory-utilization, "
                    "--max-num-batched-tokens or --max-num-seqs",
                    num_blocks, kv / 1073741824.0, model.backend().name(), free / 1073741824.0,
                    scratch / 1073741824.0);
  }
  std::unique_ptr<Engine> engine(new Engine(model, tokenizer, config, num_blocks, max_model_len));
  if (config.record_decode_graphs) {
    const auto start = std::chrono::steady_clock::now();
    M2_ASSIGN_OR_RETURN(const int64_t steps, model.record_decode_graphs(*engine->cache_));
    if (steps > 0)
      log_info("decode graphs of 1-{} sequences recorded in {:.1f} s ({} steps)", limits.max_seqs,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), steps);
  }
  return engine;
}

Engine::Engine(MiniMaxM2& model, const text::Tokenizer* tokenizer, const EngineConfig& config, int64_t num_blocks,
               int64_t max_model_len)
    : model_(model),
      tokenizer_(tokenizer),
      config_(config),
      max_model_len_(max_model_len),
      cache_(model.make_kv_cache(config.block_size, num_blocks, config.kv_dtype)),
      blocks_(num_blocks, config.block_size, config.prefix_cache),
      scheduler_(config.scheduler, blocks_),
      output_(tokenizer, config.eos_ids, max_model_len) {}

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
  if (params.routing_replay) {
    const int64_t per_row = static_cast<int64_t>(model_.config().num_hidden_layers) * model_.config().num_experts_per_tok;
    const int64_t size = static_cast<int64_t>(params.routing_replay->size());
    if (size % per_row != 0 || size / per_row > static_cast<int64_t>(prompt.size()))
      return errorf("the routing replay holds {} ids: not rows of {} layers x top {} for at most the {} prompt tokens",
                    size, model_.config().num_hidden_layers, model_.config().num_experts_per_tok, prompt.size());
  }

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
    seq->reasoning_open = params.reasoning_budget >= 0;
    seq->cacheable = !params.routing_replay;
    if (params.reasoning_budget == 0) {  // no reasoning at all: the end token comes first
      seq->forced.push_front(params.reasoning_end_token);
      seq->reasoning_open = false;
    }
    if (params.constraint) {
      seq->matcher = std::make_shared<ConstraintMatcher>(params.constraint);
      seq->constraint_start = params.constraint_after_token < 0 ? 0 : -1;
      seq->mask.resize(static_cast<size_t>(constraint_mask_words(vocab)));
    }
    if (params.prompt_logprobs >= 0) seq->prompt_logprobs.resize(prompt.size());
    output_.add(*seq);
    ids.push_back(seq->id);
    seqs_[seq->id] = std::move(seq);
  }
  requests_[request_id] = ids;
  // Siblings start once the first one's prompt is in the cache, so that they
  // share its blocks instead of computing the prompt n times.
  scheduler_.add(seqs_[ids[0]].get());
  for (size_t i = 1; i < ids.size(); ++i) {
    if (config_.prefix_cache && params.prompt_logprobs < 0 && !params.return_routed_experts && !params.routing_replay) {
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
    output_.remove(id);
    seqs_.erase(s);
  }
  requests_.erase(it);
}

void Engine::set_paused(const std::string& request_id, bool paused) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return;
  for (int64_t id : it->second) {
    if (auto s = seqs_.find(id); s != seqs_.end()) s->second->paused = paused;
  }
}

Result<std::vector<RequestOutput>> Engine::step() {
  SchedulerOutput so = scheduler_.schedule();
  stats_.preemptions += static_cast<int64_t>(so.preempted.size());
  if (so.chunks.empty()) {
    if (scheduler_.has_work()) return errorf("engine: no sequence fits the KV pool ({} blocks)", blocks_.num_blocks());
    return std::vector<RequestOutput>();
  }
  StepBatch batch = build_step_batch(so, blocks_, output_.eos_ids());
  add_routing(batch);
  auto result = run(batch);
  if (!result.ok()) return result.status();
  ++stats_.steps;
  store_routing(batch);
  advance(batch);
  std::vector<RequestOutput> outputs = output_.process(batch, *result);
  attach_routed_experts(outputs);
  release_finished(outputs);
  return outputs;
}

namespace {

// True if every token `mask` allows is in `banned`.
bool only_banned_allowed(std::span<const uint32_t> mask, std::span<const int32_t> banned) {
  std::vector<uint32_t> rest(mask.begin(), mask.end());
  for (int32_t id : banned)
    if (static_cast<size_t>(id) / 32 < rest.size()) rest[static_cast<size_t>(id) / 32] &= ~(1u << (id % 32));
  return std::all_of(rest.begin(), rest.end(), [](uint32_t w) { return w == 0; });
}

// Brings `seq`'s grammar up to its last token and, unless the row emits a
// forced token, writes the next token's mask into seq.mask and points the
// row at it. A forced token the grammar refuses (only a --replay output or
// a server-forced token can be one) ends the constraint for the sequence.
void prepare_constrained_row(Sequence& seq, SampleRow& row) {
  const std::span<const int32_t> out = seq.output();
  while (!seq.constraint_broken && seq.constraint_start + seq.constraint_fed < static_cast<int64_t>(out.size())) {
    const int32_t tok = out[static_cast<size_t>(seq.constraint_start + seq.constraint_fed)];
    bool ok = false;
    try {
      ok = seq.matcher->accept(tok);
    } catch (const std::exception& e) {
      log_warn("request {}: the grammar failed on token {}: {}", seq.request_id, tok, e.what());
    }
    if (!ok) {
      log_warn("request {}: token {} is outside its grammar; the rest of its output is not constrained",
               seq.request_id, tok);
      seq.constraint_broken = true;
    }
    ++seq.constraint_fed;
  }
  if (seq.constraint_broken || row.forced >= 0) return;
  try {
    seq.matcher->fill_mask(seq.mask);
    row.allowed = seq.mask;
    // Below min_tokens the stop ids are banned; if the grammar allows
    // nothing else (it is complete), the grammar wins: its end is a stop id.
    if (!row.banned.empty() && only_banned_allowed(seq.mask, row.banned)) row.banned = {};
  } catch (const std::exception& e) {  // never out of the engine thread's step
    log_warn("request {}: no mask from its grammar ({}); the rest of its output is not constrained", seq.request_id,
             e.what());
    seq.constraint_broken = true;
  }
}

}  // namespace

Result<StepResult> Engine::run(StepBatch& batch) {
  StepResult r;
  r.sampled.resize(batch.sample_rows.size());
  // Rows under a grammar: their masks are computed on a helper thread while
  // the forward runs (the grammar's state needs the previous step's token,
  // not this step's logits) and handed to the backend's sampler with the
  // rows (a bitmask per row; the GPU applies it where the logits are).
  std::vector<size_t> constrained;
  for (size_t i = 0; i < batch.sample_rows.size(); ++i) {
    const Sequence& seq = *batch.chunks[batch.sample_chunk[i]].seq;
    if (seq.matcher && !seq.constraint_broken && seq.constraint_start >= 0) constrained.push_back(i);
  }
  std::future<void> masks;
  if (!constrained.empty()) {
    masks = std::async(std::launch::async, [&batch, &constrained] {
      for (size_t i : constrained)
        prepare_constrained_row(*batch.chunks[batch.sample_chunk[i]].seq, batch.sample_rows[i]);
    });
  }
  auto join_masks = [&masks] {
    if (masks.valid()) masks.get();  // before the rows are read (and before returning: the task reads the batch)
  };
  if (!batch.full_logits) {
    // Sampling where the logits are: only the tokens come back.
    M2_RETURN_IF_ERROR(model_.forward_sample(batch.input, *cache_, batch.sample_rows, r.sampled, join_masks));
    return r;
  }
  const int64_t V = model_.config().vocab_size;
  const Status fwd = model_.forward(batch.input, *cache_, &logits_);
  join_masks();
  M2_RETURN_IF_ERROR(fwd);
  // The host path (the same math as Backend::sample), one sequence per task.
  ThreadPool::global().parallel_for(static_cast<int64_t>(batch.sample_rows.size()), [&](int64_t i, int) {
    std::span<float> lg(logits_.data() + batch.sample_logit_row(i) * V, V);
    r.sampled[i] = sample_row(lg, batch.sample_rows[i]);
  });
  r.logits = logits_;
  r.vocab = V;
  return r;
}

void Engine::advance(const StepBatch& batch) {
  for (const StepChunk& c : batch.chunks) {
    Sequence& seq = *c.seq;
    const int64_t n = c.num_tokens;
    // A decode: the newest sampled token alone (never computed before, also
    // when a preempted sequence resumes with everything before it cached).
    const bool is_decode = n == 1 && c.start + 1 == seq.num_tokens() && seq.num_output() > 0;
    (is_decode ? stats_.decode_tokens : stats_.prefill_tokens) += n;
    seq.num_computed += n;
    blocks_.commit_full_blocks(seq);
    auto sib = pending_siblings_.find(seq.id);
    if (sib != pending_siblings_.end() && seq.num_computed >= seq.num_prompt_tokens) {
      for (int64_t id : sib->second) scheduler_.add(seqs_.at(id).get());
      pending_siblings_.erase(sib);
    }
  }
}

void Engine::release_finished(const std::vector<RequestOutput>& outputs) {
  for (const RequestOutput& o : outputs) {
    if (!o.finished) continue;
    auto& ids = requests_[o.request_id];
    const int64_t id = ids[o.index];
    scheduler_.remove(seqs_.at(id).get());
    output_.remove(id);
    seqs_.erase(id);
    if (std::none_of(ids.begin(), ids.end(), [&](int64_t s) { return seqs_.count(s) != 0; })) requests_.erase(o.request_id);
  }
}

std::vector<RequestOutput> Engine::abort_with_outputs(const std::string& request_id) {
  std::vector<RequestOutput> outs;
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return outs;
  for (int64_t id : it->second) {
    auto s = seqs_.find(id);
    if (s == seqs_.end()) continue;
    const Sequence& seq = *s->second;
    RequestOutput o;
    o.request_id = request_id;
    o.index = seq.index;
    o.finished = true;
    o.finish_reason = FinishReason::kAbort;
    o.num_prompt_tokens = seq.num_prompt_tokens;
    o.num_cached_tokens = seq.num_cached_prompt;
    o.num_output_tokens = seq.num_output();
    outs.push_back(std::move(o));
  }
  attach_routed_experts(outs);
  abort(request_id);
  return outs;
}

int64_t Engine::flush_prefix_cache() {
  for (auto& [id, seq] : seqs_) seq->cacheable = false;
  return blocks_.flush_prefix_cache();
}

Status Engine::swap_weights(ModelWeights& weights) {
  if (model_.parallel_size() > 1)
    return errorf("weight updates with --tensor-parallel-size {} are not implemented yet (the ranks hold shards)",
                  model_.parallel_size());
  const ModelConfig& a = model_.config();
  const ModelConfig& b = weights.config;
  if (a.num_hidden_layers != b.num_hidden_layers || a.hidden_size != b.hidden_size ||
      a.vocab_size != b.vocab_size || a.num_local_experts != b.num_local_experts)
    return errorf("swap_weights: the new weight set has another shape");
  M2_RETURN_IF_ERROR(model_.backend().update_weights(model_.weights(), weights));
  model_.set_weights(weights);
  flush_prefix_cache();
  return Status();
}

void Engine::add_routing(StepBatch& batch) const {
  const int L = model_.config().num_hidden_layers, k = model_.config().num_experts_per_tok;
  const int64_t T = static_cast<int64_t>(batch.input.tokens.size());
  bool replay = false;
  for (const StepChunk& c : batch.chunks) {
    batch.input.capture_routing = batch.input.capture_routing || c.seq->params.return_routed_experts;
    replay = replay || (c.seq->params.routing_replay && c.start * L * k < static_cast<int64_t>(c.seq->params.routing_replay->size()));
  }
  if (!replay) return;
  std::vector<int32_t>& f = batch.input.forced_experts;
  f.assign(static_cast<size_t>(L * T * k), -1);
  for (size_t ci = 0; ci < batch.chunks.size(); ++ci) {
    const StepChunk& c = batch.chunks[ci];
    if (!c.seq->params.routing_replay) continue;
    const std::vector<int32_t>& r = *c.seq->params.routing_replay;  // [rows, L, k]
    const int64_t rows = static_cast<int64_t>(r.size()) / (L * k);
    const int64_t first_row = batch.input.seqs[ci].first_row;
    for (int64_t i = 0; i < c.num_tokens && c.start + i < rows; ++i)
      for (int l = 0; l < L; ++l)
        std::copy_n(r.data() + ((c.start + i) * L + l) * k, k, f.data() + (l * T + first_row + i) * k);
  }
}

void Engine::store_routing(const StepBatch& batch) {
  if (!batch.input.capture_routing) return;
  const int L = model_.config().num_hidden_layers, k = model_.config().num_experts_per_tok;
  const int64_t T = static_cast<int64_t>(batch.input.tokens.size());
  std::span<const int32_t> got = model_.last_routing();  // [L, T, k]
  for (size_t ci = 0; ci < batch.chunks.size(); ++ci) {
    const StepChunk& c = batch.chunks[ci];
    Sequence& seq = *c.seq;
    if (!seq.params.return_routed_experts) continue;
    const int64_t first_row = batch.input.seqs[ci].first_row;
    const size_t need = static_cast<size_t>((c.start + c.num_tokens) * L * k);
    if (seq.routed_experts.size() < need) seq.routed_experts.resize(need);
    for (int64_t i = 0; i < c.num_tokens; ++i)
      for (int l = 0; l < L; ++l)
        std::copy_n(got.data() + (l * T + first_row + i) * k, k, seq.routed_experts.data() + ((c.start + i) * L + l) * k);
  }
}

void Engine::attach_routed_experts(std::vector<RequestOutput>& outputs) const {
  const int L = model_.config().num_hidden_layers, k = model_.config().num_experts_per_tok;
  for (RequestOutput& o : outputs) {
    if (!o.finished) continue;
    auto r = requests_.find(o.request_id);
    if (r == requests_.end() || o.index >= static_cast<int>(r->second.size())) continue;
    auto s = seqs_.find(r->second[o.index]);
    if (s == seqs_.end() || !s->second->params.return_routed_experts) continue;
    const Sequence& seq = *s->second;
    // Every position but the last (never run); all of them were computed.
    const size_t n = static_cast<size_t>(std::max<int64_t>(seq.num_tokens() - 1, 0) * L * k);
    o.routed_experts.assign(seq.routed_experts.begin(),
                            seq.routed_experts.begin() + static_cast<std::ptrdiff_t>(std::min(n, seq.routed_experts.size())));
  }
}

EngineStats Engine::stats() const {
  EngineStats s = stats_;
  s.running = scheduler_.num_running();
  s.waiting = scheduler_.num_waiting();
  s.paused = scheduler_.num_paused();
  s.kv_blocks_total = blocks_.num_blocks();
  s.kv_blocks_used = blocks_.num_used_blocks();
  s.prefix = blocks_.stats();
  return s;
}

}  // namespace m2
