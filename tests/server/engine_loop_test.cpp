// The engine additions the server needs, on the tiny chat fixture model:
// forced tokens (replay from the first token; insertion after a trigger
// token, as tool_choice required/named does after `</think>`), and the
// EngineLoop (requests from other threads, sinks, abort, queue limit,
// cancellation).
#include "engine/engine_loop.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <atomic>
#include <future>
#include <map>
#include <memory>
#include <optional>

namespace m2 {
namespace {

std::string data(const std::string& rel) { return std::string(M2CPP_SOURCE_DIR) + "/tests/data/" + rel; }

class EngineAdditionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto w = load_model(data("m2-tiny-chat"), LoadOptions{});
    ASSERT_TRUE(w.ok()) << w.status().message();
    weights_ = std::move(w.value());
    backend_ = make_cpu_backend();
    model_ = std::make_unique<MiniMaxM2>(*weights_, *backend_);
    auto tok = text::Tokenizer::load_from_dir(data("m2-tiny-chat"));
    ASSERT_TRUE(tok.ok()) << tok.status().message();
    tokenizer_ = std::move(tok.value());
  }

  std::unique_ptr<Engine> engine(int max_seqs = 64) {
    EngineConfig c;
    c.num_blocks = 512;
    c.kv_dtype = DType::kF32;
    c.scheduler.max_num_seqs = max_seqs;
    auto e = Engine::create(*model_, tokenizer_.get(), c);
    EXPECT_TRUE(e.ok()) << e.status().message();
    return std::move(e.value());
  }

  std::vector<int32_t> encode(const std::string& s) {
    auto ids = tokenizer_->encode(s, false);
    EXPECT_TRUE(ids.ok());
    return *ids;
  }

  struct Run {
    std::vector<int32_t> ids;
    std::string text;
    FinishReason finish = FinishReason::kNone;
    std::vector<SampledToken> logprobs;
  };
  static Run run(Engine& e, const std::string& id) {
    Run r;
    while (e.has_unfinished()) {
      auto step = e.step();
      EXPECT_TRUE(step.ok()) << step.status().message();
      for (const auto& o : *step) {
        if (o.request_id != id) continue;
        r.ids.insert(r.ids.end(), o.new_token_ids.begin(), o.new_token_ids.end());
        r.text += o.new_text;
        r.logprobs.insert(r.logprobs.end(), o.new_logprobs.begin(), o.new_logprobs.end());
        if (o.finished) r.finish = o.finish_reason;
      }
    }
    return r;
  }

  std::unique_ptr<ModelWeights> weights_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<MiniMaxM2> model_;
  std::unique_ptr<text::Tokenizer> tokenizer_;
};

TEST_F(EngineAdditionsTest, ForcedTokensReplayThenStopAtEos) {
  auto e = engine();
  SamplingParams p;
  p.max_tokens = 100;
  p.logprobs = 2;
  p.forced_tokens = encode("Hi</think>\n\nDone.[e~[");
  ASSERT_TRUE(e->add_request("r", encode("hello"), p).ok());
  Run r = run(*e, "r");
  EXPECT_EQ(r.ids, p.forced_tokens);
  EXPECT_EQ(r.text, "Hi</think>\n\nDone.");  // EOS ends it and is not text
  EXPECT_EQ(r.finish, FinishReason::kStop);
  ASSERT_EQ(r.logprobs.size(), r.ids.size());
  for (size_t i = 0; i < r.ids.size(); ++i) {
    EXPECT_EQ(r.logprobs[i].id, r.ids[i]);
    EXPECT_LE(r.logprobs[i].logprob, 0.0f);
    EXPECT_EQ(r.logprobs[i].top.size(), 2u);
  }
}

TEST_F(EngineAdditionsTest, SamplingResumesAfterForcedTokensAndMaxTokensCuts) {
  auto e = engine();
  SamplingParams p;
  p.temperature = 0;
  p.ignore_eos = true;
  p.max_tokens = 6;
  p.forced_tokens = encode("one two");
  const size_t n_forced = p.forced_tokens.size();
  ASSERT_LT(n_forced, 6u);
  ASSERT_TRUE(e->add_request("r", encode("hello"), p).ok());
  Run r = run(*e, "r");
  ASSERT_EQ(r.ids.size(), 6u);
  EXPECT_EQ(std::vector<int32_t>(r.ids.begin(), r.ids.begin() + n_forced), p.forced_tokens);
  EXPECT_EQ(r.finish, FinishReason::kLength);
}

TEST_F(EngineAdditionsTest, ForcedAfterTriggerIsInsertedOnce) {
  const int32_t close = *tokenizer_->token_to_id("</think>");
  const std::vector<int32_t> opening = encode("\n\n<minimax:tool_call>\n<invoke name=\"f\">");
  auto e = engine();
  SamplingParams p;
  p.max_tokens = 200;
  p.forced_after_token = close;
  p.forced_after = opening;
  // The "model" (replay) closes its reasoning, then writes a parameter; a
  // second </think> later must not insert the opening again.
  p.forced_tokens = encode("Plan.</think>\n<parameter name=\"a\">1</parameter>\n</invoke>\n</minimax:tool_call></think>[e~[");
  ASSERT_TRUE(e->add_request("r", encode("hello"), p).ok());
  Run r = run(*e, "r");
  EXPECT_EQ(r.text,
            "Plan.</think>\n\n<minimax:tool_call>\n<invoke name=\"f\">\n<parameter name=\"a\">1</parameter>\n"
            "</invoke>\n</minimax:tool_call></think>");
}

TEST_F(EngineAdditionsTest, ForcedAfterTriggerWithSampling) {
  // A sampled run never writes </think> by chance in 8 tokens here; force it
  // through forced_tokens and check that sampling continues after the opening.
  const int32_t close = *tokenizer_->token_to_id("</think>");
  auto e = engine();
  SamplingParams p;
  p.temperature = 0;
  p.ignore_eos = true;
  p.max_tokens = 12;
  p.forced_tokens = {close};
  p.forced_after_token = close;
  p.forced_after = encode("\n\n<minimax:tool_call>\n");
  ASSERT_TRUE(e->add_request("r", encode("hello"), p).ok());
  Run r = run(*e, "r");
  ASSERT_EQ(r.ids.size(), 12u);
  EXPECT_EQ(r.ids[0], close);
  EXPECT_EQ(std::vector<int32_t>(r.ids.begin() + 1, r.ids.begin() + 1 + p.forced_after.size()), p.forced_after);
}

TEST_F(EngineAdditionsTest, ForcedTokensOutsideVocabularyAreRefused) {
  auto e = engine();
  SamplingParams p;
  p.forced_tokens = {999999};
  EXPECT_FALSE(e->add_request("r", encode("hello"), p).ok());
  p.forced_tokens.clear();
  p.forced_after = {-3};
  p.forced_after_token = 5;
  EXPECT_FALSE(e->add_request("r", encode("hello"), p).ok());
}

// ---- EngineLoop --------------------------------------------------------------------------------------------

struct Collected {
  std::mutex mu;
  std::map<std::string, std::vector<int32_t>> ids;
  std::map<std::string, Status> errors;
  std::map<std::string, int> finished;
  std::atomic<int> done{0};
};

OutputSink sink_into(Collected& c, const std::string& id, int n = 1) {
  return [&c, id, n](const Status& error, std::vector<RequestOutput>&& outs) {
    std::lock_guard<std::mutex> lock(c.mu);
    if (!error.ok()) {
      c.errors[id] = error;
      ++c.done;
      return;
    }
    for (const auto& o : outs) {
      auto& v = c.ids[id];
      v.insert(v.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      if (o.finished && ++c.finished[id] == n) ++c.done;
    }
  };
}

TEST_F(EngineAdditionsTest, LoopRunsRequestsFromManyThreads) {
  auto e = engine();
  EngineLoop loop(*e, 0);
  loop.start();
  Collected c;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) {
        LoopRequest r;
        r.id = "t" + std::to_string(t) + "-" + std::to_string(i);
        r.prompt = {1, 2, 3, static_cast<int32_t>(t * 10 + i)};
        r.params.max_tokens = 5;
        r.params.ignore_eos = true;
        r.params.n = 2;
        r.sink = sink_into(c, r.id, 2);
        EXPECT_EQ(loop.submit(std::move(r)), Admission::kAccepted);
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(loop.wait_idle(std::chrono::seconds(60)));
  EXPECT_EQ(c.done.load(), 20);
  for (const auto& [id, ids] : c.ids) EXPECT_EQ(ids.size(), 10u) << id;
  const EngineLoopStats st = loop.stats();
  EXPECT_EQ(st.unfinished, 0u);
  EXPECT_EQ(st.engine.kv_blocks_used, 0);
  loop.stop(errorf("done"));
}

TEST_F(EngineAdditionsTest, LoopAbortFreesBlocksAndDropsTheSink) {
  auto e = engine();
  EngineLoop loop(*e, 0, std::chrono::milliseconds(2));
  loop.start();
  Collected c;
  LoopRequest r;
  r.id = "long";
  r.prompt = {1, 2, 3};
  r.params.max_tokens = 1000;
  r.params.ignore_eos = true;
  r.sink = sink_into(c, "long");
  ASSERT_EQ(loop.submit(std::move(r)), Admission::kAccepted);
  for (int i = 0; i < 2000 && loop.stats().engine.kv_blocks_used == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  loop.abort("long");
  ASSERT_TRUE(loop.wait_idle(std::chrono::seconds(30)));
  EXPECT_EQ(loop.stats().engine.kv_blocks_used, 0);
  EXPECT_EQ(c.done.load(), 0);  // neither finished nor failed: dropped
  loop.stop(errorf("done"));
}

// The CPU time (user + system, ms) this whole process uses while the calling
// thread sleeps for `d`: what the loop's other threads burn meanwhile.
double cpu_ms_while_sleeping(std::chrono::milliseconds d) {
  auto cpu_ms = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1000.0 + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1000.0;
  };
  const double before = cpu_ms();
  std::this_thread::sleep_for(d);
  return cpu_ms() - before;
}

TEST_F(EngineAdditionsTest, LoopPausesARequestWithoutSpinningAndResumesIt) {
  auto e = engine();
  EngineLoop loop(*e, 0);  // no step delay: a loop that spun over a paused request would burn a core
  loop.start();
  Collected c;
  LoopRequest r;
  r.id = "slow-reader";
  r.prompt = {1, 2, 3};
  r.params.max_tokens = 2000;
  r.params.ignore_eos = true;
  r.sink = sink_into(c, "slow-reader");
  ASSERT_EQ(loop.submit(std::move(r)), Admission::kAccepted);
  auto generated = [&] {
    std::lock_guard<std::mutex> lock(c.mu);
    return c.ids["slow-reader"].size();
  };
  for (int i = 0; i < 5000 && generated() < 5; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  loop.set_paused("slow-reader", true);
  for (int i = 0; i < 2000 && loop.stats().engine.paused == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(loop.stats().engine.paused, 1u);
  const size_t at_pause = generated();
  const double cpu_ms = cpu_ms_while_sleeping(std::chrono::milliseconds(300));
  EXPECT_EQ(generated(), at_pause);  // no step ran for it
  EXPECT_GT(loop.stats().engine.kv_blocks_used, 0);  // it keeps its KV blocks
  EXPECT_LT(cpu_ms, 100.0);  // the loop sleeps: no spinning over a paused request
  loop.set_paused("slow-reader", false);
  ASSERT_TRUE(loop.wait_idle(std::chrono::seconds(60)));
  EXPECT_EQ(generated(), 2000u);
  EXPECT_EQ(c.finished["slow-reader"], 1);
  EXPECT_EQ(loop.stats().engine.kv_blocks_used, 0);
  loop.stop(errorf("done"));
}

TEST_F(EngineAdditionsTest, LoopRefusesWhenTheWaitingQueueIsFull) {
  auto e = engine(/*max_seqs=*/1);
  EngineLoop loop(*e, 1, std::chrono::milliseconds(2));
  loop.start();
  Collected c;
  auto request = [&](const std::string& id) {
    LoopRequest r;
    r.id = id;
    r.prompt = {1, 2, 3};
    r.params.max_tokens = 1000;
    r.params.ignore_eos = true;
    r.sink = sink_into(c, id);
    return r;
  };
  ASSERT_EQ(loop.submit(request("a")), Admission::kAccepted);
  for (int i = 0; i < 5000 && loop.stats().engine.running == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(loop.submit(request("b")), Admission::kAccepted);  // "a" runs; "b" waits
  for (int i = 0; i < 5000 && loop.stats().engine.waiting == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(loop.submit(request("c")), Admission::kQueueFull);
  loop.cancel_all(errorf("shutting down"));
  ASSERT_TRUE(loop.wait_idle(std::chrono::seconds(30)));
  EXPECT_EQ(c.errors.size(), 2u);
  EXPECT_EQ(c.errors["a"].message(), "shutting down");
  EXPECT_EQ(loop.stats().engine.kv_blocks_used, 0);
  loop.stop(errorf("done"));
  EXPECT_EQ(loop.submit(request("d")), Admission::kStopped);
}

TEST_F(EngineAdditionsTest, LoopReportsEngineRefusals) {
  auto e = engine();
  EngineLoop loop(*e, 0);
  loop.start();
  Collected c;
  LoopRequest r;
  r.id = "bad";
  r.prompt = {};  // empty prompt: the engine refuses it
  r.sink = sink_into(c, "bad");
  ASSERT_EQ(loop.submit(std::move(r)), Admission::kAccepted);
  ASSERT_TRUE(loop.wait_idle(std::chrono::seconds(30)));
  ASSERT_EQ(c.errors.count("bad"), 1u);
  EXPECT_NE(c.errors["bad"].message().find("empty"), std::string::npos);
  loop.stop(errorf("done"));
}

// ---- Rollout control: pause modes, resume, tasks on the engine thread (docs/rollout.md) ------------------

// Asks `loop` to pause in `mode` and waits up to `timeout` for its answer:
// the number of requests in flight when it paused, or nullopt when no answer
// came in time. The promise is shared with the callback, so an answer that
// comes after the timeout has somewhere to go.
std::optional<size_t> pause_and_wait(EngineLoop& loop, PauseMode mode, std::chrono::seconds timeout) {
  auto done = std::make_shared<std::promise<size_t>>();
  std::future<size_t> answer = done->get_future();
  loop.pause(mode, [done](size_t n) { done->set_value(n); });
  if (answer.wait_for(timeout) != std::future_status::ready) return std::nullopt;
  return answer.get();
}

LoopRequest long_request(Collected& c, const std::string& id, int max_tokens) {
  LoopRequest r;
  r.id = id;
  r.prompt = {1, 2, 3};
  r.params.max_tokens = max_tokens;
  r.params.ignore_eos = true;
  r.params.temperature = 0;
  r.sink = sink_into(c, id);
  return r;
}

size_t generated(Collected& c, const std::string& id) {
  std::lock_guard<std::mutex> lock(c.mu);
  return c.ids[id].size();
}

// Waits (up to 5 s, polling each millisecond) until request `id` has
// generated `n` tokens on the loop's thread; the caller checks the count.
void wait_for_tokens(Collected& c, const std::string& id, size_t n) {
  for (int i = 0; i < 5000 && generated(c, id) < n; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

TEST_F(EngineAdditionsTest, LoopPauseInPlaceHoldsNewRequestsAndResumes) {
  auto e = engine();
  EngineLoop loop(*e, 0);  // no step delay: a paused loop that spun would burn a core
  loop.start();
  Collected c;
  ASSERT_EQ(loop.submit(long_request(c, "a", 400)), Admission::kAccepted);
  wait_for_tokens(c, "a", 3);
  const std::optional<size_t> in_flight = pause_and_wait(loop, PauseMode::kInPlace, std::chrono::seconds(10));
  ASSERT_TRUE(in_flight.has_value());
  EXPECT_EQ(*in_flight, 1u);
  EXPECT_TRUE(loop.paused());
  ASSERT_EQ(loop.submit(long_request(c, "b", 5)), Admission::kAccepted);
  const size_t at_pause = generated(c, "a");
  const double cpu_ms = cpu_ms_while_sleeping(std::chrono::milliseconds(300));
  EXPECT_EQ(generated(c, "a"), at_pause);
  EXPECT_EQ(generated(c, "b"), 0u);
  EXPECT_GT(loop.stats().engine.kv_blocks_used, 0);  // "a" keeps its KV
  EXPECT_LT(cpu_ms, 100.0);
  // Tasks still run while paused.
  std::promise<int64_t> flushed;
  loop.post([&](Engine& engine) { flushed.set_value(engine.flush_prefix_cache()); });
  EXPECT_EQ(flushed.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_TRUE(loop.resume());
  EXPECT_FALSE(loop.resume());
  ASSERT_TRUE(loop.wait_idle(std::chrono::seconds(60)));
  EXPECT_EQ(generated(c, "a"), 400u);
  EXPECT_EQ(generated(c, "b"), 5u);
  EXPECT_EQ(loop.stats().engine.kv_blocks_used, 0);
  loop.stop(errorf("done"));
}

TEST_F(EngineAdditionsTest, LoopPauseAbortEndsRequestsAsAborted) {
  auto e = engine();
  EngineLoop loop(*e, 0, std::chrono::milliseconds(2));
  loop.start();
  std::mutex mu;
  std::vector<RequestOutput> last;
  LoopRequest r;
  r.id = "a";
  r.prompt = {1, 2, 3};
  r.params.max_tokens = 1000;
  r.params.ignore_eos = true;
  r.params.n = 2;
  std::atomic<int> tokens{0};
  r.sink = [&](const Status& error, std::vector<RequestOutput>&& outs) {
    EXPECT_TRUE(error.ok()) << error.message();
    std::lock_guard<std::mutex> lock(mu);
    for (auto& o : outs) {
      tokens += static_cast<int>(o.new_token_ids.size());
      if (o.finished) last.push_back(o);
    }
  };
  ASSERT_EQ(loop.submit(std::move(r)), Admission::kAccepted);
  for (int i = 0; i < 5000 && tokens < 4; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const std::optional<size_t> in_flight = pause_and_wait(loop, PauseMode::kAbort, std::chrono::seconds(10));
  ASSERT_TRUE(in_flight.has_value());
  EXPECT_EQ(*in_flight, 1u);
  ASSERT_TRUE(loop.wait_idle(std::chrono::seconds(10)));
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_EQ(last.size(), 2u);  // both completions end, once each
    for (const RequestOutput& o : last) {
      EXPECT_EQ(o.finish_reason, FinishReason::kAbort);
      EXPECT_GT(o.num_output_tokens, 0);
    }
  }
  EXPECT_EQ(loop.stats().engine.kv_blocks_used, 0);
  loop.resume();
  loop.stop(errorf("done"));
}

TEST_F(EngineAdditionsTest, LoopPauseRetractFreesKvAndRecomputesTheSameTokens) {
  auto e = engine();
  Collected plain;
  {
    EngineLoop loop(*e, 0);
    loop.start();
    ASSERT_EQ(loop.submit(long_request(plain, "a", 60)), Admission::kAccepted);
    ASSERT_TRUE(loop.wait_idle(std::chrono::seconds(60)));
    loop.stop(errorf("done"));
  }
  auto e2 = engine();
  EngineLoop loop(*e2, 0, std::chrono::milliseconds(2));
  loop.start();
  Collected c;
  ASSERT_EQ(loop.submit(long_request(c, "a", 60)), Admission::kAccepted);
  wait_for_tokens(c, "a", 10);
  ASSERT_TRUE(pause_and_wait(loop, PauseMode::kRetract, std::chrono::seconds(10)).has_value());
  EXPECT_EQ(loop.stats().engine.kv_blocks_used, 0);  // preempted: its blocks are free
  loop.resume();
  ASSERT_TRUE(loop.wait_idle(std::chrono::seconds(60)));
  EXPECT_EQ(c.ids["a"], plain.ids["a"]);
  loop.stop(errorf("done"));
}

TEST_F(EngineAdditionsTest, LoopPauseWaitAnswersWhenInFlightRequestsFinish) {
  auto e = engine();
  EngineLoop loop(*e, 0, std::chrono::milliseconds(2));
  loop.start();
  Collected c;
  ASSERT_EQ(loop.submit(long_request(c, "a", 30)), Admission::kAccepted);
  wait_for_tokens(c, "a", 2);
  const std::optional<size_t> in_flight = pause_and_wait(loop, PauseMode::kWait, std::chrono::seconds(30));
  ASSERT_TRUE(in_flight.has_value());
  EXPECT_EQ(*in_flight, 1u);
  EXPECT_EQ(generated(c, "a"), 30u);  // it ran to its end
  EXPECT_EQ(c.finished["a"], 1);
  ASSERT_EQ(loop.submit(long_request(c, "b", 3)), Admission::kAccepted);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(generated(c, "b"), 0u);  // held
  loop.resume();
  ASSERT_TRUE(loop.wait_idle(std::chrono::seconds(30)));
  EXPECT_EQ(generated(c, "b"), 3u);
  loop.stop(errorf("done"));
}

}  // namespace
}  // namespace m2
