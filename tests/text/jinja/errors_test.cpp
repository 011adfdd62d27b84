// Template errors: syntax and runtime errors name the template, the line and
// the column; the messages repeat Jinja's wording where Jinja has one.
// Hostile templates (deep nesting, runaway recursion or loops) fail cleanly.
#include <gtest/gtest.h>

#include <string>

#include "jinja_test_util.h"

namespace m2::text::jinja {
namespace {

using testing::render;

std::string error_of(std::string_view source, std::string_view vars = testing::kVars) {
  auto out = render(source, vars);
  EXPECT_FALSE(out.ok()) << "rendered: " << (out.ok() ? out.value() : "");
  return out.ok() ? "" : out.status().message();
}

TEST(TemplateErrors, SyntaxErrorsNameLineAndColumn) {
  EXPECT_EQ(error_of("line one\n{{ 1 + }}"), "t: line 2, column 8: unexpected 'end of print statement'");
  EXPECT_EQ(error_of("a\nb\n  {{ 'unterminated }}"),
            "t: line 3, column 6: unexpected char \"'\" (unterminated string)");
  EXPECT_EQ(error_of("{{ (1, 2 }}"), "t: line 1, column 10: unexpected '}', expected ')'");
  EXPECT_EQ(error_of("{% if %}{% endif %}"),
            "t: line 1, column 7: Expected an expression, got 'end of statement block'");
  EXPECT_EQ(error_of("{{ x !y }}"), "t: line 1, column 6: unexpected char '!'");
}

TEST(TemplateErrors, UnclosedAndMisnestedBlocks) {
  EXPECT_EQ(error_of("{% for x in l %}\nbody"),
            "t: line 2, column 5: unexpected end of template. Jinja was looking for the following tags: 'endfor' or "
            "'else'. The innermost block that needs to be closed is 'for' (opened at line 1).");
  EXPECT_EQ(error_of("a\n{% if true %}{% endfor %}"),
            "t: line 2, column 17: Encountered unknown tag 'endfor'. The innermost block that needs to be closed is "
            "'if' (opened at line 2).");
  EXPECT_EQ(error_of("{% for x in l %}{% if x %}{% endfor %}"),
            "t: line 1, column 30: Encountered unknown tag 'endfor'. You probably made a nesting mistake. Jinja is "
            "expecting this tag, but currently looking for 'elif' or 'else' or 'endif'. The innermost block that "
            "needs to be closed is 'if' (opened at line 1).");
  EXPECT_EQ(error_of("{% do x %}"), "t: line 1, column 4: Encountered unknown tag 'do'.");
  EXPECT_EQ(error_of("{% break %}"), "t: line 1, column 4: 'break' outside loop");
  EXPECT_EQ(error_of("{% for x in l %}{% macro m() %}{% continue %}{% endmacro %}{% endfor %}"),
            "t: line 1, column 35: 'continue' outside loop");
  EXPECT_EQ(error_of("{% include 'x.j2' %}"),
            "t: line 1, column 4: the 'include' tag is not supported by m2cpp's chat-template interpreter");
  EXPECT_EQ(error_of("{% macro m(a=1, b) %}{% endmacro %}"),
            "t: line 1, column 18: non-default argument follows default argument");
  EXPECT_EQ(error_of("{% set 1 = 2 %}"), "t: line 1, column 8: can't assign to 'const'");
}

TEST(TemplateErrors, UnknownFiltersAndTests) {
  EXPECT_EQ(error_of("\n{{ l|nosuch }}"), "t: line 2, column 6: No filter named 'nosuch'.");
  EXPECT_EQ(error_of("{{ l is nosuch }}"), "t: line 1, column 6: No test named 'nosuch'.");
  // Inside {% if %} and inline ifs Jinja defers the error until it runs.
  auto soft = render("{% if false %}{{ l|nosuch }}{% endif %}{{ 1 if true else l|nosuch }}", testing::kVars);
  ASSERT_TRUE(soft.ok()) << soft.status().message();
  EXPECT_EQ(soft.value(), "1");
  EXPECT_EQ(error_of("{% if true %}{{ l|nosuch }}{% endif %}"),
            "t: line 1, column 19: No filter named 'nosuch' found (or it is not supported by m2cpp's chat-template "
            "interpreter).");
}

TEST(TemplateErrors, RuntimeErrorsNameTheLine) {
  EXPECT_EQ(error_of("ok\n{{ undefined_var.attr }}"), "t: line 2, column 17: 'undefined_var' is undefined");
  EXPECT_EQ(error_of("{% for p in people %}\n  {{ p.missing.deeper }}\n{% endfor %}"),
            "t: line 2, column 15: 'dict object' has no attribute 'missing'");
  EXPECT_EQ(error_of("{{ 'a' + 1 }}"), "t: line 1, column 4: can only concatenate str (not \"int\") to str");
  EXPECT_EQ(error_of("{{ 1 // 0 }}"), "t: line 1, column 4: integer division or modulo by zero");
  EXPECT_EQ(error_of("{{ [1, 'a']|sort }}"),
            "t: line 1, column 13: '<' not supported between instances of 'str' and 'int'");
  EXPECT_EQ(error_of("{% for a, b in [1] %}{% endfor %}"),
            "t: line 1, column 8: cannot unpack non-iterable int object");
  EXPECT_EQ(error_of("{{ x|tojson }}"), "t: line 1, column 6: Object of type Undefined is not JSON serializable");
  EXPECT_EQ(error_of("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}"),
            "t: line 1, column 35: macro 'm' takes not more than 1 argument(s)");
}

TEST(TemplateErrors, RaiseExceptionMessageIsKept) {
  EXPECT_EQ(error_of("a\nb\n{{ raise_exception('Conversation roles must alternate') }}"),
            "t: line 3, column 19: Conversation roles must alternate");
}

TEST(TemplateErrors, SandboxRefusesMutationLikeHuggingFace) {
  EXPECT_EQ(error_of("{% set x = [1] %}{{ x.append(2) }}"),
            "t: line 1, column 29: access to attribute 'append' of 'list' object is unsafe.");
  EXPECT_EQ(error_of("{{ d.update({}) }}"),
            "t: line 1, column 12: access to attribute 'update' of 'dict' object is unsafe.");
  EXPECT_EQ(error_of("{% set ns = namespace() %}{% set ns._x = 1 %}"),
            "t: line 1, column 34: Chat templates cannot store underscore-prefixed attributes on a namespace, but got "
            "'_x'. Please rename the attribute.");
  EXPECT_EQ(error_of("{% set d2 = {} %}{% set d2.a = 1 %}"),
            "t: line 1, column 25: cannot assign attribute on non-namespace object");
  EXPECT_EQ(error_of("{{ range(100001)|length }}"),
            "t: line 1, column 9: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
}

TEST(TemplateErrors, HostileTemplatesFailCleanly) {
  const std::string deep = "{{ " + std::string(1000, '(') + "1" + std::string(1000, ')') + " }}";
  EXPECT_NE(error_of(deep).find("nested too deeply"), std::string::npos);
  std::string blocks;
  for (int i = 0; i < 500; ++i) blocks += "{% if true %}";
  EXPECT_NE(error_of(blocks).find("nested too deeply"), std::string::npos);
  EXPECT_NE(error_of("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}").find("nested deeper than 200 calls"),
            std::string::npos);
  EXPECT_NE(error_of("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}")
                .find("loop iterations and macro calls"),
            std::string::npos);
  EXPECT_NE(error_of("{{ 'x' * 2 ** 40 }}").find("too large"), std::string::npos);
  EXPECT_NE(error_of("{{ 2 ** 64 }}").find("integer overflow"), std::string::npos);
}

TEST(TemplateErrors, InvalidUtf8SourceIsRefused) {
  auto t = Template::parse("ok \xff\xfe", "bad.jinja");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), "bad.jinja: invalid UTF-8 at byte 3 of the template");
}

}  // namespace
}  // namespace m2::text::jinja
