#include "loadgen/workload.h"

#include <algorithm>

namespace m2::loadgen {
namespace {

// (prompt, answer) of the first human turn and the assistant turn after it.
// Accepts ShareGPT's {"from": "human"|"gpt", "value"} and {"role", "content"}.
std::vector<std::pair<std::string, std::string>> read_conversations(const Json& doc) {
  std::vector<std::pair<std::string, std::string>> out;
  if (!doc.is_array()) return out;
  for (const Json& entry : doc) {
    auto conv = entry.find("conversations");
    if (conv == entry.end()) conv = entry.find("messages");
    if (conv == entry.end() || !conv->is_array() || conv->size() < 2) continue;
    auto text = [](const Json& m) {
      for (const char* k : {"value", "content"})
        if (auto it = m.find(k); it != m.end() && it->is_string()) return it->get<std::string>();
      return std::string();
    };
    auto role = [](const Json& m) {
      for (const char* k : {"from", "role"})
        if (auto it = m.find(k); it != m.end() && it->is_string()) return it->get<std::string>();
      return std::string();
    };
    const Json& q = (*conv)[0];
    const Json& a = (*conv)[1];
    const std::string rq = role(q), ra = role(a);
    if ((rq != "human" && rq != "user") || (ra != "gpt" && ra != "assistant" && ra != "chatgpt")) continue;
    out.emplace_back(text(q), text(a));
  }
  return out;
}

Json chat_messages(const Json& system, const std::string& user) {
  Json m = Json::array();
  if (system.is_string() && !system.get<std::string>().empty()) m.push_back({{"role", "system"}, {"content", system}});
  m.push_back({{"role", "user"}, {"content", user}});
  return m;
}

}  // namespace

Result<std::unique_ptr<Workload>> Workload::create(const WorkloadConfig& config, TokenSource& tokens,
                                                   uint64_t seed) {
  std::unique_ptr<Workload> w(new Workload(config, tokens, seed));
  if (config.kind == DatasetKind::kShareGpt) {
    if (config.dataset_path.empty()) return errorf("--dataset sharegpt needs --dataset-path FILE");
    M2_ASSIGN_OR_RETURN(Json doc, read_json_file(config.dataset_path));
    w->conversations_ = read_conversations(doc);
    if (w->conversations_.empty())
      return errorf("{}: no ShareGPT conversations (a list of {{\"conversations\": [{{\"from\": \"human\", "
                    "\"value\": ...}}, {{\"from\": \"gpt\", ...}}]}})",
                    config.dataset_path);
    std::shuffle(w->conversations_.begin(), w->conversations_.end(), w->rng_);
    return w;
  }
  if (config.input_len < 1 || config.output_len < 1) return errorf("--input-len and --output-len must be >= 1");
  if (config.shared_prefix_len < 0 || config.shared_prefix_len >= config.input_len)
    return errorf("the shared prefix ({} tokens) must be shorter than --input-len ({})", config.shared_prefix_len,
                  config.input_len);
  M2_ASSIGN_OR_RETURN(w->pool_, token_pool(tokens));
  if (config.shared_prefix_len > 0) {
    M2_ASSIGN_OR_RETURN(auto shared, w->random_piece(config.shared_prefix_len));
    w->shared_ = std::move(shared.first);
    w->shared_tokens_ = shared.second;
  }
  return w;
}

Result<std::pair<Json, int64_t>> Workload::random_piece(int64_t n) {
  if (config_.endpoint == Endpoint::kCompletions) {
    std::uniform_int_distribution<size_t> pick(0, pool_.size() - 1);
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (auto& id : ids) id = pool_[pick(rng_)];
    return std::pair<Json, int64_t>(Json(ids), n);
  }
  M2_ASSIGN_OR_RETURN(ExactText t, exact_length_text(tokens_, pool_, n, rng_));
  return std::pair<Json, int64_t>(Json(t.text), t.tokens);
}

Result<std::vector<Session>> Workload::sessions(int n) {
  return config_.kind == DatasetKind::kShareGpt ? sharegpt(n) : generated(n);
}

Result<std::vector<Session>> Workload::generated(int n) {
  std::vector<Session> out;
  const int turns = config_.kind == DatasetKind::kAgentic ? std::max(config_.turns, 1) : 1;
  for (int i = 0; i < n; ++i) {
    Session s;
    s.output_len = config_.output_len;
    M2_ASSIGN_OR_RETURN(auto task, random_piece(config_.input_len - config_.shared_prefix_len));
    s.first_len = shared_tokens_ + task.second;
    if (config_.endpoint == Endpoint::kCompletions) {
      std::vector<int32_t> ids = shared_.is_array() ? shared_.get<std::vector<int32_t>>() : std::vector<int32_t>();
      for (const Json& id : task.first) ids.push_back(id.get<int32_t>());
      s.first_input = ids;
    } else {
      s.first_input = chat_messages(shared_, task.first.get<std::string>());
    }
    for (int t = 1; t < turns; ++t) {
      M2_ASSIGN_OR_RETURN(auto tool, random_piece(config_.tool_len));
      s.tool_results.push_back(std::move(tool.first));
      s.tool_lens.push_back(tool.second);
    }
    out.push_back(std::move(s));
  }
  return out;
}

Result<std::vector<Session>> Workload::sharegpt(int n) {
  std::vector<Session> out;
  size_t tried = 0;
  while (static_cast<int>(out.size()) < n) {
    if (tried++ >= conversations_.size())
      return errorf("{}: only {} conversations pass the length filters (4..1024 prompt tokens, <= 2048 in all); "
                    "{} are needed",
                    config_.dataset_path, out.size(), n);
    const auto& [prompt, answer] = conversations_[next_conversation_];
    next_conversation_ = (next_conversation_ + 1) % conversations_.size();
    M2_ASSIGN_OR_RETURN(std::vector<int32_t> p, tokens_.encode(prompt));
    int64_t out_len = config_.output_len;
    if (!config_.output_len_set) {
      M2_ASSIGN_OR_RETURN(std::vector<int32_t> a, tokens_.encode(answer));
      out_len = static_cast<int64_t>(a.size());
    }
    const int64_t in_len = static_cast<int64_t>(p.size());
    if (in_len < 4 || out_len < 4 || in_len > 1024 || in_len + out_len > 2048) continue;
    tried = 0;
    Session s;
    s.first_input = config_.endpoint == Endpoint::kCompletions ? Json(prompt) : chat_messages(Json(), prompt);
    s.first_len = in_len;
    s.output_len = out_len;
    out.push_back(std::move(s));
  }
  return out;
}

Result<int64_t> extend_history(const Session& s, int turn, const std::string& reply, const std::string& reasoning,
                               Endpoint endpoint, TokenSource& tokens, Json* input) {
  const Json& tool = s.tool_results.at(static_cast<size_t>(turn));
  const int64_t tool_len = s.tool_lens.at(static_cast<size_t>(turn));
  if (endpoint == Endpoint::kCompletions) {
    M2_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tokens.encode(reply));
    for (int32_t id : ids) input->push_back(id);
    for (const Json& id : tool) input->push_back(id);
    return static_cast<int64_t>(ids.size()) + tool_len;
  }
  const std::string call_id = "call_" + std::to_string(turn);
  Json assistant = {{"role", "assistant"},
                    {"content", reply},
                    {"tool_calls", Json::array({{{"id", call_id},
                                                 {"type", "function"},
                                                 {"function", {{"name", "run"}, {"arguments", "{}"}}}}})}};
  if (!reasoning.empty()) assistant["reasoning_content"] = reasoning;
  input->push_back(std::move(assistant));
  input->push_back({{"role", "tool"}, {"tool_call_id", call_id}, {"content", tool}});
  M2_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tokens.encode(reasoning + reply));
  return static_cast<int64_t>(ids.size()) + tool_len;
}

}  // namespace m2::loadgen
