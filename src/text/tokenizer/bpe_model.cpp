#include "text/tokenizer/bpe_model.h"

#include <fmt/format.h>

#include <array>
#include <mutex>
#include <unordered_map>

#include "text/tokenizer/utf8.h"

namespace m2::text::tok {

// Ids of recent pre-tokens, as HF's BPE cache: bounded, words under 256
// bytes, insertions stop once full. Sharded to keep lock contention low
// when several threads encode.
class BpeCache {
 public:
  static constexpr size_t kMaxWordBytes = 256;
  static constexpr size_t kShards = 16;
  static constexpr size_t kCapacityPerShard = 4096;

  bool get(std::string_view word, std::vector<int32_t>& out) const {
    const Shard& s = shard(word);
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.map.find(word);
    if (it == s.map.end()) return false;
    out.insert(out.end(), it->second.begin(), it->second.end());
    return true;
  }
  void put(std::string_view word, const int32_t* ids, size_t n) const {
    Shard& s = shard(word);
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.map.size() >= kCapacityPerShard) return;
    s.map.emplace(std::string(word), std::vector<int32_t>(ids, ids + n));
  }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  struct Shard {
    mutable std::mutex mu;
    std::unordered_map<std::string, std::vector<int32_t>, Hash, std::equal_to<>> map;
  };
  Shard& shard(std::string_view word) const {
    return shards_[(word.size() * 31 + static_cast<unsigned char>(word[0])) % kShards];
  }
  mutable std::array<Shard, kShards> shards_;
};

BpeModel::~BpeModel() = default;

Result<std::unique_ptr<BpeModel>> BpeModel::create(std::vector<std::pair<std::string, int32_t>> vocab,
                                                   std::vector<std::pair<std::string, std::string>> merges,
                                                   BpeOptions options) {
  std::unique_ptr<BpeModel> m(new BpeModel());
  m->options_ = std::move(options);
  m->vocab_.reserve(vocab.size());
  int32_t max_id = -1;
  for (const auto& [token, id] : vocab) {
    if (id < 0) return errorf("model.vocab: token '{}' has negative id {}", token, id);
    m->vocab_.insert(token, id);
    max_id = std::max(max_id, id);
  }
  // id -> token; with duplicate ids the last one in the file wins.
  m->id_to_token_.assign(static_cast<size_t>(max_id + 1), {0, ~0u});
  m->token_bytes_.reserve(vocab.size() * 8);
  for (const auto& [token, id] : vocab) {
    if (m->vocab_.find(token) != id) continue;  // overwritten duplicate key
    m->id_to_token_[id] = {static_cast<uint32_t>(m->token_bytes_.size()), static_cast<uint32_t>(token.size())};
    m->token_bytes_ += token;
  }
  const size_t prefix_len = m->options_.continuing_subword_prefix.size();
  m->merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    auto a_id = m->vocab_.find(a);
    if (!a_id) return errorf("model.merges[{}]: token '{}' is not in the vocabulary", rank, a);
    auto b_id = m->vocab_.find(b);
    if (!b_id) return errorf("model.merges[{}]: token '{}' is not in the vocabulary", rank, b);
    if (b.size() < prefix_len) {
      return errorf("model.merges[{}]: '{}' is shorter than continuing_subword_prefix", rank, b);
    }
    const std::string joined = a + b.substr(prefix_len);
    auto new_id = m->vocab_.find(joined);
    if (!new_id) return errorf("model.merges[{}]: merged token '{}' is not in the vocabulary", rank, joined);
    m->merges_.insert(*a_id, *b_id, {static_cast<uint32_t>(rank), *new_id});
  }
  m->small_char_ids_.assign(0x800, -1);
  for (char32_t c = 0; c < 0x800; ++c) {
    std::string s;
    append_utf8(s, c);
    if (auto id = m->vocab_.find(s)) m->small_char_ids_[c] = *id;
  }
  m->byte_fallback_ids_.assign(256, -1);
  for (int b = 0; b < 256; ++b) {
    if (auto id = m->vocab_.find(fmt::format("<0x{:02X}>", b))) m->byte_fallback_ids_[b] = *id;
  }
  m->cache_ = std::make_unique<BpeCache>();
  return m;
}

std::optional<std::string_view> BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size()) return std::nullopt;
  const auto [offset, length] = id_to_token_[id];
  if (length == ~0u) return std::nullopt;
  return std::string_view(token_bytes_.data() + offset, length);
}

Result<int32_t> BpeModel::unk_id() const {
  auto id = vocab_.find(*options_.unk_token);
  if (!id) return errorf("model.unk_token '{}' is not in the vocabulary", *options_.unk_token);
  return *id;
}

Status BpeModel::initial_symbols(std::string_view word, std::vector<int32_t>& ids) const {
  const bool plain = options_.continuing_subword_prefix.empty() && options_.end_of_word_suffix.empty();
  int32_t pending_unk = -1;  // an unk not yet emitted (fuse_unk extends it), -1 = none
  std::string piece;
  for (size_t i = 0; i < word.size();) {
    const size_t start = i;
    const char32_t c = next_codepoint(word, i);
    std::optional<int32_t> id;
    std::string_view text = word.substr(start, i - start);
    if (plain) {
      if (c < 0x800) {
        if (small_char_ids_[c] >= 0) id = small_char_ids_[c];
      } else {
        id = vocab_.find(text);
      }
    } else {
      piece.clear();
      if (start > 0) piece += options_.continuing_subword_prefix;
      piece += text;
      if (i == word.size()) piece += options_.end_of_word_suffix;
      text = piece;
      id = vocab_.find(text);
    }
    if (id) {
      if (pending_unk >= 0) ids.push_back(pending_unk);
      pending_unk = -1;
      ids.push_back(*id);
      continue;
    }
    if (options_.byte_fallback) {
      bool all = true;
      for (unsigned char b : text) all = all && byte_fallback_ids_[b] >= 0;
      if (all) {
        for (unsigned char b : text) ids.push_back(byte_fallback_ids_[b]);
        continue;
      }
    }
    if (options_.unk_token) {
      M2_ASSIGN_OR_RETURN(int32_t unk, unk_id());
      if (pending_unk >= 0 && !options_.fuse_unk) ids.push_back(pending_unk);
      pending_unk = unk;
    }
    // Without byte_fallback or unk_token HF drops the character.
  }
  if (pending_unk >= 0) ids.push_back(pending_unk);
  return {};
}

Status BpeModel::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return {};
  if (options_.ignore_merges) {
    if (auto id = vocab_.find(word)) {
      out.push_back(*id);
      return {};
    }
  }
  const bool cacheable = word.size() < BpeCache::kMaxWordBytes;
  if (cacheable && cache_->get(word, out)) return {};
  thread_local std::vector<int32_t> ids;
  ids.clear();
  M2_RETURN_IF_ERROR(initial_symbols(word, ids));
  bpe_detail::merge_by_scan(merges_, ids);
  if (cacheable) cache_->put(word, ids.data(), ids.size());
  out.insert(out.end(), ids.begin(), ids.end());
  return {};
}

}  // namespace m2::text::tok
