#include "text/tokenizer/normalizers.h"

#include <vector>

#include "text/tokenizer/regex.h"
#include "text/tokenizer/unicode_normalize.h"
#include "text/tokenizer/unicode_sets.h"
#include "text/tokenizer/utf8.h"

namespace m2::text::tok {
namespace {

class UnicodeNormalizer final : public Normalizer {
 public:
  explicit UnicodeNormalizer(NormalForm form) : form_(form) {}
  Status normalize(std::string& text) const override {
    text = normalize_unicode(text, form_);
    return {};
  }

 private:
  NormalForm form_;
};

// char::to_lowercase for every character (no context-dependent final sigma).
class Lowercase final : public Normalizer {
 public:
  Status normalize(std::string& text) const override {
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
      const auto b = static_cast<unsigned char>(text[i]);
      if (b < 0x80) {
        out += static_cast<char>(b >= 'A' && b <= 'Z' ? b + 32 : b);
        ++i;
        continue;
      }
      append_lowercase(next_codepoint(text, i), out);
    }
    text = std::move(out);
    return {};
  }
};

// Every match of the pattern (regex or literal) replaced by `content`.
class Replace final : public Normalizer {
 public:
  Replace(std::unique_ptr<Regex> regex, std::string content) : regex_(std::move(regex)), content_(std::move(content)) {}
  Status normalize(std::string& text) const override {
    std::vector<std::pair<size_t, size_t>> matches;
    M2_RETURN_IF_ERROR(regex_->find_all(text, matches));
    if (matches.empty()) return {};
    std::string out;
    size_t last = 0;
    for (const auto& [s, e] : matches) {
      out.append(text, last, s - last);
      out += content_;
      last = e;
    }
    out.append(text, last, std::string::npos);
    text = std::move(out);
    return {};
  }
  bool may_remove_leading() const override { return true; }

 private:
  std::unique_ptr<Regex> regex_;
  std::string content_;
};

class Prepend final : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  Status normalize(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);
    return {};
  }

 private:
  std::string prefix_;
};

// Removes leading and/or trailing White_Space.
class Strip final : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  Status normalize(std::string& text) const override {
    const auto& ws = white_space_set();
    size_t begin = 0, end = text.size();
    if (left_) {
      while (begin < end) {
        size_t next = begin;
        if (!ws.contains(next_codepoint(text, next))) break;
        begin = next;
      }
    }
    if (right_) {
      while (end > begin) {
        size_t prev = end;
        if (!ws.contains(prev_codepoint(text, prev))) break;
        end = prev;
      }
    }
    text = text.substr(begin, end - begin);
    return {};
  }
  bool may_remove_leading() const override { return left_; }

 private:
  bool left_, right_;
};

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  Status normalize(std::string& text) const override {
    for (const auto& n : steps_) M2_RETURN_IF_ERROR(n->normalize(text));
    return {};
  }
  bool may_remove_leading() const override {
    for (const auto& n : steps_) {
      if (n->may_remove_leading()) return true;
    }
    return false;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

}  // namespace

Result<std::unique_ptr<Normalizer>> make_normalizer(const JsonNode& node) {
  M2_ASSIGN_OR_RETURN(std::string type, node.type_name());
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    M2_RETURN_IF_ERROR(node.only_keys({"type"}));
    const NormalForm form = type == "NFC"    ? NormalForm::kNFC
                            : type == "NFD"  ? NormalForm::kNFD
                            : type == "NFKC" ? NormalForm::kNFKC
                                             : NormalForm::kNFKD;
    return std::unique_ptr<Normalizer>(new UnicodeNormalizer(form));
  }
  if (type == "Lowercase") {
    M2_RETURN_IF_ERROR(node.only_keys({"type"}));
    return std::unique_ptr<Normalizer>(new Lowercase());
  }
  if (type == "Replace") {
    M2_RETURN_IF_ERROR(node.only_keys({"type", "pattern", "content"}));
    if (!node.has("pattern")) return node.error("missing pattern");
    M2_ASSIGN_OR_RETURN(auto regex, make_pattern(node.child("pattern")));
    M2_ASSIGN_OR_RETURN(std::string content, node.string_field("content"));
    return std::unique_ptr<Normalizer>(new Replace(std::move(regex), std::move(content)));
  }
  if (type == "Prepend") {
    M2_RETURN_IF_ERROR(node.only_keys({"type", "prepend"}));
    M2_ASSIGN_OR_RETURN(std::string prefix, node.string_field("prepend"));
    return std::unique_ptr<Normalizer>(new Prepend(std::move(prefix)));
  }
  if (type == "Strip") {
    M2_RETURN_IF_ERROR(node.only_keys({"type", "strip_left", "strip_right"}));
    M2_ASSIGN_OR_RETURN(bool left, node.bool_field("strip_left"));
    M2_ASSIGN_OR_RETURN(bool right, node.bool_field("strip_right"));
    return std::unique_ptr<Normalizer>(new Strip(left, right));
  }
  if (type == "Sequence") {
    M2_ASSIGN_OR_RETURN(auto steps, component_sequence<Normalizer>(node, "normalizers", make_normalizer));
    return std::unique_ptr<Normalizer>(new SequenceNormalizer(std::move(steps)));
  }
  return node.error(
      fmt::format("unsupported normalizer type '{}' (supported: NFC, NFD, NFKC, NFKD, Lowercase, "
                  "Replace, Prepend, Strip, Sequence)",
                  type));
}

}  // namespace m2::text::tok
