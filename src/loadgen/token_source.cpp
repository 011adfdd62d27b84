#include "loadgen/token_source.h"

#include <algorithm>
#include <mutex>
#include <set>

#include "text/tokenizer/tokenizer.h"
#include "util/json.h"

namespace m2::loadgen {
namespace {

constexpr const char* kPoolText =
    "The agent read the build log, found the failing test and opened the source file. It compared the expected "
    "value with the one the function returned, traced the difference to an off-by-one error in the loop that "
    "walks the buffer, and wrote a patch. Then it ran the whole suite again: every test passed, the benchmark "
    "was three percent faster, and the report listed what changed and why. Weather tomorrow: light rain in the "
    "morning, clearing by noon, with a high of nineteen degrees. Numbers 0 1 2 3 4 5 6 7 8 9 10 42 100 2048. "
    "Questions about history, science, music, cooking, travel, mathematics and language are answered with "
    "care; each answer cites its sources and explains the reasoning step by step before the conclusion.";

class ServerSource final : public TokenSource {
 public:
  ServerSource(BaseUrl url, std::string api_key, std::string model)
      : url_(std::move(url)), api_key_(std::move(api_key)), model_(std::move(model)) {}

  Result<std::vector<int32_t>> encode(const std::string& text) override {
    Json body = {{"model", model_}, {"prompt", text}, {"add_special_tokens", false}};
    M2_ASSIGN_OR_RETURN(Json reply, call("/tokenize", body));
    auto t = reply.find("tokens");
    if (t == reply.end() || !t->is_array()) return errorf("/tokenize: the answer has no 'tokens' list");
    return t->get<std::vector<int32_t>>();
  }

  Result<std::string> decode(const std::vector<int32_t>& ids) override {
    M2_ASSIGN_OR_RETURN(Json reply, call("/detokenize", Json{{"model", model_}, {"tokens", ids}}));
    auto p = reply.find("prompt");
    if (p == reply.end() || !p->is_string()) return errorf("/detokenize: the answer has no 'prompt' string");
    return p->get<std::string>();
  }

 private:
  // One client per concurrent caller, reused.
  Result<Json> call(const char* path, const Json& body) {
    std::unique_ptr<HttpClient> client;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!idle_.empty()) {
        client = std::move(idle_.back());
        idle_.pop_back();
      }
    }
    if (!client) client = std::make_unique<HttpClient>(url_, api_key_);
    auto reply = client->post(path, body.dump());
    {
      std::lock_guard<std::mutex> lock(mu_);
      idle_.push_back(std::move(client));
    }
    if (!reply.ok()) return reply.status().with_context(path);
    if (reply->status != 200)
      return errorf("{}: HTTP {} (use --tokenizer DIR with a server that has no {}): {}", path, reply->status, path,
                    reply->body.substr(0, 300));
    return parse_json(reply->body, path);
  }

  BaseUrl url_;
  std::string api_key_, model_;
  std::mutex mu_;
  std::vector<std::unique_ptr<HttpClient>> idle_;
};

class LocalSource final : public TokenSource {
 public:
  explicit LocalSource(std::unique_ptr<text::Tokenizer> tok) : tok_(std::move(tok)) {}
  Result<std::vector<int32_t>> encode(const std::string& text) override { return tok_->encode(text, false); }
  Result<std::string> decode(const std::vector<int32_t>& ids) override { return tok_->decode(ids, false); }

 private:
  std::unique_ptr<text::Tokenizer> tok_;
};

}  // namespace

std::unique_ptr<TokenSource> server_token_source(BaseUrl url, std::string api_key, std::string model) {
  return std::make_unique<ServerSource>(std::move(url), std::move(api_key), std::move(model));
}

Result<std::unique_ptr<TokenSource>> local_token_source(const std::string& dir) {
  M2_ASSIGN_OR_RETURN(auto tok, text::Tokenizer::load_from_dir(dir));
  return std::unique_ptr<TokenSource>(std::make_unique<LocalSource>(std::move(tok)));
}

Result<std::vector<int32_t>> token_pool(TokenSource& source) {
  M2_ASSIGN_OR_RETURN(std::vector<int32_t> ids, source.encode(kPoolText));
  std::set<int32_t> distinct(ids.begin(), ids.end());
  if (distinct.size() < 16)
    return errorf("the tokenizer gives only {} distinct tokens for English text", distinct.size());
  return std::vector<int32_t>(distinct.begin(), distinct.end());
}

Result<ExactText> exact_length_text(TokenSource& source, const std::vector<int32_t>& pool, int64_t n,
                                    std::mt19937_64& rng) {
  std::uniform_int_distribution<size_t> pick(0, pool.size() - 1);
  std::vector<int32_t> ids;
  ExactText best;
  for (int round = 0; round < 16; ++round) {
    while (static_cast<int64_t>(ids.size()) < n) ids.push_back(pool[pick(rng)]);
    ids.resize(static_cast<size_t>(n));
    M2_ASSIGN_OR_RETURN(std::string text, source.decode(ids));
    M2_ASSIGN_OR_RETURN(ids, source.encode(text));
    const int64_t got = static_cast<int64_t>(ids.size());
    if (round == 0 || std::abs(got - n) < std::abs(best.tokens - n)) best = {text, got};
    if (got == n) break;
  }
  return best;
}

}  // namespace m2::loadgen
