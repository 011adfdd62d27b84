// Continuing the final message instead of opening a new turn: vLLM's
// `continue_final_message` (transformers' apply_chat_template argument of the
// same name), and what the server does for an Anthropic assistant prefill.
// The conversation is rendered without the generation prompt and the text is
// cut right after the final message's text, so the end-of-turn marks the
// template writes after it (M2: `[e~[\n`) are gone and the model continues
// the message. As in transformers, the text is found by its last occurrence
// in the rendered prompt, as given or, when the template trims it, stripped
// of surrounding whitespace.
#pragma once

#include <string>
#include <string_view>

#include "util/json.h"
#include "util/status.h"

namespace m2::text {

// The text to continue in normalised template messages: the final message's
// content (a string, or its last text part), or, when that is empty, its
// `reasoning_content` (the model then continues its reasoning). Errors: no
// text to continue, or tool calls (a turn that ends in calls has nothing to
// continue).
Result<std::string> final_message_text(const OrderedJson& messages);

// `rendered` cut after the last occurrence of `final_text`; an error when the
// template did not render it.
Result<std::string> cut_after_final_message(std::string rendered, std::string_view final_text);

}  // namespace m2::text
