#include "text/tokenizer/tokenizer_file.h"

#include <limits>

namespace m2::text::tok {
namespace {

class Handler : public nlohmann::json_sax<Json> {
 public:
  explicit Handler(TokenizerFile& out) : out_(out) {}
  std::string error;

  bool null() override { return value(Json(nullptr)); }
  bool boolean(bool v) override { return value(Json(v)); }
  bool number_integer(number_integer_t v) override {
    if (mode_ == Mode::kVocab) return vocab_id(v);
    return value(Json(v));
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (mode_ == Mode::kVocab) {
      return vocab_id(
          v > static_cast<number_unsigned_t>(std::numeric_limits<int64_t>::max()) ? -1 : static_cast<int64_t>(v));
    }
    return value(Json(v));
  }
  bool number_float(number_float_t v, const string_t&) override { return value(Json(v)); }
  bool binary(binary_t&) override { return fail("unexpected binary value"); }
  bool string(string_t& s) override {
    if (mode_ == Mode::kMerges) return merge_line(s);
    if (mode_ == Mode::kMergePair) {
      pair_.push_back(std::move(s));
      return true;
    }
    return value(Json(std::move(s)));
  }
  bool key(string_t& k) override {
    if (mode_ == Mode::kVocab) {
      vocab_key_ = std::move(k);
      return true;
    }
    key_ = std::move(k);
    return true;
  }

  bool start_object(std::size_t) override {
    if (mode_ != Mode::kDom)
      return fail(mode_ == Mode::kVocab ? "model.vocab: ids must be integers" : "model.merges: bad entry");
    if (at_model_field("vocab")) {
      mode_ = Mode::kVocab;
      out_.has_vocab = true;
      return true;
    }
    return open(Json::object());
  }
  bool end_object() override {
    if (mode_ == Mode::kVocab) {
      mode_ = Mode::kDom;
      return true;
    }
    return close();
  }
  bool start_array(std::size_t) override {
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kMergePair;
      pair_.clear();
      return true;
    }
    if (mode_ != Mode::kDom)
      return fail(mode_ == Mode::kVocab ? "model.vocab: ids must be integers" : "model.merges: bad entry");
    if (at_model_field("merges")) {
      mode_ = Mode::kMerges;
      out_.has_merges = true;
      return true;
    }
    return open(Json::array());
  }
  bool end_array() override {
    if (mode_ == Mode::kMergePair) {
      if (pair_.size() != 2) return fail(fmt::format("model.merges[{}]: expected [left, right]", out_.merges.size()));
      out_.merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
      mode_ = Mode::kMerges;
      return true;
    }
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kDom;
      return true;
    }
    return close();
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) override {
    error = fmt::format("invalid JSON at byte {}: {}", position, e.what());
    return false;
  }

 private:
  enum class Mode { kDom, kVocab, kMerges, kMergePair };

  bool fail(std::string message) {
    if (error.empty()) error = std::move(message);
    return false;
  }
  // True if the container about to open is root.model.<field>.
  bool at_model_field(std::string_view field) const {
    return stack_.size() == 2 && keys_.size() == 2 && keys_[1] == "model" && key_ == field && stack_[1]->is_object();
  }
  Json* place(Json v) {
    if (stack_.empty()) {
      out_.doc = std::move(v);
      return &out_.doc;
    }
    Json& parent = *stack_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(v));
      return &parent.back();
    }
    Json& slot = parent[key_];
    slot = std::move(v);
    return &slot;
  }
  bool value(Json v) {
    if (mode_ != Mode::kDom) {
      return fail(mode_ == Mode::kVocab
                      ? fmt::format("model.vocab['{}']: id must be an integer", vocab_key_)
                      : fmt::format("model.merges[{}]: expected a string or a pair", out_.merges.size()));
    }
    place(std::move(v));
    return true;
  }
  bool open(Json container) {
    const std::string k = stack_.empty() || stack_.back()->is_array() ? std::string() : key_;
    stack_.push_back(place(std::move(container)));
    keys_.push_back(k);
    return true;
  }
  bool close() {
    stack_.pop_back();
    keys_.pop_back();
    return true;
  }
  bool vocab_id(int64_t v) {
    if (v < 0 || v > std::numeric_limits<int32_t>::max()) {
      return fail(fmt::format("model.vocab['{}']: id {} out of range", vocab_key_, v));
    }
    out_.vocab.emplace_back(std::move(vocab_key_), static_cast<int32_t>(v));
    return true;
  }
  // Legacy "left right" form; HF skips "#version" lines and needs exactly one space.
  bool merge_line(const std::string& s) {
    if (s.rfind("#version", 0) == 0) return true;
    const size_t space = s.find(' ');
    if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
      return fail(fmt::format("model.merges[{}]: '{}' is not \"left right\"", out_.merges.size(), s));
    }
    out_.merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    return true;
  }

  TokenizerFile& out_;
  Mode mode_ = Mode::kDom;
  std::vector<Json*> stack_;
  std::vector<std::string> keys_;  // key under which each open container sits
  std::string key_;
  std::string vocab_key_;
  std::vector<std::string> pair_;
};

}  // namespace

Result<TokenizerFile> parse_tokenizer_file(std::string_view text, std::string_view what) {
  TokenizerFile file;
  Handler handler(file);
  bool ok = false;
  try {
    ok = Json::sax_parse(text.begin(), text.end(), &handler);
  } catch (const Json::exception& e) {
    return errorf("{}: {}", what, e.what());
  }
  if (!ok) return errorf("{}: {}", what, handler.error.empty() ? "invalid JSON" : handler.error);
  if (!file.doc.is_object()) return errorf("{}: expected a JSON object", what);
  return file;
}

}  // namespace m2::text::tok
