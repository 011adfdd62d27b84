#include "loadgen/level_summary.h"

#include <map>

#include "loadgen/distribution.h"

namespace m2::loadgen {
namespace {

double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

Json cache_json(const LevelRun& run, const std::vector<const RequestSample*>& ok) {
  Json j = Json::object();
  if (run.cache_before && run.cache_after) {
    const double hits = run.cache_after->hits - run.cache_before->hits;
    const double queries = run.cache_after->queries - run.cache_before->queries;
    j["server_hit_tokens"] = hits;
    j["server_query_tokens"] = queries;
    j["server_hit_rate"] = queries > 0 ? Json(hits / queries) : Json(nullptr);
  } else {
    j["server_hit_rate"] = nullptr;
  }
  int64_t cached = 0, prompt = 0;
  bool reported = false;
  for (const RequestSample* s : ok) {
    if (s->cached_tokens < 0) continue;
    reported = true;
    cached += s->cached_tokens;
    prompt += s->input_tokens();
  }
  j["cached_tokens"] = cached;
  j["cached_rate"] = reported && prompt > 0 ? Json(ratio(double(cached), double(prompt))) : Json(nullptr);
  return j;
}

Json per_turn_json(const std::vector<const RequestSample*>& ok) {
  std::map<int, std::vector<const RequestSample*>> by_turn;
  for (const RequestSample* s : ok)
    if (s->session >= 0) by_turn[s->turn].push_back(s);
  Json turns = Json::array();
  for (const auto& [turn, list] : by_turn) {
    std::vector<double> ttft;
    int64_t cached = 0, prompt = 0;
    bool reported = false;
    for (const RequestSample* s : list) {
      ttft.push_back(s->ttft_s);
      prompt += s->input_tokens();
      if (s->cached_tokens >= 0) {
        reported = true;
        cached += s->cached_tokens;
      }
    }
    turns.push_back({{"turn", turn},
                     {"count", list.size()},
                     {"mean_prompt_tokens", ratio(double(prompt), double(list.size()))},
                     {"ttft_ms", distribution_json(describe(ttft), 1e3)},
                     {"cached_rate", reported && prompt > 0 ? Json(ratio(double(cached), double(prompt)))
                                                            : Json(nullptr)}});
  }
  return turns;
}

}  // namespace

Json summarize_level(const LevelRun& run, int gpus) {
  std::vector<const RequestSample*> ok;
  std::map<std::string, int64_t> errors;
  for (const RequestSample& s : run.samples) {
    if (s.success) ok.push_back(&s);
    else ++errors[s.error.substr(0, 200)];
  }
  int64_t in_tokens = 0, out_tokens = 0, mismatches = 0, no_usage = 0;
  std::vector<double> ttft, tpot, itl, e2e, user_rate;
  for (const RequestSample* s : ok) {
    in_tokens += s->input_tokens();
    out_tokens += s->output_tokens;
    if (!s->usage_reported) ++no_usage;
    else if (s->output_tokens != s->expected_output_len) ++mismatches;
    ttft.push_back(s->ttft_s);
    e2e.push_back(s->e2e_s);
    itl.insert(itl.end(), s->itl_s.begin(), s->itl_s.end());
    if (const double t = s->tpot_s(); t > 0) {
      tpot.push_back(t);
      user_rate.push_back(1.0 / t);
    }
  }
  const double dur = run.duration_s;
  const double g = gpus > 0 ? gpus : 1;
  const Distribution tpot_d = describe(tpot), rate_d = describe(user_rate);
  Json error_list = Json::array();
  for (const auto& [message, n] : errors) error_list.push_back({{"message", message}, {"count", n}});
  Json j = {{"completed", ok.size()},
            {"failed", run.samples.size() - ok.size()},
            {"duration_s", dur},
            {"total_input_tokens", in_tokens},
            {"total_output_tokens", out_tokens},
            {"request_throughput", ratio(double(ok.size()), dur)},
            {"output_throughput", ratio(double(out_tokens), dur)},
            {"total_token_throughput", ratio(double(in_tokens + out_tokens), dur)},
            {"gpus", g},
            {"output_throughput_per_gpu", ratio(double(out_tokens), dur) / g},
            {"total_token_throughput_per_gpu", ratio(double(in_tokens + out_tokens), dur) / g},
            {"tokens_per_s_per_user", tpot_d.p50 > 0 ? 1.0 / tpot_d.p50 : 0.0},
            {"tokens_per_s_per_user_mean", rate_d.mean},
            {"ttft_ms", distribution_json(describe(ttft), 1e3)},
            {"tpot_ms", distribution_json(tpot_d, 1e3)},
            {"itl_ms", distribution_json(describe(itl), 1e3)},
            {"e2el_ms", distribution_json(describe(e2e), 1e3)},
            {"output_len_mismatches", mismatches},
            {"usage_missing", no_usage},
            {"errors", std::move(error_list)},
            {"prefix_cache", cache_json(run, ok)}};
  Json turns = per_turn_json(ok);
  if (!turns.empty()) j["per_turn"] = std::move(turns);
  return j;
}

Json level_json(const LevelRun& run, int gpus) {
  Json samples = Json::array();
  for (const RequestSample& s : run.samples) samples.push_back(sample_json(s));
  return {{"label", run.spec.label},
          {"concurrency", run.spec.concurrency > 0 ? Json(run.spec.concurrency) : Json(nullptr)},
          {"request_rate", run.spec.request_rate > 0 ? Json(run.spec.request_rate) : Json(nullptr)},
          {"interrupted", run.interrupted},
          {"summary", summarize_level(run, gpus)},
          {"samples", std::move(samples)}};
}

}  // namespace m2::loadgen
