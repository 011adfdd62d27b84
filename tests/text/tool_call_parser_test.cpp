// Named cases of spec §6.6 and of the known parser bugs (§6.2-6.4,
// landscape §C). Each case is checked whole-text and streamed at every
// split point (parse_and_check_streams), then its expected message asserted.
#include <gtest/gtest.h>

#include "assistant_parse_test_util.h"

namespace m2::text {
namespace {

using testing::options_with_tools;
using testing::parse_and_check_streams;

constexpr std::string_view kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather",
    "parameters": {"type": "object", "properties": {
      "location": {"type": "string"}, "days": {"type": "integer"},
      "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["location"]}}},
  {"type": "function", "function": {"name": "edit_file",
    "parameters": {"type": "object", "properties": {
      "path": {"type": "string"}, "old_string": {"type": "string"}, "new_string": {"type": "string"}}}}},
  {"type": "function", "function": {"name": "configure",
    "parameters": {"type": "object", "properties": {
      "ratio": {"type": "number"}, "enabled": {"type": "boolean"}, "options": {"type": "object"},
      "tags": {"type": "array", "items": {"type": "string"}},
      "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
      "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
      "level": {"enum": [1, 2, 3]}, "mode": {"enum": ["fast", "slow"]}, "anything": {},
      "count": {"type": "integer"}, "scale": {"type": ["number", "null"]}}}}}
])";

AssistantParseOptions tools_options(ReasoningMode mode = ReasoningMode::kSplit) {
  return options_with_tools(kTools, mode);
}

std::string weather_call(std::string_view location, std::string_view days) {
  return "<invoke name=\"get_weather\">\n<parameter name=\"location\">" + std::string(location) +
         "</parameter>\n<parameter name=\"days\">" + std::string(days) + "</parameter>\n</invoke>\n";
}

std::string block(std::string_view invokes) {
  return "<minimax:tool_call>\n" + std::string(invokes) + "</minimax:tool_call>";
}

// One call's arguments for a one-parameter invoke of `tool`.
std::string single_argument(std::string_view tool, std::string_view param, std::string_view value) {
  const std::string raw = "ok\n</think>\n\n<minimax:tool_call>\n<invoke name=\"" + std::string(tool) +
                          "\">\n<parameter name=\"" + std::string(param) + "\">" + std::string(value) +
                          "</parameter>\n</invoke>\n</minimax:tool_call>";
  const AssistantMessage m = parse_and_check_streams(raw, tools_options());
  EXPECT_EQ(m.tool_calls.size(), 1u);
  return m.tool_calls.empty() ? "" : m.tool_calls[0].arguments;
}

TEST(ToolCallParser, SingleCallWithReasoning) {
  const std::string raw = "The user wants the weather.\n</think>\n\n" + block(weather_call("Paris", "2"));
  const AssistantMessage m = parse_and_check_streams(raw, tools_options());
  EXPECT_EQ(m.reasoning_content, "The user wants the weather.");
  EXPECT_EQ(m.content, std::nullopt);
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].name, "get_weather");
  EXPECT_EQ(m.tool_calls[0].arguments, R"({"location": "Paris", "days": 2})");
  EXPECT_EQ(m.tool_calls[0].id.size(), 29u);
  EXPECT_EQ(m.tool_calls[0].id.substr(0, 5), "call_");
  EXPECT_EQ(m.tool_calls[0].id.find_first_not_of("0123456789abcdef", 5), std::string::npos);
  EXPECT_STREQ(m.finish_reason(), "tool_calls");
  EXPECT_STREQ(AssistantMessage{}.finish_reason(), "stop");
}

TEST(ToolCallParser, ParallelCallsInOneBlock) {
  const std::string raw = "r</think>\n\n" + block(weather_call("Paris", "2") + weather_call("Tokyo", "5"));
  const AssistantMessage m = parse_and_check_streams(raw, tools_options());
  ASSERT_EQ(m.tool_calls.size(), 2u);
  EXPECT_EQ(m.tool_calls[0].arguments, R"({"location": "Paris", "days": 2})");
  EXPECT_EQ(m.tool_calls[1].arguments, R"({"location": "Tokyo", "days": 5})");
  EXPECT_NE(m.tool_calls[0].id, m.tool_calls[1].id);
}

TEST(ToolCallParser, SeveralBlocksWithTextBetween) {
  const std::string raw = "r</think>\n\nFirst.\n" + block(weather_call("Paris", "1")) + "\nThen:\n" +
                          block(weather_call("Rome", "3")) + "\n";
  const AssistantMessage m = parse_and_check_streams(raw, tools_options());
  ASSERT_EQ(m.tool_calls.size(), 2u);
  EXPECT_EQ(m.content, "First.\nThen:");
  EXPECT_EQ(m.tool_calls[1].arguments, R"({"location": "Rome", "days": 3})");
}

TEST(ToolCallParser, TextAfterLastBlockIsKept) {
  // vLLM discards text after the block; we keep it as content.
  const std::string raw = "r</think>\n\nChecking.\n" + block(weather_call("Oslo", "1")) + "\nDone, waiting.";
  const AssistantMessage m = parse_and_check_streams(raw, tools_options());
  EXPECT_EQ(m.content, "Checking.\nDone, waiting.");
  EXPECT_EQ(m.tool_calls.size(), 1u);
}

TEST(ToolCallParser, UnknownToolIsReturnedWithStringArguments) {
  const std::string raw = "r</think>" + block(
      "<invoke name=\"search_web\">\n<parameter name=\"query\">42</parameter>\n"
      "<parameter name=\"n\">null</parameter>\n</invoke>\n");
  const AssistantMessage m = parse_and_check_streams(raw, tools_options());
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].name, "search_web");
  EXPECT_EQ(m.tool_calls[0].arguments, R"({"query": "42", "n": null})");
}

TEST(ToolCallParser, StringParameterWithNumericTextStaysString) {
  // llama.cpp's XML parser types "123" or "true" as JSON whatever the schema.
  EXPECT_EQ(single_argument("get_weather", "location", "123"), R"({"location": "123"})");
  EXPECT_EQ(single_argument("get_weather", "location", "true"), R"({"location": "true"})");
  EXPECT_EQ(single_argument("get_weather", "location", "[1]"), R"({"location": "[1]"})");
}

TEST(ToolCallParser, UnknownParameterIsString) {
  EXPECT_EQ(single_argument("get_weather", "country", "3"), R"({"country": "3"})");
}

TEST(ToolCallParser, SingleQuotedAndUnquotedNames) {
  const std::string raw = "r</think>" + block(
      "<invoke name='get_weather'>\n<parameter name='days'>4</parameter>\n</invoke>\n"
      "<invoke name=get_weather>\n<parameter name=days>5</parameter>\n</invoke>\n");
  const AssistantMessage m = parse_and_check_streams(raw, tools_options());
  ASSERT_EQ(m.tool_calls.size(), 2u);
  EXPECT_EQ(m.tool_calls[0].name, "get_weather");
  EXPECT_EQ(m.tool_calls[0].arguments, R"({"days": 4})");
  EXPECT_EQ(m.tool_calls[1].arguments, R"({"days": 5})");
}

TEST(ToolCallParser, ParameterCloseTagInsideValueDoesNotTruncate) {
  // vLLM #44060: a literal </parameter> in an argument truncated it.
  const std::string value = "Use </parameter> to close.\n</parameter> again </parameter>x";
  const std::string raw = "r</think>" + block(
      "<invoke name=\"edit_file\">\n<parameter name=\"new_string\">" + value +
      "</parameter>\n<parameter name=\"path\">a.xml</parameter>\n</invoke>\n");
  const AssistantMessage m = parse_and_check_streams(raw, tools_options());
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(OrderedJson::parse(m.tool_calls[0].arguments)["new_string"], value);
  EXPECT_EQ(OrderedJson::parse(m.tool_calls[0].arguments)["path"], "a.xml");
}

TEST(ToolCallParser, ParameterCloseTagFollowedByFarTagIsPartOfValue) {
  // More than 64 spaces between </parameter> and the next tag: not a close.
  const std::string gap(70, ' ');
  const std::string value = "x</parameter>" + gap + "</parameter>y";
  EXPECT_EQ(OrderedJson::parse(single_argument("edit_file", "path", value))["path"], value);
}

TEST(ToolCallParser, CodeValueKeepsLeadingAndTrailingWhitespace) {
  // vLLM strip()s values, breaking old_string matches of edit tools.
  const std::string code = "    if x:\n\treturn 1  \n\n";
  const std::string raw = "r</think>" + block(
      "<invoke name=\"edit_file\">\n<parameter name=\"old_string\">\n" + code +
      "\n</parameter>\n<parameter name=\"new_string\">  y = 2 </parameter>\n</invoke>\n");
  const AssistantMessage m = parse_and_check_streams(raw, tools_options());
  ASSERT_EQ(m.tool_calls.size(), 1u);
  const OrderedJson args = OrderedJson::parse(m.tool_calls[0].arguments);
  EXPECT_EQ(args["old_string"], code);
  EXPECT_EQ(args["new_string"], "  y = 2 ");
}

TEST(ToolCallParser, OnlyOneNewlineRemovedAtEachEnd) {
  EXPECT_EQ(single_argument("edit_file", "path", "\n\nA\n\n"), R"({"path": "\nA\n"})");
  EXPECT_EQ(single_argument("edit_file", "path", "\n"), R"({"path": ""})");
  EXPECT_EQ(single_argument("edit_file", "path", "\n\n"), R"({"path": ""})");
  EXPECT_EQ(single_argument("edit_file", "path", "\r\nA\r\n"), R"({"path": "\r\nA\r"})");
}

TEST(ToolCallParser, UnicodeNamesAndValues) {
  const std::string raw = "r</think>" + block(
      "<invoke name=\"get_weather\">\n<parameter name=\"location\">東京 🇯🇵 e\xCC\x81 مرحبا</parameter>\n"
      "<parameter name=\"ключ\">значение 👩‍👩‍👧</parameter>\n</invoke>\n");
  const AssistantMessage m = parse_and_check_streams(raw, tools_options());
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].arguments,
            "{\"location\": \"東京 🇯🇵 e\xCC\x81 مرحبا\", "
            "\"ключ\": \"значение 👩‍👩‍👧\"}");
}

TEST(ToolCallParser, NestedJsonObjectAndArray) {
  EXPECT_EQ(single_argument("configure", "options", R"({"a": {"b": [1, 2.50, {"c": null}]}, "d": "é"})"),
            R"({"options": {"a": {"b": [1, 2.5, {"c": null}]}, "d": "é"}})");
  EXPECT_EQ(single_argument("configure", "tags", "[\"x\",\"y\" ,1e2]"), R"({"tags": ["x", "y", 100.0]})");
  // Not JSON: kept as the raw text.
  EXPECT_EQ(single_argument("configure", "options", "{a: 1}"), R"({"options": "{a: 1}"})");
}

TEST(ToolCallParser, NullWordsBecomeNull) {
  for (std::string_view word : {"null", "None", "NIL", " null ", "\nnull\n"}) {
    EXPECT_EQ(single_argument("configure", "count", word), R"({"count": null})") << word;
    EXPECT_EQ(single_argument("edit_file", "path", word), R"({"path": null})") << word;
  }
  EXPECT_EQ(single_argument("edit_file", "path", "nullable"), R"({"path": "nullable"})");
  EXPECT_EQ(single_argument("edit_file", "path", "nul l"), R"({"path": "nul l"})");
}

TEST(ToolCallParser, NumberThreePointZeroIsInteger) {
  EXPECT_EQ(single_argument("configure", "ratio", "3.0"), R"({"ratio": 3})");
  EXPECT_EQ(single_argument("configure", "ratio", "2.5"), R"({"ratio": 2.5})");
  EXPECT_EQ(single_argument("configure", "ratio", "1e-5"), R"({"ratio": 1e-05})");
  EXPECT_EQ(single_argument("configure", "ratio", "1_000.5"), R"({"ratio": 1000.5})");
  EXPECT_EQ(single_argument("configure", "ratio", "1e20"), R"({"ratio": 1e+20})");
  EXPECT_EQ(single_argument("configure", "ratio", "abc"), R"({"ratio": "abc"})");
}

TEST(ToolCallParser, AnyOfWithNullKeepsValues) {
  // SGLang turns every value of a nullable parameter into null.
  EXPECT_EQ(single_argument("configure", "note", "hello"), R"({"note": "hello"})");
  EXPECT_EQ(single_argument("configure", "note", "null"), R"({"note": null})");
  EXPECT_EQ(single_argument("configure", "limit", "5"), R"({"limit": 5})");
  EXPECT_EQ(single_argument("configure", "scale", "0.5"), R"({"scale": 0.5})");
  EXPECT_EQ(single_argument("configure", "scale", "none"), R"({"scale": null})");
}

TEST(ToolCallParser, EnumInferredTypes) {
  EXPECT_EQ(single_argument("configure", "level", "2"), R"({"level": 2})");
  EXPECT_EQ(single_argument("configure", "mode", "fast"), R"({"mode": "fast"})");
  EXPECT_EQ(single_argument("get_weather", "unit", "celsius"), R"({"unit": "celsius"})");
}

TEST(ToolCallParser, IntegerParseFailureFallsBack) {
  EXPECT_EQ(single_argument("configure", "count", "two"), R"({"count": "two"})");
  EXPECT_EQ(single_argument("configure", "count", "2.5"), R"({"count": 2.5})");  // then JSON
  EXPECT_EQ(single_argument("configure", "count", " 7 "), R"({"count": 7})");
  EXPECT_EQ(single_argument("configure", "count", "-0"), R"({"count": 0})");
  EXPECT_EQ(single_argument("configure", "count", "+1_000"), R"({"count": 1000})");
  EXPECT_EQ(single_argument("configure", "count", "99999999999999999999"), R"({"count": 1e+20})");
  EXPECT_EQ(single_argument("configure", "count", "[1]"), R"({"count": [1]})");
}

TEST(ToolCallParser, BooleanWords) {
  EXPECT_EQ(single_argument("configure", "enabled", "yes"), R"({"enabled": true})");
  EXPECT_EQ(single_argument("configure", "enabled", "OFF"), R"({"enabled": false})");
  EXPECT_EQ(single_argument("configure", "enabled", "1"), R"({"enabled": true})");
  EXPECT_EQ(single_argument("configure", "enabled", "maybe"), R"({"enabled": "maybe"})");
}

TEST(ToolCallParser, SchemaWithoutTypeIsString) {
  EXPECT_EQ(single_argument("configure", "anything", "123"), R"({"anything": "123"})");
}

TEST(ToolCallParser, DuplicateParameterKeepsFirstPositionAndLastValue) {
  const std::string raw = "r</think>" + block(
      "<invoke name=\"get_weather\">\n<parameter name=\"days\">1</parameter>\n"
      "<parameter name=\"location\">A</parameter>\n<parameter name=\"days\">2</parameter>\n</invoke>\n");
  const AssistantMessage m = parse_and_check_streams(raw, tools_options());
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].arguments, R"({"days": 2, "location": "A"})");
}

TEST(ToolCallParser, EmptyInvokeHasEmptyObject) {
  const AssistantMessage m =
      parse_and_check_streams("r</think>" + block("<invoke name=\"get_weather\">\n</invoke>\n"), tools_options());
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].arguments, "{}");
}

TEST(ToolCallParser, ControlCharactersAndQuotesAreEscaped) {
  EXPECT_EQ(single_argument("edit_file", "path", "a\"b\\c\td\x01\x1f\x7f"),
            "{\"path\": \"a\\\"b\\\\c\\td\\u0001\\u001f\x7f\"}");
}

TEST(ToolCallParser, TagLikeTextInsideValues) {
  const std::string value = "<div>x</div> </invoke> <parameter name=\"z\"> </minimax:tool_call>";
  EXPECT_EQ(OrderedJson::parse(single_argument("edit_file", "new_string", value))["new_string"], value);
}

TEST(ToolCallParser, TruncatedInvokeAtEosIsContent) {
  // Cut inside a value: no call; the text is returned as content. The stream
  // has sent the call's name and reports it incomplete instead.
  const std::string raw = "r</think>\n\nLet me check.\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n"
                          "<parameter name=\"location\">Par";
  AssistantParseOptions options = tools_options();
  const AssistantMessage m = parse_assistant_output(raw, options);
  EXPECT_TRUE(m.tool_calls.empty());
  EXPECT_EQ(m.content, raw.substr(raw.find("Let me")));
  const testing::Streamed s = testing::run_stream(options, testing::chunks_of(raw, 3));
  EXPECT_TRUE(s.incomplete);
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0].name, "get_weather");
  EXPECT_EQ(s.calls[0].arguments, R"({"location": "Par)");
  EXPECT_EQ(s.content, "Let me check.");
}

TEST(ToolCallParser, TruncatedAfterCompleteCallsKeepsThem) {
  const std::string raw = "r</think>" + std::string("<minimax:tool_call>\n") + weather_call("A", "1") +
                          "<invoke name=\"get_weather\">\n<parameter name=\"days\">3</parameter>";
  const AssistantMessage m = parse_assistant_output(raw, tools_options());
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.content, "<invoke name=\"get_weather\">\n<parameter name=\"days\">3</parameter>");
}

TEST(ToolCallParser, TruncatedBeforeInvokeNameIsContent) {
  for (std::string_view cut : {"<minimax:tool_call>", "<minimax:tool_call>\n<invo",
                               "<minimax:tool_call>\n<invoke name=\"get_wea", "<minimax:tool_ca"}) {
    const std::string raw = "r</think>\n\nHi " + std::string(cut);
    const AssistantMessage m = parse_and_check_streams(raw, tools_options());
    EXPECT_TRUE(m.tool_calls.empty());
    EXPECT_EQ(m.content, "Hi " + std::string(cut));
  }
}

TEST(ToolCallParser, MissingBlockCloseAtEosStillGivesCalls) {
  const std::string raw = "r</think>\n\n<minimax:tool_call>\n" + weather_call("Lima", "2") + "\n";
  const AssistantMessage m = parse_and_check_streams(raw, tools_options());
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.content, std::nullopt);
}

TEST(ToolCallParser, BlockWithoutValidInvokeIsContent) {
  for (std::string_view body : {"hello</minimax:tool_call>", "\n</minimax:tool_call>",
                                "<invoke name=\"a\nb\">x</invoke></minimax:tool_call>",
                                "<invoke name=\"\">x</invoke></minimax:tool_call>",
                                "<tool_calls>[]</tool_calls>"}) {
    const std::string raw = "r</think>\n\nSee: <minimax:tool_call>" + std::string(body) + " end";
    const AssistantMessage m = parse_and_check_streams(raw, tools_options());
    EXPECT_TRUE(m.tool_calls.empty()) << body;
    EXPECT_EQ(m.content, "See: <minimax:tool_call>" + std::string(body) + " end");
  }
}

TEST(ToolCallParser, JunkAfterCallsEndsTheBlock) {
  const std::string raw = "r</think>" + std::string("<minimax:tool_call>\n") + weather_call("A", "1") +
                          "\noops <minimax:tool_call>\n" + weather_call("B", "2") + "</minimax:tool_call>";
  const AssistantMessage m = parse_and_check_streams(raw, tools_options());
  ASSERT_EQ(m.tool_calls.size(), 2u);
  EXPECT_EQ(m.content, "oops");
}

TEST(ToolCallParser, MalformedParameterTagIsIgnored) {
  const std::string raw = "r</think>" + block(
      "<invoke name=\"get_weather\">\nnoise <parameter name=\"bad\nname\">v</parameter>\n"
      "<parameter name=\"days\">3</parameter>\n</invoke>\n");
  const AssistantMessage m = parse_and_check_streams(raw, tools_options());
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].arguments, R"({"days": 3})");
}

TEST(ToolCallParser, ToolCallInsideThinkIsNotExecuted) {
  const std::string raw = "I could call " + block(weather_call("X", "1")) + " but no.\n</think>\n\nNo tools needed.";
  const AssistantMessage m = parse_and_check_streams(raw, tools_options());
  EXPECT_TRUE(m.tool_calls.empty());
  EXPECT_EQ(m.content, "No tools needed.");
  EXPECT_EQ(m.reasoning_content, "I could call " + block(weather_call("X", "1")) + " but no.");
}

TEST(ToolCallParser, MissingThinkCloseMakesEverythingReasoning) {
  const std::string raw = "Thinking...\n" + block(weather_call("X", "1"));
  const AssistantMessage m = parse_and_check_streams(raw, tools_options());
  EXPECT_TRUE(m.tool_calls.empty());
  EXPECT_EQ(m.content, std::nullopt);
  EXPECT_EQ(m.reasoning_content, raw);
}

TEST(ToolCallParser, OutputStartingWithThinkTag) {
  const std::string raw = "<think>\nPlan.\n</think>\n\nAnswer.";
  const AssistantMessage split = parse_and_check_streams(raw, tools_options());
  EXPECT_EQ(split.reasoning_content, "Plan.");
  EXPECT_EQ(split.content, "Answer.");
  const AssistantMessage append = parse_and_check_streams(raw, tools_options(ReasoningMode::kAppendThink));
  EXPECT_EQ(append.content, "<think>\nPlan.\n</think>\n\nAnswer.");
}

TEST(ToolCallParser, AppendThinkKeepsEverythingInContent) {
  const std::string raw = "Need weather.\n</think>\n\nOne moment.\n" + block(weather_call("Paris", "2"));
  const AssistantMessage m = parse_and_check_streams(raw, tools_options(ReasoningMode::kAppendThink));
  EXPECT_EQ(m.reasoning_content, std::nullopt);
  EXPECT_EQ(m.content, "<think>Need weather.\n</think>\n\nOne moment.");
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(assistant_message_json(m, ReasoningMode::kAppendThink).contains("reasoning_content"), false);
}

TEST(ToolCallParser, AppendThinkDoesNotParseInsideThink) {
  const std::string raw = block(weather_call("X", "1")) + "</think>ok";
  const AssistantMessage m = parse_and_check_streams(raw, tools_options(ReasoningMode::kAppendThink));
  EXPECT_TRUE(m.tool_calls.empty());
  EXPECT_EQ(m.content, "<think>" + raw);
}

TEST(ToolCallParser, ToolChoiceNoneDropsCalls) {
  // tool_choice "none": a call the model writes anyway is parsed and dropped,
  // never returned as text.
  Json request = {{"tools", Json::parse(kTools)}, {"tool_choice", "none"}};
  AssistantParseOptions options = options_from_request(request);
  ASSERT_TRUE(options.allowed_tools.has_value());
  EXPECT_TRUE(options.allowed_tools->empty());
  const std::string raw = "r</think>\n\nBefore.\n" + block(weather_call("A", "1")) + "\nAfter.";
  const AssistantMessage m = parse_and_check_streams(raw, options);
  EXPECT_TRUE(m.tool_calls.empty());
  EXPECT_EQ(m.content, "Before.\nAfter.");
  // No tools in the request: blocks are text (vLLM).
  EXPECT_FALSE(options_from_request(Json{{"messages", Json::array()}}).parse_tool_calls);
}

TEST(ToolCallParser, OnlyAllowedToolsAreCalled) {
  AssistantParseOptions options = tools_options();
  options.allowed_tools = ToolNameSet{"edit_file"};
  const std::string edit = "<invoke name=\"edit_file\">\n<parameter name=\"path\">a</parameter>\n</invoke>\n";
  const std::string raw = "r</think>\n\n" + block(weather_call("A", "1") + edit + weather_call("B", "2"));
  const AssistantMessage m = parse_and_check_streams(raw, options);
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].name, "edit_file");
  EXPECT_EQ(m.tool_calls[0].arguments, "{\"path\": \"a\"}");
  EXPECT_FALSE(m.content.has_value());
  // The first call's id: dropped calls take none.
  AssistantParseOptions seeded = options;
  seeded.id_seed = 1234;
  ToolCallIdGenerator ids(1234);
  EXPECT_EQ(parse_assistant_output(raw, seeded).tool_calls[0].id, ids.next());
}

TEST(ToolCallParser, DroppedCallCutOffDropsTheRest) {
  AssistantParseOptions options = tools_options();
  options.allowed_tools = ToolNameSet{};
  const std::string raw = "r</think>\n\nText\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"lo";
  const AssistantMessage m = parse_and_check_streams(raw, options);
  EXPECT_TRUE(m.tool_calls.empty());
  EXPECT_EQ(m.content, "Text");
  // Cut off before the name is complete: nothing was decided, it stays text.
  const std::string early = "r</think>\n\nText\n<minimax:tool_call>\n<invoke name=\"get_wea";
  EXPECT_EQ(parse_and_check_streams(early, options).content, "Text\n<minimax:tool_call>\n<invoke name=\"get_wea");
}

TEST(ToolCallParser, InvalidUtf8IsReplaced) {
  const std::string raw = "a\xFF\xC3</think>\n\nb\xE2\x82" + block(
      "<invoke name=\"edit_file\">\n<parameter name=\"path\">\xF0\x9F\x98</parameter>\n</invoke>\n");
  const AssistantMessage m = parse_and_check_streams(raw, tools_options());
  EXPECT_EQ(m.reasoning_content, "a\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(m.content, "b\xEF\xBF\xBD");
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].arguments, "{\"path\": \"\xEF\xBF\xBD\"}");
}

TEST(ToolCallParser, WhitespaceOnlyContentIsNull) {
  const std::string raw = "r</think>\n\n \n" + block(weather_call("A", "1")) + "\n\n" +
                          block(weather_call("B", "1")) + " \n";
  const AssistantMessage m = parse_and_check_streams(raw, tools_options());
  EXPECT_EQ(m.tool_calls.size(), 2u);
  EXPECT_EQ(m.content, std::nullopt);
  EXPECT_EQ(assistant_message_json(m, ReasoningMode::kSplit)["content"], nullptr);
}

TEST(ToolCallParser, IdsAreRepeatableUnderASeed) {
  AssistantParseOptions options = tools_options();
  options.id_seed = 7;
  const std::string raw = "r</think>" + block(weather_call("A", "1") + weather_call("B", "2"));
  const AssistantMessage a = parse_assistant_output(raw, options);
  const AssistantMessage b = parse_assistant_output(raw, options);
  ASSERT_EQ(a.tool_calls.size(), 2u);
  EXPECT_EQ(a.tool_calls[0].id, b.tool_calls[0].id);
  EXPECT_EQ(a.tool_calls[1].id, b.tool_calls[1].id);
  options.id_seed.reset();
  EXPECT_NE(parse_assistant_output(raw, options).tool_calls[0].id, a.tool_calls[0].id);
}

TEST(ToolCallParser, MessageJsonShape) {
  AssistantParseOptions options = tools_options();
  options.id_seed = 1;
  const AssistantMessage m = parse_assistant_output("r</think>\n\nHi\n" + block(weather_call("A", "1")), options);
  const OrderedJson j = assistant_message_json(m, ReasoningMode::kSplit);
  EXPECT_EQ(j["role"], "assistant");
  EXPECT_EQ(j["content"], "Hi");
  EXPECT_EQ(j["reasoning_content"], "r");
  ASSERT_EQ(j["tool_calls"].size(), 1u);
  EXPECT_EQ(j["tool_calls"][0]["type"], "function");
  EXPECT_EQ(j["tool_calls"][0]["id"], m.tool_calls[0].id);
  EXPECT_EQ(j["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(j["tool_calls"][0]["function"]["arguments"], R"({"location": "A", "days": 1})");
}

}  // namespace
}  // namespace m2::text
