#include "text/tokenizer/decoders.h"

#include "text/tokenizer/byte_level.h"
#include "text/tokenizer/regex.h"
#include "text/tokenizer/utf8.h"

namespace m2::text::tok {
namespace {

// Token by token into raw bytes, then one string (HF's ByteLevel decoder
// returns a single token: the lossy UTF-8 of all bytes).
class ByteLevelDecoder final : public Decoder {
 public:
  Status decode_chain(std::vector<std::string>& tokens) const override {
    const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::get();
    std::string bytes;
    for (const auto& t : tokens) alphabet.decode_token(t, bytes);
    tokens.assign(1, utf8_lossy(bytes));
    return {};
  }
  bool is_byte_level() const override { return true; }
  bool window_exact(bool) const override { return true; }
  bool joins() const override { return true; }
};

class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(char32_t replacement, bool strip_first) : replacement_(replacement), strip_first_(strip_first) {}
  Status decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      const std::string& t = tokens[i];
      for (size_t k = 0; k < t.size();) {
        const size_t start = k;
        const char32_t c = next_codepoint(t, k);
        if (c != replacement_) {
          out.append(t, start, k - start);
        } else if (!(i == 0 && strip_first_)) {
          out += ' ';
        }
      }
      tokens[i] = std::move(out);
    }
    return {};
  }

  // Per token (the window's first token is stripped in both the window and
  // its prefix); once joined, per character.
  bool window_exact(bool) const override { return true; }

 private:
  char32_t replacement_;
  bool strip_first_;  // every replacement char of the first token is dropped
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(std::unique_ptr<Regex> regex, std::string content)
      : regex_(std::move(regex)), content_(std::move(content)) {}
  Status decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::pair<size_t, size_t>> matches;
    for (auto& t : tokens) {
      matches.clear();
      M2_RETURN_IF_ERROR(regex_->find_all(t, matches));
      if (matches.empty()) continue;
      std::string out;
      size_t last = 0;
      for (const auto& [s, e] : matches) {
        out.append(t, last, s - last);
        out += content_;
        last = e;
      }
      out.append(t, last, std::string::npos);
      t = std::move(out);
    }
    return {};
  }

  bool window_exact(bool joined) const override { return !joined; }

 private:
  std::unique_ptr<Regex> regex_;
  std::string content_;
};

// "<0xAB>" tokens become bytes; each run of them that is valid UTF-8 becomes
// one token, an invalid run one U+FFFD per byte.
class ByteFallbackDecoder final : public Decoder {
 public:
  Status decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string run;
    size_t run_len = 0;
    auto flush = [&] {
      if (!run_len) return;
      if (find_invalid_utf8(run) == std::string::npos) {
        out.push_back(run);
      } else {
        for (size_t k = 0; k < run_len; ++k) out.emplace_back("\xEF\xBF\xBD");
      }
      run.clear();
      run_len = 0;
    };
    for (auto& t : tokens) {
      if (auto byte = parse_byte(t)) {
        run += static_cast<char>(*byte);
        ++run_len;
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens = std::move(out);
    return {};
  }
  bool awaits_more(std::string_view token) const override { return parse_byte(token).has_value(); }
  bool window_exact(bool) const override { return true; }

 private:
  // u8::from_str_radix(&token[3..5], 16) on a 6-byte "<0x..>" token.
  static std::optional<uint8_t> parse_byte(std::string_view t) {
    if (t.size() != 6 || !t.starts_with("<0x") || t[5] != '>') return std::nullopt;
    auto hex = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    if (t[3] == '+') {  // from_str_radix accepts a leading '+'
      const int lo = hex(t[4]);
      if (lo < 0) return std::nullopt;
      return static_cast<uint8_t>(lo);
    }
    const int hi = hex(t[3]), lo = hex(t[4]);
    if (hi < 0 || lo < 0) return std::nullopt;
    return static_cast<uint8_t>(hi * 16 + lo);
  }
};

class FuseDecoder final : public Decoder {
 public:
  Status decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    tokens.assign(1, std::move(all));
    return {};
  }
  bool window_exact(bool) const override { return true; }
  bool joins() const override { return true; }
};

// Removes up to `start` leading and `stop` trailing `content` characters of each token.
class StripDecoder final : public Decoder {
 public:
  StripDecoder(char32_t content, size_t start, size_t stop) : content_(content), start_(start), stop_(stop) {}
  Status decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) {
      std::vector<std::pair<size_t, char32_t>> chars;  // (byte offset, char)
      for (size_t k = 0; k < t.size();) {
        const size_t at = k;
        chars.emplace_back(at, next_codepoint(t, k));
      }
      size_t start_cut = 0;
      for (size_t i = 0; i < std::min(start_, chars.size()) && chars[i].second == content_; ++i) start_cut = i + 1;
      size_t stop_cut = chars.size();
      for (size_t i = 0; i < stop_ && i < chars.size(); ++i) {
        const size_t index = chars.size() - i - 1;
        if (chars[index].second != content_) break;
        stop_cut = index;
      }
      if (stop_cut <= start_cut) {
        t.clear();
        continue;
      }
      const size_t b = start_cut < chars.size() ? chars[start_cut].first : t.size();
      const size_t e = stop_cut < chars.size() ? chars[stop_cut].first : t.size();
      t = t.substr(b, e - b);
    }
    return {};
  }

  // Stripping the end of a joined text depends on what follows; stripping
  // one leading character of it only ever touches the stream's start.
  bool window_exact(bool joined) const override { return !joined || (stop_ == 0 && start_ <= 1); }

 private:
  char32_t content_;
  size_t start_, stop_;
};

// Word suffix (e.g. "</w>") to a space, or to nothing in the last token.
class BpeSuffixDecoder final : public Decoder {
 public:
  explicit BpeSuffixDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  Status decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      const std::string_view replacement = i + 1 == tokens.size() ? "" : " ";
      std::string out;
      const std::string& t = tokens[i];
      if (suffix_.empty()) {  // Rust's str::replace("", r) puts r at every character boundary
        out += replacement;
        for (size_t k = 0; k < t.size();) {
          const size_t start = k;
          next_codepoint(t, k);
          out.append(t, start, k - start);
          out += replacement;
        }
        tokens[i] = std::move(out);
        continue;
      }
      size_t last = 0;
      for (size_t at = t.find(suffix_); at != std::string::npos; at = t.find(suffix_, last)) {
        out.append(t, last, at - last);
        out += replacement;
        last = at + suffix_.size();
      }
      out.append(t, last, std::string::npos);
      tokens[i] = std::move(out);
    }
    return {};
  }

  bool window_exact(bool) const override { return true; }

 private:
  std::string suffix_;
};

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> steps) : steps_(std::move(steps)) {}
  Status decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& d : steps_) M2_RETURN_IF_ERROR(d->decode_chain(tokens));
    return {};
  }
  bool awaits_more(std::string_view token) const override {
    for (const auto& d : steps_) {
      if (d->awaits_more(token)) return true;
    }
    return false;
  }
  bool window_exact(bool joined) const override {
    for (const auto& d : steps_) {
      if (!d->window_exact(joined)) return false;
      joined = joined || d->joins();
    }
    return true;
  }
  bool joins() const override {
    for (const auto& d : steps_) {
      if (d->joins()) return true;
    }
    return false;
  }
  // ByteLevel, then only Fuse steps (no-ops on its single token).
  bool is_byte_level() const override {
    if (steps_.empty() || !steps_[0]->is_byte_level()) return false;
    for (size_t i = 1; i < steps_.size(); ++i) {
      if (!dynamic_cast<const FuseDecoder*>(steps_[i].get())) return false;
    }
    return true;
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

Result<char32_t> one_char(const JsonNode& node, std::string_view key) {
  M2_ASSIGN_OR_RETURN(std::string s, node.string_field(key));
  size_t i = 0;
  if (s.empty() || find_invalid_utf8(s) != std::string::npos)
    return errorf("{}: expected one character", node.child_path(key));
  const char32_t c = next_codepoint(s, i);
  if (i != s.size()) return errorf("{}: expected one character, got '{}'", node.child_path(key), s);
  return c;
}

}  // namespace

Result<std::unique_ptr<Decoder>> make_decoder(const JsonNode& node) {
  M2_ASSIGN_OR_RETURN(std::string type, node.type_name());
  if (type == "ByteLevel") {
    M2_RETURN_IF_ERROR(node.only_keys({"type", "add_prefix_space", "trim_offsets", "use_regex"}));
    return std::unique_ptr<Decoder>(new ByteLevelDecoder());
  }
  if (type == "Metaspace") {
    M2_RETURN_IF_ERROR(
        node.only_keys({"type", "replacement", "prepend_scheme", "split", "add_prefix_space", "str_rep"}));
    M2_ASSIGN_OR_RETURN(char32_t replacement, one_char(node, "replacement"));
    bool strip_first = true;
    if (node.has("prepend_scheme")) {
      M2_ASSIGN_OR_RETURN(std::string s, node.string_field("prepend_scheme"));
      if (s != "always" && s != "never" && s != "first") {
        return errorf("{}: unknown prepend_scheme '{}'", node.child_path("prepend_scheme"), s);
      }
      strip_first = s != "never";
    } else if (node.has("add_prefix_space")) {
      M2_ASSIGN_OR_RETURN(strip_first, node.bool_field("add_prefix_space"));
    }
    return std::unique_ptr<Decoder>(new MetaspaceDecoder(replacement, strip_first));
  }
  if (type == "Replace") {
    M2_RETURN_IF_ERROR(node.only_keys({"type", "pattern", "content"}));
    if (!node.has("pattern")) return node.error("missing pattern");
    M2_ASSIGN_OR_RETURN(auto regex, make_pattern(node.child("pattern")));
    M2_ASSIGN_OR_RETURN(std::string content, node.string_field("content"));
    return std::unique_ptr<Decoder>(new ReplaceDecoder(std::move(regex), std::move(content)));
  }
  if (type == "ByteFallback") {
    M2_RETURN_IF_ERROR(node.only_keys({"type"}));
    return std::unique_ptr<Decoder>(new ByteFallbackDecoder());
  }
  if (type == "Fuse") {
    M2_RETURN_IF_ERROR(node.only_keys({"type"}));
    return std::unique_ptr<Decoder>(new FuseDecoder());
  }
  if (type == "Strip") {
    M2_RETURN_IF_ERROR(node.only_keys({"type", "content", "start", "stop"}));
    M2_ASSIGN_OR_RETURN(char32_t content, one_char(node, "content"));
    M2_ASSIGN_OR_RETURN(int64_t start, node.int_field("start"));
    M2_ASSIGN_OR_RETURN(int64_t stop, node.int_field("stop"));
    if (start < 0 || stop < 0) return node.error("start and stop must be >= 0");
    return std::unique_ptr<Decoder>(new StripDecoder(content, static_cast<size_t>(start), static_cast<size_t>(stop)));
  }
  if (type == "BPEDecoder") {
    M2_RETURN_IF_ERROR(node.only_keys({"type", "suffix"}));
    M2_ASSIGN_OR_RETURN(std::string suffix, node.string_field("suffix"));
    return std::unique_ptr<Decoder>(new BpeSuffixDecoder(std::move(suffix)));
  }
  if (type == "Sequence") {
    M2_ASSIGN_OR_RETURN(auto steps, component_sequence<Decoder>(node, "decoders", make_decoder));
    return std::unique_ptr<Decoder>(new SequenceDecoder(std::move(steps)));
  }
  return node.error(fmt::format(
      "unsupported decoder type '{}' (supported: ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, BPEDecoder, "
      "Sequence)",
      type));
}

}  // namespace m2::text::tok
