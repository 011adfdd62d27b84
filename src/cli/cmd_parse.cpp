// m2cpp parse: the OpenAI assistant message the server returns for a raw
// model output (reasoning split, tool calls typed by the request's schemas).
// With --stream N it prints instead the stream deltas the server sends when
// the output arrives in N-byte pieces, one `choices[0].delta` object per
// line, then {"finish_reason": ...}.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "text/assistant_output_parser.h"
#include "util/json.h"

namespace m2::cli {
namespace {

struct ParseArgs {
  std::string model_dir;  // accepted for symmetry with the server; the parser needs no model files
  std::string request_path;
  std::string text_path;
  std::string reasoning = "split";
  uint64_t seed = 0;
  bool have_seed = false;
  size_t stream_chunk = 0;
};

void print_json_line(const OrderedJson& j, int indent) {
  const std::string s = j.dump(indent, ' ', false, OrderedJson::error_handler_t::replace);
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fputc('\n', stdout);
}

int run_parse(const ParseArgs& args) {
  auto request = read_json_file(args.request_path);
  if (!request.ok()) return fmt::print(stderr, "error: --request: {}\n", request.status().message()), 1;
  if (!request->is_object()) {
    return fmt::print(stderr, "error: --request: {}: expected a JSON object (a chat-completions body), got {}\n",
                      args.request_path, json_type_name(*request)),
           1;
  }
  auto raw = read_text_file(args.text_path);
  if (!raw.ok()) return fmt::print(stderr, "error: --text: {}\n", raw.status().message()), 1;

  text::AssistantParseOptions options = text::options_from_request(*request);
  options.reasoning =
      args.reasoning == "append-think" ? text::ReasoningMode::kAppendThink : text::ReasoningMode::kSplit;
  if (args.have_seed) options.id_seed = args.seed;

  if (args.stream_chunk == 0) {
    const text::AssistantMessage message = text::parse_assistant_output(*raw, options);
    print_json_line(text::assistant_message_json(message, options.reasoning), 2);
    return 0;
  }
  text::AssistantStreamParser parser(options);
  const std::string& bytes = *raw;
  for (size_t pos = 0; pos < bytes.size(); pos += args.stream_chunk) {
    const text::AssistantDelta delta = parser.feed(std::string_view(bytes).substr(pos, args.stream_chunk));
    if (!delta.empty()) print_json_line(text::assistant_delta_json(delta), -1);
  }
  const text::AssistantDelta last = parser.finish();
  if (!last.empty()) print_json_line(text::assistant_delta_json(last), -1);
  if (parser.has_incomplete_tool_call()) {
    fmt::print(stderr, "warning: the output ends inside a tool call; its arguments are incomplete\n");
  }
  print_json_line({{"finish_reason", parser.has_tool_calls() ? "tool_calls" : "stop"}}, -1);
  return 0;
}

Command make_parse(CLI::App& parent) {
  auto* app =
      parent.add_subcommand("parse", "The OpenAI assistant message for a raw model output (reasoning, tool calls)");
  auto args = std::make_shared<ParseArgs>();
  app->add_option("-m,--model", args->model_dir, "Model directory (optional; the parser needs no model files)");
  app->add_option("--request", args->request_path,
                  "OpenAI chat-completions request body (JSON); its tools give the schemas")
      ->required();
  app->add_option("--text", args->text_path, "Raw model output (the text after the generation prompt)")->required();
  app->add_option("--reasoning", args->reasoning,
                  "split: reasoning_content + content; append-think: '<think>' + all in content")
      ->check(CLI::IsMember({"split", "append-think"}));
  auto* seed = app->add_option("--seed", args->seed, "Seed of the tool-call ids (random without it)");
  app->add_option("--stream", args->stream_chunk, "Print the stream deltas for N-byte pieces instead");
  return {app, [args, seed] {
            args->have_seed = seed->count() > 0;
            return run_parse(*args);
          }};
}

}  // namespace

M2_REGISTER_COMMAND(parse, 60, make_parse);

}  // namespace m2::cli
