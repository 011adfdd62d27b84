// The output-format fields (server/structured_output.*): which field gives
// which grammar, conflicts and bad values as errors naming the field, and
// the M2 tool-call grammars: a call the template would render is accepted,
// a call whose arguments break the tool's schema is not.
#include "server/structured_output.h"

#include <gtest/gtest.h>

#include "tiny_chat_test_base.h"

namespace m2::server {
namespace {

OrderedJson body(const char* json) { return OrderedJson::parse(json); }

TEST(OutputFormat, FieldsGiveTheirGrammar) {
  using Kind = ConstraintSource::Kind;
  auto none = read_output_format(body(R"({"response_format": {"type": "text"}})"));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto obj = read_output_format(body(R"({"response_format": {"type": "json_object"}})"));
  ASSERT_TRUE(obj.ok() && obj->has_value());
  EXPECT_EQ((*obj)->source.kind, Kind::kJsonSchema);
  EXPECT_EQ(OrderedJson::parse((*obj)->source.text), OrderedJson::parse(R"({"type":"object"})"));
  auto js = read_output_format(
      body(R"({"response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "integer"}}}})"));
  ASSERT_TRUE(js.ok() && js->has_value());
  EXPECT_EQ(OrderedJson::parse((*js)->source.text), OrderedJson::parse(R"({"type":"integer"})"));
  auto as_string = read_output_format(body(R"({"guided_json": "{\"type\": \"boolean\"}"})"));
  ASSERT_TRUE(as_string.ok() && as_string->has_value());
  EXPECT_EQ(OrderedJson::parse((*as_string)->source.text), OrderedJson::parse(R"({"type":"boolean"})"));
  auto re = read_output_format(body(R"({"structured_outputs": {"regex": "a+"}})"));
  ASSERT_TRUE(re.ok() && re->has_value());
  EXPECT_EQ((*re)->source.kind, Kind::kRegex);
  EXPECT_EQ((*re)->field, "structured_outputs.regex");
  auto choice = read_output_format(body(R"({"guided_choice": ["a", "b\"c", "d\\e\n"]})"));
  ASSERT_TRUE(choice.ok() && choice->has_value());
  EXPECT_EQ((*choice)->source.kind, Kind::kGrammar);
  EXPECT_EQ((*choice)->source.text, R"(root ::= "a" | "b\"c" | "d\\e\n")");
  auto gbnf = read_output_format(body(R"({"grammar": "root ::= \"x\""})"));
  ASSERT_TRUE(gbnf.ok() && gbnf->has_value());
  EXPECT_EQ((*gbnf)->field, "grammar");
  auto ignored = read_output_format(body(R"({"guided_decoding_backend": "xgrammar"})"));
  ASSERT_TRUE(ignored.ok());
  EXPECT_FALSE(ignored->has_value());
}

TEST(OutputFormat, BadValuesNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"response_format": {"type": "yaml"}})", "response_format.type"},
      {R"({"response_format": "json"})", "response_format"},
      {R"({"response_format": {"type": "json_schema"}})", "response_format.json_schema"},
      {R"({"response_format": {"type": "json_schema", "json_schema": {"schema": 3}}})", "response_format.json_schema.schema"},
      {R"({"guided_regex": 5})", "guided_regex"},
      {R"({"guided_regex": ""})", "guided_regex"},
      {R"({"guided_choice": ["a", 1]})", "guided_choice[1]"},
      {R"({"guided_json": "not json"})", "guided_json"},
      {R"({"structured_outputs": {"json_object": 1}})", "structured_outputs.json_object"},
      {R"({"structured_outputs": {"structural_tag": "x"}})", "structured_outputs.structural_tag"},
      {R"({"guided_json": {}, "grammar": "root ::= \"a\""})", "grammar"},
      {R"({"response_format": {"type": "json_object"}, "guided_regex": "a"})", "guided_regex"},
      {R"({"guided_whitespace_pattern": " "})", "guided_whitespace_pattern"},
  };
  for (const auto& [json, field] : cases) {
    auto r = read_output_format(body(json));
    ASSERT_FALSE(r.ok()) << json;
    EXPECT_NE(r.status().message().find(field), std::string::npos) << json << " -> " << r.status().message();
  }
}

class ToolGrammarTest : public TinyChatTest {
 protected:
  void SetUp() override {
    TinyChatTest::SetUp();
    auto c = ConstraintCompiler::create(*tokenizer_, 4096, {*tokenizer_->token_to_id("[e~[")});
    ASSERT_TRUE(c.ok()) << c.status().message();
    compiler_ = std::move(*c);
    ctx_.constraints = compiler_.get();
  }

  // `text` accepted token by token and complete (EOS allowed) under `source`.
  bool accepts(const ConstraintSource& source, const std::string& text) {
    auto c = compile_constraint(ctx_, source, "tools");
    EXPECT_TRUE(c.ok()) << c.status().message() << "\n" << source.text;
    if (!c.ok()) return false;
    ConstraintMatcher m(*c);
    auto ids = tokenizer_->encode(text);
    for (int32_t id : *ids)
      if (!m.accept(id)) return false;
    std::vector<uint32_t> mask(static_cast<size_t>(constraint_mask_words(4096)));
    m.fill_mask(mask);
    const int32_t eos = *tokenizer_->token_to_id("[e~[");
    return (mask[eos / 32] >> (eos % 32)) & 1u;
  }

  ToolRequest tools(const char* json) {
    auto r = parse_tool_request(body(json));
    EXPECT_TRUE(r.ok()) << r.status().message();
    return *r;
  }

  std::unique_ptr<ConstraintCompiler> compiler_;
};

constexpr const char* kTools = R"("tools": [
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
   "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city", "days"]}}},
  {"type": "function", "function": {"name": "ping", "strict": true, "parameters": {"type": "object",
   "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9}}, "required": ["n"]}}}])";

TEST_F(ToolGrammarTest, ForcedCallFollowsTheSchema) {
  const ToolRequest req = tools((std::string("{") + kTools + R"(, "tool_choice": "required"})").c_str());
  const auto g = forced_tool_call_grammar(req);
  ASSERT_TRUE(g.has_value());
  // As the template renders a call (m2-spec §5): the parser's format.
  const std::string call =
      "\n\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Paris, \"FR\"</parameter>\n"
      "<parameter name=\"days\">3</parameter>\n</invoke>\n</minimax:tool_call>";
  EXPECT_TRUE(accepts(*g, call));
  EXPECT_TRUE(accepts(*g, "\n\n<minimax:tool_call>\n<invoke name=\"ping\">\n<parameter name=\"n\">4</parameter>\n"
                          "</invoke>\n<invoke name=\"ping\">\n<parameter name=\"n\">0</parameter>\n</invoke>\n"
                          "</minimax:tool_call>"));
  EXPECT_FALSE(accepts(*g, "\n\n<minimax:tool_call>\n<invoke name=\"ping\">\n<parameter name=\"n\"> 4</parameter>\n"
                           "</invoke>\n</minimax:tool_call>"));  // blanks around a value
  EXPECT_FALSE(accepts(*g, "\n\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"days\">x"
                           "</parameter>\n</invoke>\n</minimax:tool_call>"));  // not an integer, city missing
  EXPECT_FALSE(accepts(*g, "\n\n<minimax:tool_call>\n<invoke name=\"ping\">\n<parameter name=\"n\">12</parameter>\n"
                           "</invoke>\n</minimax:tool_call>"));  // above the maximum
  EXPECT_FALSE(accepts(*g, "\n\n<minimax:tool_call>\n<invoke name=\"other\">\n</invoke>\n</minimax:tool_call>"));
  EXPECT_FALSE(accepts(*g, "The answer."));
}

TEST_F(ToolGrammarTest, StringLengthsCountCharacters) {
  const ToolRequest req = tools(R"({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
      "type": "object", "properties": {"s": {"type": "string", "minLength": 2, "maxLength": 3}}, "required": ["s"]}}}],
      "tool_choice": "required"})");
  const auto g = forced_tool_call_grammar(req);
  ASSERT_TRUE(g.has_value());
  auto call = [](const std::string& v) {
    return "\n\n<minimax:tool_call>\n<invoke name=\"f\">\n<parameter name=\"s\">" + v +
           "</parameter>\n</invoke>\n</minimax:tool_call>";
  };
  EXPECT_TRUE(accepts(*g, call("ab")));
  EXPECT_TRUE(accepts(*g, call("\xe5\xb9\xb4\xe5\xb9\xb4\xe5\xb9\xb4")));  // three characters, nine bytes
  EXPECT_TRUE(accepts(*g, call("a\nb")));
  EXPECT_FALSE(accepts(*g, call("a")));
  EXPECT_FALSE(accepts(*g, call("abcd")));
}

TEST_F(ToolGrammarTest, NamedAndSingleCall) {
  const ToolRequest req = tools((std::string("{") + kTools +
                                 R"(, "tool_choice": {"type": "function", "function": {"name": "ping"}},
                                    "parallel_tool_calls": false})")
                                    .c_str());
  const auto g = forced_tool_call_grammar(req);
  ASSERT_TRUE(g.has_value());
  const std::string one = "\n\n<minimax:tool_call>\n<invoke name=\"ping\">\n<parameter name=\"n\">4</parameter>\n</invoke>\n";
  EXPECT_TRUE(accepts(*g, one + "</minimax:tool_call>"));
  EXPECT_FALSE(accepts(*g, one + "<invoke name=\"ping\">\n<parameter name=\"n\">4</parameter>\n</invoke>\n"
                                 "</minimax:tool_call>"));
  EXPECT_FALSE(accepts(*g, "\n\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">P"
                           "</parameter>\n<parameter name=\"days\">3</parameter>\n</invoke>\n</minimax:tool_call>"));
}

TEST_F(ToolGrammarTest, StrictToolsUnderAuto) {
  const ToolRequest req = tools((std::string("{") + kTools + "}").c_str());
  auto g = strict_tool_call_grammar(req);
  ASSERT_TRUE(g.ok() && g->has_value());
  EXPECT_TRUE(accepts(**g, "Let me check."));
  EXPECT_TRUE(accepts(**g, "ok <minimax:tool_call>\n<invoke name=\"ping\">\n<parameter name=\"n\">7</parameter>\n"
                           "</invoke>\n</minimax:tool_call>"));
  EXPECT_FALSE(accepts(**g, "<minimax:tool_call>\n<invoke name=\"ping\">\n<parameter name=\"n\">77</parameter>\n"
                            "</invoke>\n</minimax:tool_call>"));
  // The non-strict tool: any parameters.
  EXPECT_TRUE(accepts(**g, "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"zip\">1</parameter>\n"
                           "</invoke>\n</minimax:tool_call>"));
  // No strict tool: no grammar.
  auto plain = strict_tool_call_grammar(tools(R"({"tools": [{"type": "function", "function": {"name": "a"}}]})"));
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->has_value());
}

}  // namespace
}  // namespace m2::server
