#include "loadgen/request_sample.h"

#include <cmath>

namespace m2::loadgen {

double RequestSample::tpot_s() const {
  if (!success || output_tokens < 2 || ttft_s < 0) return -1;
  return (e2e_s - ttft_s) / static_cast<double>(output_tokens - 1);
}

// Times in whole microseconds: exact enough, and a 1K-token request's gaps
// stay a few kilobytes of JSON.
Json sample_json(const RequestSample& s) {
  auto us = [](double seconds) { return static_cast<int64_t>(std::llround(seconds * 1e6)); };
  std::vector<int64_t> itl;
  itl.reserve(s.itl_s.size());
  for (double g : s.itl_s) itl.push_back(us(g));
  Json j = {{"id", s.id},
            {"success", s.success},
            {"start_us", us(s.start_s)},
            {"ttft_us", s.ttft_s >= 0 ? Json(us(s.ttft_s)) : Json(nullptr)},
            {"tpot_us", s.tpot_s() >= 0 ? Json(us(s.tpot_s())) : Json(nullptr)},
            {"e2e_us", us(s.e2e_s)},
            {"itl_us", std::move(itl)},
            {"prompt_len", s.prompt_len},
            {"expected_output_len", s.expected_output_len},
            {"prompt_tokens", s.prompt_tokens >= 0 ? Json(s.prompt_tokens) : Json(nullptr)},
            {"output_tokens", s.output_tokens},
            {"cached_tokens", s.cached_tokens >= 0 ? Json(s.cached_tokens) : Json(nullptr)},
            {"chunks", s.chunks},
            {"usage_reported", s.usage_reported}};
  if (s.session >= 0) {
    j["session"] = s.session;
    j["turn"] = s.turn;
  }
  if (!s.error.empty()) j["error"] = s.error;
  return j;
}

}  // namespace m2::loadgen
