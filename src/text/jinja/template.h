// A compiled Jinja template: parse once, render many times (concurrently
// from several threads if wanted: rendering never mutates the Template).
//
// The environment is Hugging Face's chat-template environment
// (transformers.utils.chat_template_utils): ImmutableSandboxedEnvironment with
// trim_blocks, lstrip_blocks and loopcontrols; `tojson` is json.dumps with
// ensure_ascii=False; globals raise_exception, strftime_now, namespace,
// dict, range. Errors, from parsing and from rendering, read
// "<name>: line L, column C: message".
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/lexer.h"
#include "text/jinja/value.h"
#include "util/status.h"

namespace m2::text::jinja {

class Template {
 public:
  // `name` prefixes error messages (e.g. the template's file path).
  static Result<Template> parse(std::string_view source, std::string name,
                                const LexerOptions& options = LexerOptions());

  // Renders with the given top-level variables; later duplicates win.
  Result<std::string> render(const std::vector<std::pair<std::string, Value>>& vars) const;

  // Whether some {% for %} iterates `x.<attr>` or `x['<attr>']`.
  bool loops_over_attribute(std::string_view attr) const;
  const Program& program() const { return *program_; }
  const std::string& name() const { return name_; }

 private:
  std::shared_ptr<const Program> program_;
  std::shared_ptr<const std::vector<Value>> globals_;  // by slot
  std::string name_;
};

}  // namespace m2::text::jinja
