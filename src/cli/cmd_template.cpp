// `m2cpp template -m DIR --request REQ.json`: prints the prompt the server
// would build for an OpenAI chat-completions request — the checkpoint's chat
// template rendered as Hugging Face does, generation prompt included unless
// the request sets "add_generation_prompt": false. Only the prompt goes to
// stdout, byte for byte (no newline added); errors go to stderr.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "text/chat_request.h"
#include "text/chat_template.h"
#include "util/json.h"
#include "util/log.h"

namespace m2::cli {
namespace {

Result<std::string> read_request_text(const std::string& path) {
  if (path != "-") return read_text_file(path);
  std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  if (std::cin.bad()) return errorf("stdin: read error");
  return text;
}

Result<std::string> render(const std::string& model_dir, const std::string& request_path) {
  M2_ASSIGN_OR_RETURN(text::ChatTemplate tpl, text::ChatTemplate::load_from_dir(model_dir));
  M2_ASSIGN_OR_RETURN(std::string text, read_request_text(request_path));
  M2_ASSIGN_OR_RETURN(OrderedJson request,
                      text::parse_ordered_json(text, request_path == "-" ? "stdin" : request_path));
  return tpl.render_request(request);
}

Command make_template_command(CLI::App& parent) {
  auto* app = parent.add_subcommand("template", "Print the chat-template prompt for an OpenAI chat request");
  auto model_dir = std::make_shared<std::string>();
  auto request = std::make_shared<std::string>();
  app->add_option("-m,--model", *model_dir, "Model directory holding chat_template.jinja and/or tokenizer_config.json")
      ->required();
  app->add_option("--request", *request, "OpenAI chat-completions request body (JSON file, '-' for stdin)")->required();
  return {app, [model_dir, request]() -> int {
            auto prompt = render(*model_dir, *request);
            if (!prompt.ok()) {
              log_error("template: {}", prompt.status().message());
              return 1;
            }
            std::fwrite(prompt->data(), 1, prompt->size(), stdout);
            return std::fflush(stdout) == 0 ? 0 : 1;
          }};
}

}  // namespace
}  // namespace m2::cli

M2_REGISTER_COMMAND(template, 30, m2::cli::make_template_command);
