#include "server/replay.h"

#include "util/json.h"

namespace m2::server {

Result<ReplaySource> ReplaySource::load(const std::string& path, const text::Tokenizer& tokenizer) {
  M2_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  ReplaySource source;
  auto add = [&](std::optional<std::string> match, const std::string& output) -> Status {
    auto ids = tokenizer.encode(output, false);
    if (!ids.ok()) return ids.status().with_context(path);
    source.entries_.push_back({std::move(match), std::move(*ids)});
    return Status();
  };
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || text[first] != '{') {
    M2_RETURN_IF_ERROR(add(std::nullopt, text));
    return source;
  }
  M2_ASSIGN_OR_RETURN(Json j, parse_json(text, path));
  if (!j.contains("outputs") || !j["outputs"].is_array())
    return errorf("{}: expected {{\"outputs\": [{{\"match\", \"output\"}}, ...]}}", path);
  for (const Json& e : j["outputs"]) {
    if (!e.is_object() || !e.contains("output") || !e["output"].is_string())
      return errorf("{}: each entry of 'outputs' needs a string 'output'", path);
    std::optional<std::string> match;
    if (e.contains("match")) {
      if (!e["match"].is_string()) return errorf("{}: 'match' must be a string", path);
      match = e["match"].get<std::string>();
    }
    M2_RETURN_IF_ERROR(add(std::move(match), e["output"].get<std::string>()));
  }
  return source;
}

std::optional<std::vector<int32_t>> ReplaySource::select(std::string_view prompt_text) const {
  for (const Entry& e : entries_) {
    if (!e.match || prompt_text.find(*e.match) != std::string_view::npos) return e.tokens;
  }
  return std::nullopt;
}

}  // namespace m2::server
