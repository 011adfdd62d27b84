#include "text/chat_template.h"

#include <fmt/format.h>

#include <filesystem>
#include <optional>

#include "text/chat_continuation.h"

namespace m2::text {

namespace {

namespace fs = std::filesystem;

// tokenizer_config.json writes special tokens as strings or as AddedToken
// objects ({"__type": "AddedToken", "content": ...}); transformers passes
// their text to the template.
std::optional<std::string> token_text(const OrderedJson& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object()) {
    auto c = v.find("content");
    if (c != v.end() && c->is_string()) return c->get<std::string>();
  }
  return std::nullopt;
}

std::vector<std::pair<std::string, jinja::Value>> special_tokens(const OrderedJson& config) {
  std::vector<std::pair<std::string, jinja::Value>> out;
  if (!config.is_object()) return out;
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    auto it = config.find(key);
    if (it == config.end()) continue;
    if (auto text = token_text(*it)) out.emplace_back(key, jinja::Value::string(*text));
  }
  if (auto it = config.find("additional_special_tokens"); it != config.end() && it->is_array()) {
    std::vector<jinja::Value> tokens;
    for (const auto& t : *it) {
      if (auto text = token_text(t)) tokens.push_back(jinja::Value::string(*text));
    }
    out.emplace_back("additional_special_tokens", jinja::Value::list(std::move(tokens)));
  }
  return out;
}

// `name` is relative to the model directory: it prefixes render errors,
// which go to API clients (no server paths for them); a template that does
// not compile is the operator's to fix and gets the directory too.
Result<std::shared_ptr<const jinja::Template>> compile(std::string_view source, const std::string& name,
                                                       const std::string& dir) {
  auto t = jinja::Template::parse(source, name);
  if (!t.ok()) return t.status().with_context(dir);
  return std::make_shared<const jinja::Template>(std::move(*t));
}

}  // namespace

Result<ChatTemplate> ChatTemplate::from_source(std::string_view source, std::string name,
                                               const OrderedJson& tokenizer_config) {
  ChatTemplate ct;
  auto t = jinja::Template::parse(source, std::move(name));
  if (!t.ok()) return t.status();
  ct.default_ = std::make_shared<const jinja::Template>(std::move(*t));
  ct.source_ = std::string(source);
  ct.special_tokens_ = special_tokens(tokenizer_config);
  // vLLM's content-format detection in spirit: a template that loops over
  // a message's content handles OpenAI content parts.
  ct.handles_content_parts_ = ct.default_->loops_over_attribute("content");
  ct.handles_thinking_switch_ = source.find("enable_thinking") != std::string_view::npos;
  return ct;
}

Result<ChatTemplate> ChatTemplate::load_from_dir(const std::string& dir) {
  const std::string jinja_path = (fs::path(dir) / "chat_template.jinja").string();
  const std::string config_path = (fs::path(dir) / "tokenizer_config.json").string();
  OrderedJson config = nullptr;
  std::error_code ec;
  if (fs::exists(config_path, ec)) {
    M2_ASSIGN_OR_RETURN(std::string text, read_text_file(config_path));
    M2_ASSIGN_OR_RETURN(config, parse_ordered_json(text, config_path));
    if (!config.is_object()) return errorf("{}: expected a JSON object", config_path);
  }
  if (fs::exists(jinja_path, ec)) {
    M2_ASSIGN_OR_RETURN(std::string source, read_text_file(jinja_path));
    auto ct = from_source(source, "chat_template.jinja", config);
    if (!ct.ok()) return ct.status().with_context(dir);
    return ct;
  }
  if (config.is_null()) {
    return errorf("{}: no chat template (neither chat_template.jinja nor tokenizer_config.json)", dir);
  }
  auto field = config.find("chat_template");
  if (field == config.end() || field->is_null()) {
    return errorf("{}: no chat template (no chat_template.jinja, and no 'chat_template' field in {})", dir,
                  config_path);
  }
  const std::string where = config_path + ": chat_template";
  const std::string name = "tokenizer_config.json: chat_template";
  if (field->is_string()) {
    auto ct = from_source(field->get<std::string>(), name, config);
    if (!ct.ok()) return ct.status().with_context(dir);
    return ct;
  }
  if (!field->is_array()) return errorf("{}: expected a string or a list of {{name, template}}", where);
  // The list form: named templates; "default" is required.
  ChatTemplate ct;
  for (size_t i = 0; i < field->size(); ++i) {
    const OrderedJson& entry = (*field)[i];
    auto n = entry.find("name");
    auto t = entry.find("template");
    if (!entry.is_object() || n == entry.end() || t == entry.end() || !n->is_string() || !t->is_string()) {
      return errorf("{}[{}]: expected an object with string fields 'name' and 'template'", where, i);
    }
    const std::string entry_name = n->get<std::string>();
    const std::string label = fmt::format("{}[{}] ('{}')", name, i, entry_name);
    ct.handles_thinking_switch_ |= t->get<std::string>().find("enable_thinking") != std::string::npos;
    if (entry_name == "default") {
      M2_ASSIGN_OR_RETURN(ct.default_, compile(t->get<std::string>(), label, dir));
      ct.source_ = t->get<std::string>();
    } else if (entry_name == "tool_use") {
      M2_ASSIGN_OR_RETURN(ct.tool_use_, compile(t->get<std::string>(), label, dir));
    }
  }
  if (!ct.default_) return errorf("{}: the list of templates has no 'default' entry", where);
  ct.special_tokens_ = special_tokens(config);
  ct.handles_content_parts_ = ct.default_->loops_over_attribute("content");
  return ct;
}

Result<std::string> ChatTemplate::render_with(const jinja::Template& t,
                                              std::vector<std::pair<std::string, jinja::Value>> vars,
                                              const OrderedJson& messages, const OrderedJson& tools,
                                              bool add_generation_prompt, const OrderedJson& documents,
                                              const OrderedJson& extra_vars) const {
  if (extra_vars.is_object()) {
    for (const auto& [key, value] : extra_vars.items()) {
      M2_ASSIGN_OR_RETURN(jinja::Value v, jinja::value_from_json(value, "chat_template_kwargs." + key));
      vars.emplace_back(key, std::move(v));
    }
  } else if (!extra_vars.is_null()) {
    return errorf("template variables: expected an object");
  }
  M2_ASSIGN_OR_RETURN(jinja::Value msgs, jinja::value_from_json(messages, "messages"));
  M2_ASSIGN_OR_RETURN(jinja::Value tls, jinja::value_from_json(tools, "tools"));
  M2_ASSIGN_OR_RETURN(jinja::Value docs, jinja::value_from_json(documents, "documents"));
  vars.emplace_back("messages", std::move(msgs));
  vars.emplace_back("tools", std::move(tls));
  vars.emplace_back("documents", std::move(docs));
  vars.emplace_back("add_generation_prompt", jinja::Value::boolean(add_generation_prompt));
  return t.render(vars);
}

Result<std::string> ChatTemplate::render(const OrderedJson& messages, const OrderedJson& tools,
                                         bool add_generation_prompt, const OrderedJson& extra_vars) const {
  const jinja::Template& t = (tool_use_ && !tools.is_null()) ? *tool_use_ : *default_;
  return render_with(t, special_tokens_, messages, tools, add_generation_prompt, nullptr, extra_vars);
}

Result<std::string> ChatTemplate::render(const ChatTemplateInputs& in) const {
  const jinja::Template& t = (tool_use_ && !in.tools.is_null()) ? *tool_use_ : *default_;
  M2_ASSIGN_OR_RETURN(std::string text, render_with(t, special_tokens_, in.messages, in.tools,
                                                    in.add_generation_prompt, in.documents, in.template_kwargs));
  if (in.continue_final_message) {
    M2_ASSIGN_OR_RETURN(std::string final_text, final_message_text(in.messages));
    return cut_after_final_message(std::move(text), final_text);
  }
  // enable_thinking false for a template without that switch (M2's): the
  // open reasoning of the generation prompt is closed, as llama.cpp does.
  const auto thinking = in.template_kwargs.find("enable_thinking");
  const bool thinking_off = thinking != in.template_kwargs.end() && thinking->is_boolean() && !thinking->get<bool>();
  constexpr std::string_view kOpen = "<think>\n";
  if (thinking_off && !handles_thinking_switch_ && in.add_generation_prompt && text.size() >= kOpen.size() &&
      text.compare(text.size() - kOpen.size(), kOpen.size(), kOpen) == 0) {
    text += "</think>\n\n";
  }
  return text;
}

Result<std::string> ChatTemplate::render_request(const OrderedJson& request) const {
  M2_ASSIGN_OR_RETURN(ChatTemplateInputs in, prepare_chat_template_inputs(request, handles_content_parts_));
  return render(in);
}

}  // namespace m2::text
