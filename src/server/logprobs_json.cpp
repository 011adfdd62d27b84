#include "server/logprobs_json.h"

#include <cmath>

namespace m2::server {

std::string TokenFormatter::text(int32_t id) const {
  if (as_ids_) return "token_id:" + std::to_string(id);
  const int32_t one[1] = {id};
  auto s = tokenizer_.decode(one, false);
  return s.ok() ? *s : std::string();
}

std::vector<int> TokenFormatter::bytes(int32_t id) const {
  std::string raw;
  auto token = tokenizer_.id_to_token(id);
  if (token && tokenizer_.decodes_byte_level()) {
    text::Tokenizer::byte_level_bytes(*token, raw);
  } else {
    const int32_t one[1] = {id};
    auto s = tokenizer_.decode(one, false);
    if (s.ok()) raw = *s;
  }
  return std::vector<int>(raw.begin(), raw.end());
}

double finite_logprob(float lp) { return std::isfinite(lp) ? lp : -9999.0; }

OrderedJson chat_logprob(const TokenFormatter& f, const SampledToken& t) {
  auto entry = [&](int32_t id, float lp) {
    OrderedJson e = OrderedJson::object();
    e["token"] = f.text(id);
    e["logprob"] = finite_logprob(lp);
    OrderedJson b = OrderedJson::array();
    for (int c : f.bytes(id)) b.push_back(static_cast<unsigned char>(c));
    e["bytes"] = std::move(b);
    return e;
  };
  OrderedJson j = entry(t.id, t.logprob);
  OrderedJson top = OrderedJson::array();
  for (const TokenLogprob& a : t.top) top.push_back(entry(a.id, a.logprob));
  j["top_logprobs"] = std::move(top);
  return j;
}

void CompletionLogprobs::add_prompt(int32_t id, const std::vector<TokenLogprob>* entry, size_t text_offset) {
  tokens_.push_back(f_.text(id));
  offsets_.push_back(text_offset);
  if (!entry || entry->empty()) {
    logprobs_.push_back(nullptr);
    top_.push_back(nullptr);
    return;
  }
  logprobs_.push_back(finite_logprob((*entry)[0].logprob));  // [0]: the prompt token itself
  OrderedJson top = OrderedJson::object();
  for (size_t i = 1; i < entry->size(); ++i) top[f_.text((*entry)[i].id)] = finite_logprob((*entry)[i].logprob);
  top_.push_back(std::move(top));
}

void CompletionLogprobs::add(const SampledToken& t, size_t text_offset) {
  tokens_.push_back(f_.text(t.id));
  logprobs_.push_back(finite_logprob(t.logprob));
  offsets_.push_back(text_offset);
  OrderedJson top = OrderedJson::object();
  for (const TokenLogprob& a : t.top) top[f_.text(a.id)] = finite_logprob(a.logprob);
  top_.push_back(std::move(top));
}

OrderedJson CompletionLogprobs::json() const {
  return {{"tokens", tokens_}, {"token_logprobs", logprobs_}, {"top_logprobs", top_}, {"text_offset", offsets_}};
}

void CompletionLogprobs::clear() {
  tokens_ = OrderedJson::array();
  logprobs_ = OrderedJson::array();
  top_ = OrderedJson::array();
  offsets_ = OrderedJson::array();
}

}  // namespace m2::server
