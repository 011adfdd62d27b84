// m2cpp run: chat with a model in the terminal. Interactive when stdin is a
// terminal (streams tokens, reasoning dimmed or hidden, /reset, /system,
// multi-line input with a trailing backslash or """ blocks, Ctrl-C stops a
// generation without quitting); with -p, or when stdin is not a terminal,
// answers once and exits. Without -m it uses the bundled demo model.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "engine/engine.h"
#include "text/assistant_output_parser.h"
#include "text/chat_template.h"
#include "text/tokenizer/tokenizer.h"

namespace m2::cli {
namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted = true; }

struct RunArgs {
  std::string prompt;
  std::string system;
  int max_tokens = 2048;
  std::optional<float> temperature, top_p;
  std::optional<int> top_k;
  std::optional<uint64_t> seed;
  bool hide_reasoning = false;
  std::string kv = "bf16";
};

struct Chat {
  LoadedModel loaded;
  std::unique_ptr<MiniMaxM2> model;
  std::unique_ptr<text::Tokenizer> tokenizer;
  std::optional<text::ChatTemplate> chat_template;
  std::unique_ptr<Engine> engine;
  SamplingParams params;
  int turn = 0;
};

Status open_chat(const ModelOptions& mo, const RunArgs& a, Chat* c) {
  M2_ASSIGN_OR_RETURN(c->tokenizer, text::Tokenizer::load_from_dir(mo.model));
  M2_ASSIGN_OR_RETURN(text::ChatTemplate t, text::ChatTemplate::load_from_dir(mo.model));
  c->chat_template.emplace(std::move(t));
  M2_ASSIGN_OR_RETURN(c->loaded, mo.load_on_backend());
  M2_ASSIGN_OR_RETURN(c->model, mo.make_model(*c->loaded.weights, *c->loaded.backend));
  if (!c->model) return Status();  // a node > 0: it ran node 0's steps
  EngineConfig ec;
  M2_ASSIGN_OR_RETURN(ec.kv_dtype, parse_kv_dtype(a.kv));
  M2_ASSIGN_OR_RETURN(ec.kv_cache_bytes,
                      mo.kv_cache_bytes(c->loaded, *c->model, 0, 512ll << 20, ec.scheduler.max_num_batched_tokens, 1));
  ec.scheduler.max_num_seqs = 1;
  M2_ASSIGN_OR_RETURN(c->engine, Engine::create(*c->model, c->tokenizer.get(), ec));
  c->params = default_sampling_params(mo.model);
  c->params.max_tokens = a.max_tokens;
  if (a.temperature) c->params.temperature = *a.temperature;
  if (a.top_p) c->params.top_p = *a.top_p;
  if (a.top_k) c->params.top_k = *a.top_k;
  c->params.seed = a.seed;
  return Status();
}

// Streams one assistant turn for `messages` and appends it to them.
Status answer(Chat& c, OrderedJson& messages, bool hide_reasoning, bool tty) {
  OrderedJson request = {{"messages", messages}};
  M2_ASSIGN_OR_RETURN(std::string prompt, c.chat_template->render_request(request));
  M2_ASSIGN_OR_RETURN(std::vector<int32_t> ids, c.tokenizer->encode(prompt));
  const std::string id = "turn-" + std::to_string(c.turn++);
  M2_RETURN_IF_ERROR(c.engine->add_request(id, ids, c.params));

  text::AssistantParseOptions po;
  po.parse_tool_calls = false;  // a plain chat has no tools
  text::AssistantStreamParser parser(po);
  std::string reasoning, content;
  bool in_reasoning = false, said_answer = false;
  const char* dim = tty ? "\x1b[2m" : "";
  const char* reset = tty ? "\x1b[0m" : "";
  auto show = [&](const text::AssistantDelta& d) {
    if (!d.reasoning_content.empty()) {
      reasoning += d.reasoning_content;
      if (!hide_reasoning) {
        if (!in_reasoning) std::fputs(tty ? dim : "<think>\n", stdout), in_reasoning = true;
        std::fputs(d.reasoning_content.c_str(), stdout);
      }
    }
    if (!d.content.empty()) {
      content += d.content;
      if (in_reasoning) std::fputs(tty ? reset : "\n</think>", stdout), in_reasoning = false;
      if (!said_answer && !hide_reasoning && !reasoning.empty()) std::fputs("\n\n", stdout);
      said_answer = true;
      std::fputs(d.content.c_str(), stdout);
    }
    std::fflush(stdout);
  };
  g_interrupted = false;
  bool stopped = false;
  while (c.engine->has_unfinished()) {
    if (g_interrupted) {
      c.engine->abort(id);
      stopped = true;
      break;
    }
    M2_ASSIGN_OR_RETURN(auto outs, c.engine->step());
    for (const RequestOutput& o : outs) {
      show(parser.feed(o.new_text));
      if (o.finished) show(parser.finish());
    }
  }
  if (in_reasoning) std::fputs(tty ? reset : "\n</think>", stdout);
  std::fputs(stopped ? "\n[stopped]\n" : "\n", stdout);
  std::fflush(stdout);
  OrderedJson msg = {{"role", "assistant"}, {"content", content}};
  if (!reasoning.empty()) msg["reasoning_content"] = reasoning;
  messages.push_back(std::move(msg));
  return Status();
}

OrderedJson fresh_messages(const std::string& system) {
  OrderedJson m = OrderedJson::array();
  if (!system.empty()) m.push_back({{"role", "system"}, {"content", system}});
  return m;
}

// One user message from the terminal: lines ending in '\' continue, and a
// line of """ opens a block that runs to the next """. False at end of input.
bool read_user_message(std::string* out) {
  out->clear();
  std::string line;
  bool block = false;
  for (;;) {
    std::fputs(out->empty() && !block ? "> " : ". ", stdout);
    std::fflush(stdout);
    if (!std::getline(std::cin, line)) {
      if (g_interrupted && std::cin.eof() == false) {  // Ctrl-C at the prompt: start over
        std::cin.clear();
        g_interrupted = false;
        out->clear();
        std::fputs("\n", stdout);
        continue;
      }
      return !out->empty();
    }
    if (line == "\"\"\"") {
      if (block) return true;
      block = true;
      continue;
    }
    if (block) {
      *out += line + "\n";
      continue;
    }
    if (!line.empty() && line.back() == '\\') {
      line.pop_back();
      *out += line + "\n";
      continue;
    }
    *out += line;
    return true;
  }
}

int run_chat(ModelOptions mo, const RunArgs& a) {
  auto fail = [](const Status& s) { return std::fprintf(stderr, "error: %s\n", s.message().c_str()), 1; };
  if (mo.model.empty()) mo.model = default_model_dir();
  if (mo.model.empty())
    return fail(errorf("no -m given and no bundled model found (models/m2-demo); set -m DIR or M2CPP_MODEL"));
  Chat chat;
  if (Status s = open_chat(mo, a, &chat); !s.ok()) return fail(s);
  if (!chat.model) return 0;  // a node > 0: it ran node 0's steps
  const bool tty_out = isatty(STDOUT_FILENO);
  OrderedJson messages = fresh_messages(a.system);

  if (!a.prompt.empty() || !isatty(STDIN_FILENO)) {  // one answer, then exit
    std::string prompt = a.prompt;
    if (prompt.empty()) prompt.assign(std::istreambuf_iterator<char>(std::cin), {});
    messages.push_back({{"role", "user"}, {"content", prompt}});
    std::signal(SIGINT, on_sigint);
    Status s = answer(chat, messages, a.hide_reasoning, tty_out);
    return s.ok() ? 0 : fail(s);
  }

  struct sigaction sa {};
  sa.sa_handler = on_sigint;  // no SA_RESTART: Ctrl-C interrupts a blocking read
  sigaction(SIGINT, &sa, nullptr);
  std::printf("m2cpp chat with %s. /reset clears the conversation, /system TEXT sets the system prompt, "
              "/exit or Ctrl-D quits; Ctrl-C stops a generation. End a line with \\ or use \"\"\" for more lines.\n",
              mo.model.c_str());
  std::string system = a.system, line;
  while (read_user_message(&line)) {
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      messages = fresh_messages(system);
      std::puts("(conversation cleared)");
      continue;
    }
    if (line.rfind("/system", 0) == 0) {
      system = line.size() > 8 ? line.substr(8) : "";
      messages = fresh_messages(system);
      std::puts(system.empty() ? "(system prompt cleared; conversation cleared)" : "(system prompt set; conversation cleared)");
      continue;
    }
    if (line.empty()) continue;
    messages.push_back({{"role", "user"}, {"content", line}});
    if (Status s = answer(chat, messages, a.hide_reasoning, tty_out); !s.ok()) {
      std::fprintf(stderr, "error: %s\n", s.message().c_str());
      messages.erase(messages.size() - 1);
    }
  }
  std::puts("");
  return 0;
}

Command make_run(CLI::App& parent) {
  auto* app = parent.add_subcommand("run", "Chat in the terminal (or answer one prompt with -p)");
  auto mo = std::make_shared<ModelOptions>();
  auto a = std::make_shared<RunArgs>();
  mo->add_to(app, /*model_required=*/false);
  mo->add_parallel_to(app);
  app->add_option("-p,--prompt", a->prompt, "Answer this prompt once and exit");
  app->add_option("--system", a->system, "System prompt (default: the template's)");
  app->add_option("--max-tokens", a->max_tokens, "Tokens per answer, reasoning included");
  app->add_option("--temperature", a->temperature, "Sampling temperature (default from the model card / generation_config.json)");
  app->add_option("--top-p", a->top_p, "Nucleus sampling mass");
  app->add_option("--top-k", a->top_k, "Keep the k most likely tokens");
  app->add_option("--seed", a->seed, "Seed for reproducible sampling");
  app->add_flag("--hide-reasoning", a->hide_reasoning, "Do not print the <think> reasoning");
  app->add_option("--kv-cache-dtype", a->kv, "f32, bf16 or fp8")->check(CLI::IsMember({"f32", "bf16", "fp8"}));
  return {app, [mo, a] { return run_chat(*mo, *a); }};
}

}  // namespace

M2_REGISTER_COMMAND(run, 5, make_run);

}  // namespace m2::cli
