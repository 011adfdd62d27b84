// The tool fields of a chat request (tool_request.h) and what they do to the
// prompt: tools not rendered under tool_choice none, allowed_tools rendering
// only its subset, the legacy functions / function_call, parallel_tool_calls,
// and the first-call stop on the engine job.
#include <gtest/gtest.h>

#include "server/chat_prompt.h"
#include "server/tool_request.h"
#include "tiny_chat_test_base.h"

namespace m2::server {
namespace {


OrderedJson J(const std::string& text) { return OrderedJson::parse(text); }

const std::string kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"days": {"type": "integer"}}}}},
  {"type": "function", "function": {"name": "write_file", "description": "Write"}}])";

OrderedJson with_tools(const std::string& extra) {
  return J(R"({"messages": [{"role": "user", "content": "x"}], "tools": )" + kTools +
           (extra.empty() ? "" : ", " + extra) + "}");
}

using Choice = ToolRequest::Choice;

TEST(ToolRequest, ChoicesAndWhatTheyAllow) {
  auto a = parse_tool_request(with_tools(""));
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->choice, Choice::kAuto);
  EXPECT_FALSE(a->allowed.has_value());
  EXPECT_EQ(a->rendered.size(), 2u);
  EXPECT_TRUE(a->parallel);

  auto none = parse_tool_request(with_tools(R"("tool_choice": "none")"));
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->choice, Choice::kNone);
  EXPECT_TRUE(none->rendered.is_null()) << "tool_choice none: no tools in the prompt";
  EXPECT_TRUE(none->allowed->empty());
  EXPECT_EQ(none->tools.size(), 2u);

  auto named = parse_tool_request(with_tools(R"("tool_choice": {"type": "function", "function": {"name": "write_file"}},
                                                 "parallel_tool_calls": false)"));
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(named->choice, Choice::kNamed);
  EXPECT_EQ(named->forced_name, "write_file");
  EXPECT_EQ(*named->allowed, text::ToolNameSet{"write_file"});
  EXPECT_EQ(named->rendered.size(), 2u);
  EXPECT_FALSE(named->parallel);

  auto subset = parse_tool_request(with_tools(
      R"("tool_choice": {"type": "allowed_tools", "allowed_tools": {"mode": "required",
         "tools": [{"type": "function", "function": {"name": "get_weather"}}]}})"));
  ASSERT_TRUE(subset.ok()) << subset.status().message();
  EXPECT_EQ(subset->choice, Choice::kRequired);
  EXPECT_EQ(*subset->allowed, text::ToolNameSet{"get_weather"});
  ASSERT_EQ(subset->rendered.size(), 1u);
  EXPECT_EQ(subset->rendered[0]["function"]["name"], "get_weather");

  auto no_tools = parse_tool_request(J(R"({"messages": [], "tool_choice": "auto"})"));
  ASSERT_TRUE(no_tools.ok());
  EXPECT_EQ(no_tools->choice, Choice::kNone);
}

TEST(ToolRequest, LegacyFunctionsBecomeToolsWithOneCall) {
  auto r = parse_tool_request(J(R"({"functions": [{"name": "f", "parameters": {"type": "object"}}],
                                    "function_call": {"name": "f"}})"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->legacy_functions);
  EXPECT_FALSE(r->parallel) << "the legacy API answers one function_call";
  EXPECT_EQ(r->tools, J(R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])"));
  EXPECT_EQ(r->choice, Choice::kNamed);
  auto none = parse_tool_request(J(R"({"functions": [{"name": "f"}], "function_call": "none"})"));
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->choice, Choice::kNone);
}

TEST(ToolRequest, ErrorsNameTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"tools": {}})", "'tools' must be an array"},
      {R"({"tools": [{"type": "custom", "custom": {"name": "x"}}]})", "'tools[0].type'"},
      {R"({"tools": [{"type": "function", "function": {"name": ""}}]})", "'tools[0].function.name'"},
      {R"({"tools": [{"type": "function", "function": {"name": "f", "parameters": 3}}]})",
       "tools[0].function.parameters"},
      {R"({"tools": [], "functions": []})", "give one of them"},
      {R"({"function_call": "auto"})", "'function_call' needs 'functions'"},
      {R"({"functions": [{"name": "f"}], "function_call": "required"})", "'function_call' must be none, auto"},
      {R"({"functions": [{"name": "f"}], "function_call": {"name": "g"}})", "not in 'functions'"},
      {R"({"tool_choice": "required"})", "no 'tools' are given"},
      {R"({"tools": TOOLS, "tool_choice": "sometimes"})", "'tool_choice' must be none, auto, required"},
      {R"({"tools": TOOLS, "tool_choice": 3})", "'tool_choice' must be a string or an object"},
      {R"({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}})", "not in 'tools'"},
      {R"({"tools": TOOLS, "tool_choice": {"type": "function"}})", "needs a 'function' object"},
      {R"({"tools": TOOLS, "tool_choice": {"type": 1}})", "'tool_choice.type' must be"},
      {R"({"tools": TOOLS, "tool_choice": {"type": "allowed_tools", "allowed_tools": {"mode": "any", "tools": []}}})",
       "'tool_choice.allowed_tools.mode'"},
      {R"({"tools": TOOLS, "tool_choice": {"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": []}}})",
       "must not be empty"},
      {R"({"tools": TOOLS, "tool_choice": {"type": "allowed_tools", "allowed_tools": {"mode": "auto",
          "tools": [{"type": "function", "function": {"name": "nope"}}]}}})", "'tool_choice.allowed_tools.tools[0]'"},
      {R"({"tools": TOOLS, "parallel_tool_calls": "no"})", "'parallel_tool_calls' must be a boolean"},
  };
  for (auto [body, message] : cases) {
    if (auto at = body.find("TOOLS"); at != std::string::npos) body.replace(at, 5, kTools);
    auto r = parse_tool_request(J(body));
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_NE(r.status().message().find(message), std::string::npos) << body << " -> " << r.status().message();
  }
}

class ChatToolsTest : public TinyChatTest {
 protected:
  Result<ChatPrompt> build(const OrderedJson& body) { return build_chat_prompt(body, *template_, *tokenizer_); }
};

TEST_F(ChatToolsTest, ToolChoiceNoneRendersNoTools) {
  auto none = build(with_tools(R"("tool_choice": "none")"));
  ASSERT_TRUE(none.ok()) << none.status().message();
  auto plain = build(J(R"({"messages": [{"role": "user", "content": "x"}]})"));
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(none->text, plain->text);
  EXPECT_TRUE(none->parse.parse_tool_calls);
  EXPECT_TRUE(none->parse.allowed_tools->empty());
  auto subset = build(with_tools(R"("tool_choice": {"type": "allowed_tools", "allowed_tools": {"mode": "auto",
                                    "tools": [{"type": "function", "function": {"name": "write_file"}}]}})"));
  ASSERT_TRUE(subset.ok()) << subset.status().message();
  EXPECT_NE(subset->text.find("\"name\": \"write_file\""), std::string::npos);
  EXPECT_EQ(subset->text.find("get_weather"), std::string::npos);
  EXPECT_TRUE(subset->forced_after.empty());
}

TEST_F(ChatToolsTest, LegacyMessagesRenderAsToolCalls) {
  auto legacy = build(J(R"({"functions": [{"name": "get_weather"}], "messages": [
      {"role": "user", "content": "x"},
      {"role": "assistant", "content": null, "function_call": {"name": "get_weather", "arguments": "{\"days\": 2}"}},
      {"role": "function", "name": "get_weather", "content": "sunny"}]})"));
  ASSERT_TRUE(legacy.ok()) << legacy.status().message();
  EXPECT_TRUE(legacy->legacy_functions);
  EXPECT_NE(legacy->text.find("<invoke name=\"get_weather\">\n<parameter name=\"days\">2</parameter>"),
            std::string::npos);
  EXPECT_NE(legacy->text.find("]~b]tool\n<response>sunny</response>"), std::string::npos);
  EXPECT_TRUE(legacy->stop_after_first_call);
}

TEST_F(ChatToolsTest, ParallelFalseEndsTheJobAfterTheFirstCall) {
  auto turn = build_chat_turn(with_tools(R"("parallel_tool_calls": false)"), SamplingRequest(), ctx_, false);
  ASSERT_TRUE(turn.ok()) << turn.status().message();
  ASSERT_TRUE(turn->job.params.text_stop);
  auto stop = (*turn->job.params.text_stop)();
  EXPECT_FALSE(stop->feed("Plan.</think>\n\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n"));
  EXPECT_FALSE(stop->feed("<parameter name=\"days\">1</parameter>\n</invo"));
  EXPECT_TRUE(stop->feed("ke>\n"));
  // A call inside the reasoning does not count.
  auto fresh = (*turn->job.params.text_stop)();
  EXPECT_FALSE(fresh->feed("<minimax:tool_call>\n<invoke name=\"get_weather\">\n</invoke>\n"));
  auto parallel = build_chat_turn(with_tools(""), SamplingRequest(), ctx_, false);
  ASSERT_TRUE(parallel.ok());
  EXPECT_FALSE(parallel->job.params.text_stop);
}

}  // namespace
}  // namespace m2::server
