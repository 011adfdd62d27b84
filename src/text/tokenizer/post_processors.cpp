#include "text/tokenizer/post_processors.h"

namespace m2::text::tok {
namespace {

// The single-sequence template: a list of pieces, each the input sequence
// (ids == nullopt) or a special token's ids.
class Template final : public PostProcessor {
 public:
  explicit Template(std::vector<std::optional<std::vector<int32_t>>> pieces) : pieces_(std::move(pieces)) {}
  void process(std::vector<int32_t>& ids) const override {
    std::vector<int32_t> out;
    for (const auto& p : pieces_) {
      if (p) {
        out.insert(out.end(), p->begin(), p->end());
      } else {
        out.insert(out.end(), ids.begin(), ids.end());
      }
    }
    ids = std::move(out);
  }

 private:
  std::vector<std::optional<std::vector<int32_t>>> pieces_;
};

class NoChange final : public PostProcessor {
 public:
  void process(std::vector<int32_t>&) const override {}
};

class SequenceProcessor final : public PostProcessor {
 public:
  explicit SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> steps) : steps_(std::move(steps)) {}
  void process(std::vector<int32_t>& ids) const override {
    for (const auto& s : steps_) s->process(ids);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> steps_;
};

Result<std::unique_ptr<PostProcessor>> make_template(const JsonNode& node) {
  M2_RETURN_IF_ERROR(node.only_keys({"type", "single", "pair", "special_tokens"}));
  M2_ASSIGN_OR_RETURN(const Json* single, node.array_field("single"));
  M2_ASSIGN_OR_RETURN(const Json* specials, node.object_field("special_tokens"));
  const JsonNode single_node{*single, node.child_path("single")};
  const JsonNode specials_node{*specials, node.child_path("special_tokens")};
  std::vector<std::optional<std::vector<int32_t>>> pieces;
  for (size_t i = 0; i < single->size(); ++i) {
    const JsonNode piece = single_node.element(i);
    if (piece.has("Sequence")) {
      M2_ASSIGN_OR_RETURN(std::string id, piece.child("Sequence").string_field("id"));
      if (id != "A") return piece.error("the single template can only use sequence A");
      pieces.emplace_back(std::nullopt);
    } else if (piece.has("SpecialToken")) {
      M2_ASSIGN_OR_RETURN(std::string name, piece.child("SpecialToken").string_field("id"));
      if (!specials_node.has(name))
        return piece.error(fmt::format("special token '{}' is not in special_tokens", name));
      const JsonNode special = specials_node.child(name);
      M2_ASSIGN_OR_RETURN(const Json* ids, special.array_field("ids"));
      std::vector<int32_t> values;
      for (const auto& v : *ids) {
        if (!v.is_number_integer()) return special.error("ids must be integers");
        values.push_back(v.get<int32_t>());
      }
      pieces.emplace_back(std::move(values));
    } else {
      return piece.error("expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
    }
  }
  return std::unique_ptr<PostProcessor>(new Template(std::move(pieces)));
}

// [cls] A [sep] from {"cls": [token, id], "sep": [token, id]}.
Result<std::unique_ptr<PostProcessor>> make_cls_sep(const JsonNode& node) {
  auto id_of = [&](std::string_view key) -> Result<int32_t> {
    M2_ASSIGN_OR_RETURN(const Json* pair, node.array_field(key));
    if (pair->size() != 2 || !(*pair)[1].is_number_integer()) {
      return errorf("{}: expected [token, id]", node.child_path(key));
    }
    return (*pair)[1].get<int32_t>();
  };
  M2_ASSIGN_OR_RETURN(int32_t cls, id_of("cls"));
  M2_ASSIGN_OR_RETURN(int32_t sep, id_of("sep"));
  std::vector<std::optional<std::vector<int32_t>>> pieces;
  pieces.emplace_back(std::vector<int32_t>{cls});
  pieces.emplace_back(std::nullopt);
  pieces.emplace_back(std::vector<int32_t>{sep});
  return std::unique_ptr<PostProcessor>(new Template(std::move(pieces)));
}

}  // namespace

Result<std::unique_ptr<PostProcessor>> make_post_processor(const JsonNode& node) {
  M2_ASSIGN_OR_RETURN(std::string type, node.type_name());
  if (type == "TemplateProcessing") return make_template(node);
  if (type == "BertProcessing") {
    M2_RETURN_IF_ERROR(node.only_keys({"type", "cls", "sep"}));
    return make_cls_sep(node);
  }
  if (type == "RobertaProcessing") {
    M2_RETURN_IF_ERROR(node.only_keys({"type", "cls", "sep", "trim_offsets", "add_prefix_space"}));
    return make_cls_sep(node);
  }
  if (type == "ByteLevel") {
    M2_RETURN_IF_ERROR(node.only_keys({"type", "add_prefix_space", "trim_offsets", "use_regex"}));
    return std::unique_ptr<PostProcessor>(new NoChange());
  }
  if (type == "Sequence") {
    M2_ASSIGN_OR_RETURN(auto steps, component_sequence<PostProcessor>(node, "processors", make_post_processor));
    return std::unique_ptr<PostProcessor>(new SequenceProcessor(std::move(steps)));
  }
  return node.error(
      fmt::format("unsupported post-processor type '{}' (supported: TemplateProcessing, "
                  "BertProcessing, RobertaProcessing, ByteLevel, Sequence)",
                  type));
}

}  // namespace m2::text::tok
