#include "engine/scheduler.h"

#include <algorithm>

namespace m2 {
namespace {
bool before(const Sequence* a, const Sequence* b) {
  return a->priority != b->priority ? a->priority < b->priority : a->arrival < b->arrival;
}
}  // namespace

void Scheduler::insert_waiting(Sequence* seq) {
  seq->state = SeqState::kWaiting;
  waiting_.insert(std::upper_bound(waiting_.begin(), waiting_.end(), seq, before), seq);
}

void Scheduler::add(Sequence* seq) { insert_waiting(seq); }

bool Scheduler::has_work() const {
  auto unpaused = [](const Sequence* s) { return !s->paused; };
  return std::any_of(running_.begin(), running_.end(), unpaused) ||
         std::any_of(waiting_.begin(), waiting_.end(), unpaused);
}

size_t Scheduler::num_paused() const {
  auto paused = [](const Sequence* s) { return s->paused; };
  return static_cast<size_t>(std::count_if(running_.begin(), running_.end(), paused) +
                             std::count_if(waiting_.begin(), waiting_.end(), paused));
}

void Scheduler::remove(Sequence* seq) {
  running_.erase(std::remove(running_.begin(), running_.end(), seq), running_.end());
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), seq), waiting_.end());
  blocks_.release(*seq);
}

void Scheduler::preempt(Sequence* seq) {
  blocks_.release(*seq);
  seq->num_computed = 0;
  ++seq->num_preemptions;
  running_.erase(std::remove(running_.begin(), running_.end(), seq), running_.end());
  insert_waiting(seq);
}

size_t Scheduler::retract_all() {
  const std::vector<Sequence*> running = running_;
  for (Sequence* s : running) preempt(s);
  return running.size();
}

Sequence* Scheduler::latest_paused() const {
  for (auto it = running_.rbegin(); it != running_.rend(); ++it)
    if ((*it)->paused) return *it;
  return nullptr;
}

// Tokens of `seq` this step may compute: its remaining ones within the token
// budget and, for a prompt-logprobs prefill (all its rows keep logits),
// within the logit rows left; 0 when none fit.
int64_t Scheduler::chunk_tokens(const Sequence& seq, int64_t budget, int64_t* logit_rows_left) const {
  int64_t n = std::min(seq.num_tokens() - seq.num_computed, budget);
  if (seq.params.prompt_logprobs >= 0 && seq.num_computed < seq.num_prompt_tokens) {
    n = std::min(n, *logit_rows_left);
    *logit_rows_left -= n;
  }
  return n;
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  int64_t budget = config_.max_num_batched_tokens;
  int64_t logit_rows_left = config_.max_prompt_logprob_rows;
  std::sort(running_.begin(), running_.end(), before);

  // 1. Running sequences: decodes and unfinished prefills.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* seq = running_[i];
    if (seq->paused) {
      ++i;
      continue;
    }
    const int64_t n = chunk_tokens(*seq, budget, &logit_rows_left);
    if (n == 0) {  // no logit rows left this step
      ++i;
      continue;
    }
    bool self_preempted = false;
    while (!blocks_.ensure_capacity(*seq, seq->num_computed + n)) {
      Sequence* victim = latest_paused();
      if (!victim) victim = running_.back();
      // A paused victim may sit before `seq` (paused ones are passed over).
      const bool before_seq = std::find(running_.begin(), running_.begin() + static_cast<std::ptrdiff_t>(i),
                                        victim) != running_.begin() + static_cast<std::ptrdiff_t>(i);
      preempt(victim);
      out.preempted.push_back(victim);
      if (victim == seq) {
        self_preempted = true;
        break;
      }
      if (before_seq) --i;
    }
    if (self_preempted) break;  // everything after it was preempted too
    out.chunks.push_back({seq, n});
    budget -= n;
    ++i;
  }

  // 2. Waiting sequences, in order, while blocks, budget and seats last
  //    (none after a preemption: the pool is already short).
  for (size_t w = 0; out.preempted.empty() && w < waiting_.size() && budget > 0 &&
                     static_cast<int>(running_.size()) < config_.max_num_seqs;) {
    Sequence* seq = waiting_[w];
    if (seq->paused) {
      ++w;
      continue;
    }
    int64_t rows_left = logit_rows_left;
    if (chunk_tokens(*seq, budget, &rows_left) == 0) break;  // no logit rows left: it waits (FCFS)
    // Prompt logprobs and routed experts need every prompt position computed;
    // a replayed routing must not reuse KV computed with the router's own.
    if (seq->params.prompt_logprobs < 0 && !seq->params.return_routed_experts && !seq->params.routing_replay)
      blocks_.attach_cached_prefix(*seq);
    const int64_t n = chunk_tokens(*seq, budget, &logit_rows_left);
    bool fits = blocks_.ensure_capacity(*seq, seq->num_computed + n);
    // Blocks held by paused sequences (clients not reading) are taken back
    // before a sequence that could run waits for them.
    for (Sequence* victim; !fits && (victim = latest_paused());) {
      preempt(victim);
      out.preempted.push_back(victim);
      fits = blocks_.ensure_capacity(*seq, seq->num_computed + n);
    }
    if (!fits) {
      blocks_.release(*seq);  // give back the cached prefix; FCFS: nobody jumps the queue
      seq->num_computed = 0;
      break;
    }
    waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(w));
    if (seq->num_preemptions == 0) {
      seq->num_cached_prompt = std::min(seq->num_computed, seq->num_prompt_tokens);
      blocks_.count_lookup(*seq);
    }
    seq->state = SeqState::kRunning;
    running_.push_back(seq);
    out.chunks.push_back({seq, n});
    budget -= n;
  }
  for (const ScheduledChunk& c : out.chunks) out.num_tokens += c.num_tokens;
  return out;
}

}  // namespace m2
