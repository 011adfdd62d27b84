#include "text/tokenizer/added_vocabulary.h"

#include <algorithm>

#include "text/tokenizer/bpe_model.h"
#include "text/tokenizer/normalizers.h"
#include "text/tokenizer/unicode_sets.h"
#include "text/tokenizer/utf8.h"
#include "util/log.h"

namespace m2::text::tok {
namespace {

Result<AddedToken> parse_token(const JsonNode& node) {
  M2_RETURN_IF_ERROR(node.only_keys({"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special"}));
  AddedToken t;
  M2_ASSIGN_OR_RETURN(t.content, node.string_field("content"));
  M2_ASSIGN_OR_RETURN(t.single_word, node.bool_field("single_word", false));
  M2_ASSIGN_OR_RETURN(t.lstrip, node.bool_field("lstrip", false));
  M2_ASSIGN_OR_RETURN(t.rstrip, node.bool_field("rstrip", false));
  M2_ASSIGN_OR_RETURN(t.special, node.bool_field("special", false));
  M2_ASSIGN_OR_RETURN(t.normalized, node.bool_field("normalized", !t.special));
  return t;
}

}  // namespace

void AddedVocabulary::Matcher::add(std::string_view pattern, int32_t id) {
  if (pattern.empty()) return;
  int32_t node = 0;
  for (unsigned char b : pattern) {
    auto& next = nodes[node].next;
    auto it = std::lower_bound(next.begin(), next.end(), b, [](const auto& e, uint8_t v) { return e.first < v; });
    if (it != next.end() && it->first == b) {
      node = it->second;
    } else {
      const auto child = static_cast<int32_t>(nodes.size());
      next.insert(it, {b, child});
      nodes.emplace_back();
      node = child;
    }
  }
  if (nodes[node].token_id < 0) nodes[node].token_id = id;  // the first pattern wins ties
  first_byte[static_cast<unsigned char>(pattern[0])] = true;
}

std::pair<size_t, int32_t> AddedVocabulary::Matcher::longest_at(std::string_view text, size_t i) const {
  std::pair<size_t, int32_t> best{0, -1};
  int32_t node = 0;
  for (size_t k = i; k < text.size(); ++k) {
    const auto& next = nodes[node].next;
    const auto b = static_cast<uint8_t>(text[k]);
    auto it = std::lower_bound(next.begin(), next.end(), b, [](const auto& e, uint8_t v) { return e.first < v; });
    if (it == next.end() || it->first != b) break;
    node = it->second;
    if (nodes[node].token_id >= 0) best = {k + 1 - i, nodes[node].token_id};
  }
  return best;
}

Result<AddedVocabulary> AddedVocabulary::build(const JsonNode& list, const BpeModel& model,
                                               const Normalizer* normalizer) {
  AddedVocabulary v;
  std::vector<AddedToken> specials, others;
  ContentSet& special_set = v.special_contents_;
  auto lookup = [&](const std::string& content) -> std::optional<int32_t> {
    auto it = v.by_content_.find(content);
    if (it != v.by_content_.end()) return it->second;
    return model.token_to_id(content);
  };
  const auto vocab_size = static_cast<int64_t>(model.vocab_count());
  size_t moved = 0;  // tokens whose file id differs from the id HF gives them
  std::string first_moved;
  for (size_t i = 0; i < list.json.size(); ++i) {
    const JsonNode node = list.element(i);
    M2_ASSIGN_OR_RETURN(AddedToken t, parse_token(node));
    if (t.special && !t.content.empty() && special_set.insert(t.content).second) specials.push_back(t);
    const bool duplicate =
        std::any_of(v.by_id_.begin(), v.by_id_.end(), [&](const auto& entry) { return entry.second == t; });
    if (t.content.empty() || duplicate) continue;
    int32_t id;
    if (auto known = lookup(t.content)) {
      id = *known;
    } else if (v.by_content_.empty()) {
      id = static_cast<int32_t>(vocab_size);
    } else {
      int64_t max = -1;
      for (const auto& [c, existing] : v.by_content_) max = std::max<int64_t>(max, existing);
      id = static_cast<int32_t>(max >= vocab_size || vocab_size == 0 ? max + 1 : vocab_size);
    }
    if (node.has("id")) {
      M2_ASSIGN_OR_RETURN(int64_t file_id, node.int_field("id"));
      if (file_id != id && moved++ == 0) {
        first_moved = fmt::format("'{}' has id {} in the file, {} here", t.content, file_id, id);
      }
    }
    v.by_content_[t.content] = id;
    v.by_id_[id] = t;
    if (!special_set.count(t.content)) others.push_back(t);
  }
  if (moved) {
    log_warn(
        "{}: {} added tokens get other ids than the file's, as in HF tokenizers (first: {}); the file's ids "
        "assume vocabulary ids that it does not have",
        list.path, moved, first_moved);
  }
  // Matchers: specials first, then the others, each in file order.
  std::vector<AddedToken> all = specials;
  all.insert(all.end(), others.begin(), others.end());
  for (const AddedToken& t : all) {
    const int32_t id = *lookup(t.content);
    if (!t.normalized) {
      v.raw_.add(t.content, id);
      continue;
    }
    std::string pattern = t.content;
    if (normalizer) M2_RETURN_IF_ERROR(normalizer->normalize(pattern));
    v.normalized_.add(pattern, id);
  }
  for (const auto& [id, t] : v.by_id_) {
    std::string text = t.content;
    if (t.normalized && normalizer) M2_RETURN_IF_ERROR(normalizer->normalize(text));
    v.text_by_id_[id] = std::move(text);
  }
  return v;
}

void AddedVocabulary::match(std::string_view text, const Matcher& m, std::vector<Segment>& out) const {
  const auto& words = regex_word_set();
  const auto& spaces = white_space_set();
  size_t emitted = 0;  // end of the last segment written
  size_t i = 0;
  while (i < text.size()) {
    if (!m.first_byte[static_cast<unsigned char>(text[i])]) {
      ++i;
      continue;
    }
    const auto [len, id] = m.longest_at(text, i);
    if (len == 0) {
      ++i;
      continue;
    }
    size_t start = i, stop = i + len;
    i = stop;  // matches never overlap, kept or not
    const AddedToken& t = by_id_.find(id)->second;  // every pattern's id has a token
    if (t.single_word) {
      size_t before = start, after = stop;
      const bool start_ok = start == 0 || !words.contains(prev_codepoint(text, before));
      const bool stop_ok = stop == text.size() || !words.contains(next_codepoint(text, after));
      if (!start_ok || !stop_ok) continue;
    }
    if (t.lstrip) {
      size_t s = start;
      while (s > 0) {
        size_t p = s;
        if (!spaces.contains(prev_codepoint(text, p))) break;
        s = p;
      }
      start = std::max(s, emitted);
    }
    if (t.rstrip) {
      while (stop < text.size()) {
        size_t n = stop;
        if (!spaces.contains(next_codepoint(text, n))) break;
        stop = n;
      }
      // The next match is searched from the token's own end, as HF's
      // Aho-Corasick iterator does (a token may then overlap this one).
    }
    if (emitted < start) out.push_back({emitted, start, -1});
    out.push_back({start, stop, id});
    emitted = stop;
  }
  if (emitted < text.size()) out.push_back({emitted, text.size(), -1});
}

void AddedVocabulary::split(std::string_view text, bool normalized_matcher, std::vector<Segment>& out) const {
  const Matcher& m = normalized_matcher ? normalized_ : raw_;
  if (m.nodes.size() == 1) {
    if (!text.empty()) out.push_back({0, text.size(), -1});
    return;
  }
  match(text, m, out);
}

std::optional<int32_t> AddedVocabulary::token_to_id(std::string_view content) const {
  auto it = by_content_.find(std::string(content));
  if (it == by_content_.end()) return std::nullopt;
  return it->second;
}

const AddedToken* AddedVocabulary::token_of(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &it->second;
}

std::optional<std::string_view> AddedVocabulary::text_of(int32_t id) const {
  auto it = text_by_id_.find(id);
  if (it == text_by_id_.end()) return std::nullopt;
  return std::string_view(it->second);
}

int32_t AddedVocabulary::max_id() const {
  int32_t max = -1;
  for (const auto& [id, t] : by_id_) max = std::max(max, id);
  return max;
}

}  // namespace m2::text::tok
