// m2cpp tokenize: text -> token ids, or ids -> text with --decode.
//
//   m2cpp tokenize (-m DIR | --tokenizer DIR|FILE) (--text S | --file F) [--add-special-tokens]
//       prints the ids as one JSON array (no BOS: the chat template writes it)
//   m2cpp tokenize ... --decode (--text '[1,2]' | --file F) [--skip-special-tokens] [--incremental]
//       prints the text as one JSON string
//   m2cpp tokenize ... --jsonl F|-
//       batch mode: each input line is one JSON value (a string to encode,
//       or with --decode an array of ids), each output line the result;
//       thousands of documents cost one process (differential tests use it)
//
// --incremental decodes through the streaming detokenizer, one id at a
// time, and prints the concatenated deltas (equal to the plain decode).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include "cli/commands.h"
#include "text/tokenizer/incremental_detokenizer.h"
#include "text/tokenizer/tokenizer.h"
#include "util/json.h"
#include "util/log.h"

namespace m2::cli {
namespace {

struct TokenizeOptions {
  std::string model_dir;
  std::string tokenizer;
  std::string text;
  std::string file;
  std::string jsonl;
  bool decode = false;
  bool skip_special_tokens = false;
  bool add_special_tokens = false;
  bool incremental = false;
};

Result<std::unique_ptr<text::Tokenizer>> load(const TokenizeOptions& o) {
  if (!o.model_dir.empty()) return text::Tokenizer::load_from_dir(o.model_dir);
  if (o.tokenizer.size() > 5 && o.tokenizer.ends_with(".json")) return text::Tokenizer::from_json_file(o.tokenizer);
  return text::Tokenizer::load_from_dir(o.tokenizer);
}

std::string ids_json(const std::vector<int32_t>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(ids[i]);
  }
  return out + "]";
}

Result<std::vector<int32_t>> parse_ids(std::string_view json, std::string_view what) {
  M2_ASSIGN_OR_RETURN(Json j, parse_json(json, what));
  if (!j.is_array()) return errorf("{}: expected a JSON array of token ids", what);
  std::vector<int32_t> ids;
  ids.reserve(j.size());
  for (size_t i = 0; i < j.size(); ++i) {
    if (!j[i].is_number_integer() || j[i].get<int64_t>() < 0 || j[i].get<int64_t>() > INT32_MAX) {
      return errorf("{}: element {} is not a token id", what, i);
    }
    ids.push_back(j[i].get<int32_t>());
  }
  return ids;
}

Result<std::string> decode_ids(const text::Tokenizer& tok, const std::vector<int32_t>& ids, const TokenizeOptions& o) {
  if (!o.incremental) return tok.decode(ids, o.skip_special_tokens);
  text::IncrementalDetokenizer stream(tok, o.skip_special_tokens);
  std::string out;
  for (int32_t id : ids) {
    M2_ASSIGN_OR_RETURN(std::string delta, stream.push(id));
    out += delta;
  }
  M2_ASSIGN_OR_RETURN(std::string rest, stream.finish());
  return out + rest;
}

// One input (text, or a JSON array of ids with --decode) -> one JSON line.
Result<std::string> process(const text::Tokenizer& tok, std::string_view input, std::string_view what,
                            const TokenizeOptions& o) {
  if (o.decode) {
    M2_ASSIGN_OR_RETURN(auto ids, parse_ids(input, what));
    M2_ASSIGN_OR_RETURN(std::string decoded, decode_ids(tok, ids, o));
    return Json(decoded).dump(-1, ' ', false, Json::error_handler_t::strict);
  }
  auto ids = tok.encode(input, o.add_special_tokens);
  if (!ids.ok()) return ids.status().with_context(what);
  return ids_json(ids.value());
}

Status run_jsonl(const text::Tokenizer& tok, const TokenizeOptions& o) {
  std::ifstream file;
  if (o.jsonl != "-") {
    file.open(o.jsonl, std::ios::binary);
    if (!file) return errorf("{}: cannot open", o.jsonl);
  }
  std::istream& in = o.jsonl == "-" ? std::cin : file;
  std::string line, out;
  for (size_t n = 1; std::getline(in, line); ++n) {
    const std::string what = fmt::format("{}:{}", o.jsonl, n);
    std::string input;
    if (o.decode) {
      input = line;
    } else {
      M2_ASSIGN_OR_RETURN(Json j, parse_json(line, what));
      if (!j.is_string()) return errorf("{}: expected a JSON string", what);
      input = j.get<std::string>();
    }
    M2_ASSIGN_OR_RETURN(std::string result, process(tok, input, what, o));
    out += result;
    out += '\n';
    if (out.size() > (1 << 20)) {
      std::fwrite(out.data(), 1, out.size(), stdout);
      out.clear();
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return {};
}

Status run(const TokenizeOptions& o) {
  M2_ASSIGN_OR_RETURN(auto tok, load(o));
  if (!o.jsonl.empty()) return run_jsonl(*tok, o);
  std::string input = o.text;
  std::string what = "--text";
  if (!o.file.empty()) {
    M2_ASSIGN_OR_RETURN(input, read_text_file(o.file));
    what = o.file;
  }
  M2_ASSIGN_OR_RETURN(std::string result, process(*tok, input, what, o));
  result += '\n';
  std::fwrite(result.data(), 1, result.size(), stdout);
  return {};
}

Command make_tokenize(CLI::App& parent) {
  auto o = std::make_shared<TokenizeOptions>();
  CLI::App* app = parent.add_subcommand("tokenize", "Encode text to token ids (JSON array), or decode ids (--decode)");
  auto* model =
      app->add_option("-m,--model", o->model_dir, "Checkpoint directory (tokenizer.json, tokenizer_config.json)");
  auto* tokenizer =
      app->add_option("--tokenizer", o->tokenizer, "Directory with tokenizer.json, or a tokenizer.json file");
  model->excludes(tokenizer);
  auto* text = app->add_option("--text", o->text, "Input text (with --decode: a JSON array of ids)");
  auto* file = app->add_option("--file", o->file, "Read the input from a file");
  auto* jsonl = app->add_option("--jsonl", o->jsonl, "Batch mode: one JSON value per line of this file ('-' = stdin)");
  text->excludes(file)->excludes(jsonl);
  file->excludes(jsonl);
  app->add_flag("--decode", o->decode, "Decode ids to text");
  app->add_flag("--skip-special-tokens", o->skip_special_tokens, "With --decode: drop special tokens");
  app->add_flag("--add-special-tokens", o->add_special_tokens,
                "Apply the tokenizer's post-processor (e.g. BOS) as HF add_special_tokens=True");
  app->add_flag("--incremental", o->incremental, "With --decode: decode through the streaming detokenizer");
  return {app, [o, model, tokenizer, text, file, jsonl] {
            if (!*model && !*tokenizer) {
              log_error("tokenize: give -m DIR or --tokenizer DIR");
              return 2;
            }
            if (!*text && !*file && !*jsonl) {
              log_error("tokenize: give --text, --file or --jsonl");
              return 2;
            }
            Status s = run(*o);
            if (!s.ok()) {
              log_error("tokenize: {}", s.message());
              return 1;
            }
            return 0;
          }};
}

}  // namespace

M2_REGISTER_COMMAND(tokenize, 30, make_tokenize);

}  // namespace m2::cli
