// A checkpoint's chat template, rendered exactly as Hugging Face transformers'
// apply_chat_template(tokenize=False) renders it (see text/jinja/template.h
// for the environment).
//
// Where the template comes from (transformers' order):
//  1. `chat_template.jinja` in the model directory;
//  2. `chat_template` in `tokenizer_config.json`: a string, or a list of
//     {"name", "template"} entries, of which "default" is used, and
//     "tool_use" instead when the request has tools (transformers'
//     get_chat_template).
// Template variables besides messages/tools/documents/add_generation_prompt
// are the special tokens of `tokenizer_config.json` (bos_token, eos_token,
// unk_token, sep_token, pad_token, cls_token, mask_token as strings, and
// additional_special_tokens), like transformers' special_tokens_map, then
// the caller's extra variables (vLLM's chat_template_kwargs), which win.
// `enable_thinking: false` reaches the template; one that never mentions
// that variable (M2's official template has no switch) gets its open
// `<think>\n` generation prompt closed with `</think>\n\n` instead, as
// llama.cpp does for M2, so the model answers without reasoning.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "text/chat_request.h"
#include "text/jinja/template.h"
#include "util/json.h"
#include "util/status.h"

namespace m2::text {

class ChatTemplate {
 public:
  static Result<ChatTemplate> load_from_dir(const std::string& dir);
  // `tokenizer_config` may be null (no special tokens).
  static Result<ChatTemplate> from_source(std::string_view source, std::string name,
                                          const OrderedJson& tokenizer_config);

  // `messages` are template messages (see normalize_openai_messages);
  // `tools` an array or null; `extra_vars` an object of more variables.
  Result<std::string> render(const OrderedJson& messages, const OrderedJson& tools, bool add_generation_prompt,
                             const OrderedJson& extra_vars) const;
  Result<std::string> render(const ChatTemplateInputs& inputs) const;
  // Normalises an OpenAI chat-completions body and renders it.
  Result<std::string> render_request(const OrderedJson& request) const;

  // Whether the template iterates message content itself, so OpenAI content
  // parts are passed through instead of joined (vLLM's "openai" content
  // format, detected from the template text).
  bool handles_content_parts() const { return handles_content_parts_; }
  // Whether the template reads `enable_thinking` itself.
  bool handles_thinking_switch() const { return handles_thinking_switch_; }
  const std::string& source() const { return source_; }

 private:
  Result<std::string> render_with(const jinja::Template& t, std::vector<std::pair<std::string, jinja::Value>> vars,
                                  const OrderedJson& messages, const OrderedJson& tools, bool add_generation_prompt,
                                  const OrderedJson& documents, const OrderedJson& extra_vars) const;

  std::shared_ptr<const jinja::Template> default_;
  std::shared_ptr<const jinja::Template> tool_use_;  // may be null
  std::vector<std::pair<std::string, jinja::Value>> special_tokens_;
  std::string source_;
  bool handles_content_parts_ = false;
  bool handles_thinking_switch_ = false;
};

}  // namespace m2::text
