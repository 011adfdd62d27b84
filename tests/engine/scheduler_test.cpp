// The Scheduler alone (no model): each test plays the engine's part between
// steps (computed positions advance, full blocks enter the prefix cache, a
// sequence that reached the end of its known tokens gets its next token) and
// checks every decision (which sequences, how many tokens each) against the
// policy in scheduler.h: a token budget per step, running sequences first in
// (priority, arrival) order, then waiting ones in that order, FCFS; the
// latest running sequence preempted when blocks run out, no admissions in
// that step; preempted sequences recomputed from their tokens.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <deque>
#include <numeric>
#include <utility>

namespace m2 {
namespace {

using Decisions = std::vector<std::pair<int64_t, int64_t>>;  // (sequence id, tokens) per chunk

class SchedulerTest : public ::testing::Test {
 protected:
  void configure(int64_t num_blocks, int block_size, bool prefix_cache, int64_t budget, int max_seqs = 8) {
    blocks_ = std::make_unique<BlockManager>(num_blocks, block_size, prefix_cache);
    scheduler_ = std::make_unique<Scheduler>(SchedulerConfig{max_seqs, budget}, *blocks_);
  }

  // A new request's sequence with prompt ids first, first + 1, ... (distinct
  // bases keep prompts from sharing cached blocks), queued in arrival order.
  Sequence& add(int64_t prompt_len, int32_t first, int priority = 0) {
    std::vector<int32_t> prompt(prompt_len);
    std::iota(prompt.begin(), prompt.end(), first);
    return add_tokens(std::move(prompt), priority);
  }
  Sequence& add_tokens(std::vector<int32_t> prompt, int priority = 0) {
    Sequence& s = seqs_.emplace_back();
    s.id = static_cast<int64_t>(seqs_.size()) - 1;
    s.arrival = s.id;
    s.priority = priority;
    s.tokens = std::move(prompt);
    s.num_prompt_tokens = s.num_tokens();
    scheduler_->add(&s);
    return s;
  }

  // Schedules a step and plays the engine's part after it.
  Decisions step(SchedulerOutput* out = nullptr) {
    SchedulerOutput so = scheduler_->schedule();
    Decisions d;
    int64_t total = 0;
    for (const ScheduledChunk& c : so.chunks) {
      d.emplace_back(c.seq->id, c.num_tokens);
      total += c.num_tokens;
      c.seq->num_computed += c.num_tokens;
      blocks_->commit_full_blocks(*c.seq);
      if (c.seq->num_computed == c.seq->num_tokens()) c.seq->tokens.push_back(1000 + c.seq->num_output());
    }
    EXPECT_EQ(so.num_tokens, total);
    if (out) *out = std::move(so);
    return d;
  }

  // The engine's removal of a finished sequence.
  void finish(Sequence& s) {
    s.state = SeqState::kFinished;
    scheduler_->remove(&s);
  }

  std::unique_ptr<BlockManager> blocks_;
  std::unique_ptr<Scheduler> scheduler_;
  std::deque<Sequence> seqs_;  // stable addresses
};

TEST_F(SchedulerTest, AdmitsUnderTheTokenBudgetAndChunksPrefills) {
  configure(64, 4, false, /*budget=*/8);
  Sequence& a = add(5, 0);
  Sequence& b = add(6, 100);
  Sequence& c = add(3, 200);
  // A's whole prompt (5), then the 3 tokens left of the budget go to B's
  // first chunk; C waits for budget.
  EXPECT_EQ(step(), (Decisions{{a.id, 5}, {b.id, 3}}));
  EXPECT_EQ(c.state, SeqState::kWaiting);
  EXPECT_EQ(scheduler_->num_running(), 2u);
  EXPECT_EQ(scheduler_->num_waiting(), 1u);
  // Running first: A's decode (1) and the rest of B's prompt (3); then C (3).
  EXPECT_EQ(step(), (Decisions{{a.id, 1}, {b.id, 3}, {c.id, 3}}));
  EXPECT_EQ(scheduler_->num_waiting(), 0u);
  // Three decodes in one batch.
  EXPECT_EQ(step(), (Decisions{{a.id, 1}, {b.id, 1}, {c.id, 1}}));
  EXPECT_EQ(a.num_output(), 3);
  EXPECT_EQ(b.num_output(), 2);
  EXPECT_EQ(c.num_output(), 2);
}

TEST_F(SchedulerTest, PromptLogprobChunksShareTheStepsLogitRows) {
  blocks_ = std::make_unique<BlockManager>(256, 4, false);
  SchedulerConfig config{8, /*budget=*/64};
  config.max_prompt_logprob_rows = 10;
  scheduler_ = std::make_unique<Scheduler>(config, *blocks_);
  EXPECT_EQ(config.max_logit_rows(), 8 + 10);
  Sequence& a = add(25, 0);
  a.params.prompt_logprobs = 0;  // every prompt row keeps its logits
  Sequence& b = add(12, 100);
  b.params.prompt_logprobs = 1;
  Sequence& c = add(30, 200);  // no prompt logprobs: one logit row whatever its chunk
  // A takes the 10 logit rows; B, next in line, waits for them (FCFS), so C
  // waits behind it although tokens are left.
  EXPECT_EQ(step(), (Decisions{{a.id, 10}}));
  EXPECT_EQ(step(), (Decisions{{a.id, 10}}));
  // A's last 5 prompt rows, then B's first 5 (the rows left), then C whole.
  EXPECT_EQ(step(), (Decisions{{a.id, 5}, {b.id, 5}, {c.id, 30}}));
  // A decodes (its prompt is done: one row), B its last 7 prompt rows.
  EXPECT_EQ(step(), (Decisions{{a.id, 1}, {b.id, 7}, {c.id, 1}}));
  EXPECT_EQ(step(), (Decisions{{a.id, 1}, {b.id, 1}, {c.id, 1}}));
}

TEST_F(SchedulerTest, WaitingSequencesGoInPriorityThenArrivalOrder) {
  configure(64, 4, false, /*budget=*/100);
  Sequence& a = add(4, 0, /*priority=*/1);
  Sequence& b = add(4, 100, /*priority=*/0);  // later, but of higher priority (lower value)
  Sequence& c = add(4, 200, /*priority=*/0);
  EXPECT_EQ(step(), (Decisions{{b.id, 4}, {c.id, 4}, {a.id, 4}}));
}

TEST_F(SchedulerTest, RunningSequencesTakeTheBudgetFirstInPriorityThenArrivalOrder) {
  configure(64, 4, false, /*budget=*/3);
  Sequence& p1 = add(2, 0, 1);
  Sequence& p0 = add(2, 100, 0);
  EXPECT_EQ(step(), (Decisions{{p0.id, 2}, {p1.id, 1}}));  // the budget cuts p1's prompt
  Sequence& q0 = add(4, 200, 0);  // arrives while both run
  // Running first, in (priority, arrival) order: p0's decode, the rest of
  // p1's prompt; the last token of the budget starts q0.
  EXPECT_EQ(step(), (Decisions{{p0.id, 1}, {p1.id, 1}, {q0.id, 1}}));
  // q0 now runs ahead of p1 (priority 0 before 1) and takes the budget p1
  // would have used: p1 waits a step without being preempted.
  EXPECT_EQ(step(), (Decisions{{p0.id, 1}, {q0.id, 2}}));
  EXPECT_EQ(p1.state, SeqState::kRunning);
  EXPECT_EQ(step(), (Decisions{{p0.id, 1}, {q0.id, 1}, {p1.id, 1}}));
}

TEST_F(SchedulerTest, MaxNumSeqsCapsTheRunningSet) {
  configure(64, 4, false, /*budget=*/100, /*max_seqs=*/2);
  Sequence& a = add(3, 0);
  Sequence& b = add(3, 100);
  Sequence& c = add(3, 200);
  EXPECT_EQ(step(), (Decisions{{a.id, 3}, {b.id, 3}}));
  EXPECT_EQ(step(), (Decisions{{a.id, 1}, {b.id, 1}}));
  EXPECT_EQ(c.state, SeqState::kWaiting);
  finish(a);
  EXPECT_EQ(step(), (Decisions{{b.id, 1}, {c.id, 3}}));
}

TEST_F(SchedulerTest, TheHeadOfTheQueueThatDoesNotFitBlocksTheRest) {
  configure(4, 4, false, /*budget=*/100);
  Sequence& a = add(9, 0);  // 3 of the 4 blocks
  EXPECT_EQ(step(), (Decisions{{a.id, 9}}));
  Sequence& b = add(8, 100);  // needs 2 blocks, 1 is free
  Sequence& c = add(2, 200);  // would fit, but arrived after B
  EXPECT_EQ(step(), (Decisions{{a.id, 1}}));
  EXPECT_EQ(blocks_->num_free_blocks(), 1);
  EXPECT_TRUE(b.block_table.empty());
  EXPECT_EQ(b.num_computed, 0);
  EXPECT_EQ(c.state, SeqState::kWaiting);
  Sequence& d = add(2, 300, /*priority=*/-1);  // ahead of B in the queue
  EXPECT_EQ(step(), (Decisions{{a.id, 1}, {d.id, 2}}));
  finish(a);
  finish(d);
  EXPECT_EQ(step(), (Decisions{{b.id, 8}, {c.id, 2}}));
}

TEST_F(SchedulerTest, PreemptsTheLatestArrivedAndResumesItFromItsCachedPrefix) {
  // 4 blocks of 4 tokens: two 7-token prompts hold 2 blocks each; once both
  // have two output tokens, A's next position (8) needs a third block.
  configure(4, 4, true, /*budget=*/100);
  Sequence& a = add(7, 0);
  Sequence& b = add(7, 100);
  EXPECT_EQ(step(), (Decisions{{a.id, 7}, {b.id, 7}}));
  EXPECT_EQ(step(), (Decisions{{a.id, 1}, {b.id, 1}}));  // positions 7: still 2 blocks each
  EXPECT_EQ(blocks_->num_free_blocks(), 0);
  ASSERT_EQ(b.num_tokens(), 9);

  SchedulerOutput so;
  EXPECT_EQ(step(&so), (Decisions{{a.id, 1}}));
  ASSERT_EQ(so.preempted.size(), 1u);
  EXPECT_EQ(so.preempted[0], &b);
  EXPECT_EQ(b.state, SeqState::kWaiting);
  EXPECT_EQ(b.num_computed, 0);
  EXPECT_EQ(b.num_preemptions, 1);
  EXPECT_TRUE(b.block_table.empty());
  // B's two full blocks went to the prefix cache; A's third block evicted
  // the least recently released, B's last (released in reverse order).
  EXPECT_EQ(blocks_->stats().evictions, 1);

  // B's surviving first block is attached, but the 5 tokens after it need
  // two more blocks and A holds the other three: B gives the block back and
  // keeps waiting.
  EXPECT_EQ(step(), (Decisions{{a.id, 1}}));
  EXPECT_EQ(b.num_computed, 0);
  EXPECT_TRUE(b.block_table.empty());

  finish(a);
  // Resumed: its first block from the cache, then its other 5 known tokens
  // (3 of the prompt, the 2 generated ones) recomputed in one chunk.
  EXPECT_EQ(step(), (Decisions{{b.id, 5}}));
  EXPECT_EQ(b.num_output(), 3);
  EXPECT_EQ(step(), (Decisions{{b.id, 1}}));
  // Only first admissions count as lookups: 7 + 7 prompt tokens, no hit.
  EXPECT_EQ(b.num_cached_prompt, 0);
  EXPECT_EQ(blocks_->stats().queried_tokens, 14);
  EXPECT_EQ(blocks_->stats().hit_tokens, 0);
}

TEST_F(SchedulerTest, NoAdmissionInAStepThatPreempted) {
  configure(4, 4, false, /*budget=*/100);
  Sequence& a = add(7, 0);
  Sequence& b = add(7, 100);
  step();
  step();
  Sequence& c = add(3, 200, /*priority=*/-1);  // fits the block B's preemption frees
  EXPECT_EQ(step(), (Decisions{{a.id, 1}}));
  EXPECT_EQ(b.num_preemptions, 1);
  EXPECT_EQ(blocks_->num_free_blocks(), 1);
  EXPECT_EQ(c.state, SeqState::kWaiting);
  // Next step C goes first among the waiting (priority -1); B still does not fit.
  EXPECT_EQ(step(), (Decisions{{a.id, 1}, {c.id, 3}}));
  EXPECT_EQ(b.state, SeqState::kWaiting);
}

TEST_F(SchedulerTest, ASequenceThatIsItselfTheLatestPreemptsItself) {
  configure(4, 4, false, /*budget=*/100);
  Sequence& a = add(7, 0);
  Sequence& b = add(8, 100);
  EXPECT_EQ(step(), (Decisions{{a.id, 7}, {b.id, 8}}));
  // A's token at position 7 fits its second block; B's at 8 needs a third,
  // and B is the latest running sequence: it is the one preempted.
  SchedulerOutput so;
  EXPECT_EQ(step(&so), (Decisions{{a.id, 1}}));
  ASSERT_EQ(so.preempted.size(), 1u);
  EXPECT_EQ(so.preempted[0], &b);
  EXPECT_EQ(a.num_preemptions, 0);
  EXPECT_EQ(blocks_->num_free_blocks(), 2);
}

TEST_F(SchedulerTest, PausedSequencesArePassedOverAndKeepTheirBlocks) {
  configure(16, 4, false, /*budget=*/100);
  Sequence& a = add(3, 0);
  Sequence& b = add(3, 100);
  EXPECT_EQ(step(), (Decisions{{a.id, 3}, {b.id, 3}}));
  a.paused = true;  // its client stopped reading
  EXPECT_EQ(step(), (Decisions{{b.id, 1}}));
  EXPECT_EQ(step(), (Decisions{{b.id, 1}}));
  EXPECT_EQ(a.num_computed, 3);
  EXPECT_FALSE(a.block_table.empty());
  EXPECT_EQ(scheduler_->num_paused(), 1u);
  EXPECT_TRUE(scheduler_->has_work());
  b.paused = true;
  EXPECT_FALSE(scheduler_->has_work());  // only paused sequences: nothing to step
  const int64_t free_before = blocks_->num_free_blocks();
  EXPECT_TRUE(step().empty());
  EXPECT_EQ(blocks_->num_free_blocks(), free_before);
  // A paused waiting sequence does not hold up the queue behind it.
  Sequence& c = add(3, 200);
  c.paused = true;
  Sequence& d = add(3, 300);
  EXPECT_EQ(step(), (Decisions{{d.id, 3}}));
  a.paused = b.paused = c.paused = false;  // resumed where they were
  EXPECT_EQ(step(), (Decisions{{a.id, 1}, {b.id, 1}, {d.id, 1}, {c.id, 3}}));
}

TEST_F(SchedulerTest, PausedSequencesArePreemptedFirst) {
  // 4 blocks of 4: A (paused, arrived first) and B hold two each.
  configure(4, 4, false, /*budget=*/100);
  Sequence& a = add(7, 0);
  Sequence& b = add(7, 100);
  step();
  step();
  a.paused = true;
  // B's position 8 needs a third block: the paused A gives its blocks, not B.
  SchedulerOutput so;
  EXPECT_EQ(step(&so), (Decisions{{b.id, 1}}));
  ASSERT_EQ(so.preempted.size(), 1u);
  EXPECT_EQ(so.preempted[0], &a);
  EXPECT_EQ(a.state, SeqState::kWaiting);
  EXPECT_EQ(b.num_preemptions, 0);
  // A waiting sequence that does not fit takes the blocks of a paused running one.
  configure(4, 4, false, /*budget=*/100);
  Sequence& p = add(12, 0);
  EXPECT_EQ(step(), (Decisions{{p.id, 12}}));
  p.paused = true;
  Sequence& q = add(8, 100);
  EXPECT_EQ(step(&so), (Decisions{{q.id, 8}}));
  ASSERT_EQ(so.preempted.size(), 1u);
  EXPECT_EQ(so.preempted[0], &p);
}

TEST_F(SchedulerTest, ReusesCachedPrefixBlocksAndAlwaysComputesTheLastToken) {
  configure(16, 4, true, /*budget=*/100);
  std::vector<int32_t> ten(10);
  std::iota(ten.begin(), ten.end(), 0);
  Sequence& a = add_tokens(ten);
  EXPECT_EQ(step(), (Decisions{{a.id, 10}}));  // its blocks [0, 4) and [4, 8) are now cached
  const std::vector<int32_t> a_blocks = a.block_table;
  finish(a);

  // The same 10 tokens and 3 more: the two full blocks are reused (the third
  // was never full), the 5 tokens after them computed.
  std::vector<int32_t> thirteen = ten;
  thirteen.insert(thirteen.end(), {50, 51, 52});
  Sequence& b = add_tokens(thirteen);
  EXPECT_EQ(step(), (Decisions{{b.id, 5}}));
  EXPECT_EQ(b.num_cached_prompt, 8);
  ASSERT_EQ(b.block_table.size(), 4u);
  EXPECT_EQ(b.block_table[0], a_blocks[0]);
  EXPECT_EQ(b.block_table[1], a_blocks[1]);

  // Exactly the two cached blocks: the last token must be computed for its
  // logits, and only whole blocks are reused, so the second block is
  // computed again.
  Sequence& c = add_tokens(std::vector<int32_t>(ten.begin(), ten.begin() + 8));
  EXPECT_EQ(step(), (Decisions{{b.id, 1}, {c.id, 4}}));
  EXPECT_EQ(c.num_cached_prompt, 4);

  // Prompt logprobs need every prompt position's logits: no reuse.
  Sequence& d = add_tokens(thirteen);
  d.params.prompt_logprobs = 0;
  EXPECT_EQ(step(), (Decisions{{b.id, 1}, {c.id, 1}, {d.id, 13}}));
  EXPECT_EQ(d.num_cached_prompt, 0);

  EXPECT_EQ(blocks_->stats().queried_tokens, 10 + 13 + 8 + 13);
  EXPECT_EQ(blocks_->stats().hit_tokens, 8 + 4);
}

}  // namespace
}  // namespace m2
