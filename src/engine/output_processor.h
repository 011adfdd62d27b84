// Output processing (vLLM v1's OutputProcessor beside its EngineCore): what
// the engine does with a step once the model has run and sampled. It
// assembles prompt logprobs from the step's host logits, appends each
// sampled token to its sequence (forced tokens, output counts, logprobs),
// detokenizes incrementally, checks stop token ids, EOS, stop strings, the
// request's text stop, max_tokens and the context limit, applies reasoning
// budgets, and writes the RequestOutputs. It owns
// each sequence's text state (detokenizer, stop-string matcher); the
// sequences, their KV blocks and the scheduler stay the engine's, which frees
// the sequences this marks finished.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/sequence.h"
#include "engine/step_batch.h"
#include "engine/stop_strings.h"
#include "model/sampling.h"
#include "text/tokenizer/incremental_detokenizer.h"
#include "text/tokenizer/tokenizer.h"

namespace m2 {

struct RequestOutput {
  std::string request_id;
  int index = 0;                          // which of the request's n completions
  std::vector<int32_t> new_token_ids;
  std::string new_text;                   // empty without a tokenizer
  std::vector<SampledToken> new_logprobs; // when params.logprobs >= 0
  std::vector<std::vector<TokenLogprob>> prompt_logprobs;  // once, with the first output
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  std::string stop_string;                // the stop string that ended it (excluded from the text)
  int32_t stop_token_id = -1;             // the stop_token_ids entry that ended it
  int64_t num_prompt_tokens = 0;
  int64_t num_cached_tokens = 0;
  int64_t num_output_tokens = 0;
  // params.return_routed_experts, with the final output only: the expert ids
  // of every position the model ran, [num_prompt + num_output - 1, layers,
  // top_k] (the last token never enters the model).
  std::vector<int32_t> routed_experts;
};

const char* finish_reason_name(FinishReason r);

class OutputProcessor {
 public:
  // `eos_ids`: ids that end a sequence (unless it ignores EOS), joined by the
  // tokenizer's EOS id; `max_model_len`: tokens a sequence may reach.
  OutputProcessor(const text::Tokenizer* tokenizer, std::vector<int32_t> eos_ids, int64_t max_model_len);

  // Ascending, distinct.
  std::span<const int32_t> eos_ids() const { return eos_ids_; }

  // Starts a sequence's text state (nothing without a tokenizer).
  void add(const Sequence& seq);
  // Drops it (the sequence finished or was aborted).
  void remove(int64_t seq_id);

  // The outputs of a step that ran: prompt logprobs for every chunk that
  // wanted them, then one output per sample row, in sample order. A sequence
  // that stops is marked kFinished; the caller removes it.
  std::vector<RequestOutput> process(const StepBatch& batch, const StepResult& result);

 private:
  struct SeqText {
    std::unique_ptr<text::IncrementalDetokenizer> detok;
    std::unique_ptr<StopStringMatcher> stops;
    std::unique_ptr<TextStop> text_stop;  // params.text_stop's, when set
  };

  void add_prompt_logprobs(const StepChunk& chunk, const StepResult& result);
  void append_token(Sequence& seq, const SampledToken& tok, RequestOutput& out);
  // The reasoning budget: the end token is forced once the budget is spent.
  static void apply_reasoning_budget(Sequence& seq, int32_t token);
  // A stop string cut the text before it: the detokenizer's held bytes are
  // dropped rather than flushed.
  void finish(Sequence& seq, FinishReason reason, RequestOutput& out, std::string stop_string = {},
              int32_t stop_token_id = -1);

  const text::Tokenizer* tokenizer_;
  std::vector<int32_t> eos_ids_;
  int64_t max_model_len_;
  std::map<int64_t, SeqText> texts_;  // sequence id -> its text state
};

}  // namespace m2
