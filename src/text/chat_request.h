// OpenAI chat-completions request -> the inputs of a chat template, the way
// Hugging Face transformers (apply_chat_template) and vLLM prepare them.
//
// Normalisation of `messages` (each rule names the message index in errors,
// so a server can answer 400 with it):
//  - a message must be an object with a string `role`;
//  - `content: null` becomes "" (OpenAI sends null on tool-call turns and
//    the M2 template would print "None"); a missing content stays missing;
//  - content given as a list of parts: only {"type": "text", "text": ...}
//    parts are accepted (text-only model). They are kept as parts when the
//    template handles parts itself, else joined with "\n" as vLLM does for
//    "string" templates;
//  - assistant `tool_calls[].function.arguments` given as a JSON string is
//    parsed to its value (the M2 template iterates it with .items());
//    null or "" becomes {} (vLLM); invalid JSON is an error;
//  - `reasoning_content` passes through; `reasoning` (the newer OpenAI-style
//    field name) fills `reasoning_content` when that is absent;
//  - other keys whose value is null are dropped, as transformers does,
//    because templates handle a missing key better than None.
// Key order is kept everywhere (it shows through `tojson`).
#pragma once

#include <string_view>

#include "util/json.h"
#include "util/status.h"

namespace m2::text {

struct ChatTemplateInputs {
  OrderedJson messages;               // normalised messages
  OrderedJson tools;                  // array, or null when absent
  OrderedJson documents;              // as given, or null
  bool add_generation_prompt = true;  // request field (vLLM extension), default true
  bool continue_final_message = false;  // vLLM: continue the final message (chat_continuation.h)
  OrderedJson template_kwargs;        // `chat_template_kwargs` (vLLM): extra template variables
};

// Parses JSON keeping object key order; errors name `what` and the byte.
Result<OrderedJson> parse_ordered_json(std::string_view text, std::string_view what);

// `request` is an OpenAI chat-completions body. `keep_content_parts` comes
// from ChatTemplate::handles_content_parts().
Result<OrderedJson> normalize_openai_messages(const OrderedJson& request, bool keep_content_parts);

// Messages plus tools, documents, add_generation_prompt,
// continue_final_message (which turns the generation prompt off, and may not
// be combined with an explicit add_generation_prompt: true) and
// chat_template_kwargs (which may not redefine the variables above).
Result<ChatTemplateInputs> prepare_chat_template_inputs(const OrderedJson& request, bool keep_content_parts);

}  // namespace m2::text
