// What the streaming parser sends and when: names once complete, arguments as
// generated, nothing held longer than needed, no partial tag leaked.
#include <gtest/gtest.h>

#include "assistant_parse_test_util.h"

namespace m2::text {
namespace {

constexpr std::string_view kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
    "location": {"type": "string"}, "days": {"type": "integer"}, "note": {"type": ["string", "null"]}}}}}
])";

// Feeds `pieces` one by one and records what had been sent after each.
struct Recorder {
  explicit Recorder(ReasoningMode mode = ReasoningMode::kSplit, bool starts_in_reasoning = true)
      : parser([&] {
          AssistantParseOptions o = testing::options_with_tools(kTools, mode);
          o.starts_in_reasoning = starts_in_reasoning;
          o.id_seed = 5;
          return o;
        }()) {}

  void feed(std::string_view piece) { take(parser.feed(piece)); }
  void finish() { take(parser.finish()); }
  void take(const AssistantDelta& d) {
    reasoning += d.reasoning_content;
    content += d.content;
    for (const ToolCallDelta& c : d.tool_calls) {
      if (!c.id.empty()) names.push_back(c.name);
      arguments += c.arguments;
    }
  }

  AssistantStreamParser parser;
  std::string reasoning, content, arguments;
  std::vector<std::string> names;
};

TEST(ToolCallStream, ArgumentsStreamAsGenerated) {
  Recorder r;
  r.feed("ok</think>\n\n<minimax:tool_call>\n<invoke name=\"get_wea");
  EXPECT_TRUE(r.names.empty()) << "the name is sent only once complete";
  r.feed("ther\">\n<parameter name=\"loca");
  ASSERT_EQ(r.names.size(), 1u);
  EXPECT_EQ(r.names[0], "get_weather");
  EXPECT_EQ(r.arguments, "{");
  r.feed("tion\">Par");
  EXPECT_EQ(r.arguments, R"({"location": "Par)");
  r.feed("is");
  EXPECT_EQ(r.arguments, R"({"location": "Paris)");
  r.feed("</parameter>\n<parameter name=\"days\">1");
  EXPECT_EQ(r.arguments, R"({"location": "Paris", "days": )") << "an integer waits for its end";
  r.feed("2</parameter>\n</invoke>\n</minimax:tool_call>");
  EXPECT_EQ(r.arguments, R"({"location": "Paris", "days": 12})");
  r.finish();
  EXPECT_EQ(r.content, "");
  EXPECT_TRUE(r.parser.has_tool_calls());
}

TEST(ToolCallStream, StringValueHoldsOnlyWhatMayStillChange) {
  Recorder r;
  r.feed("</think><minimax:tool_call><invoke name=\"get_weather\"><parameter name=\"location\">\nline1\n");
  EXPECT_EQ(r.arguments, R"({"location": "line1)") << "the first newline is dropped, the last held";
  r.feed("line2 </param");
  EXPECT_EQ(r.arguments, R"({"location": "line1\nline2 )") << "only the possible </parameter> is held";
  r.feed("eter> is text");
  EXPECT_EQ(r.arguments, R"({"location": "line1\nline2 </parameter> is text)");
  r.feed("\n</parameter>\n<para");
  EXPECT_EQ(r.arguments, R"({"location": "line1\nline2 </parameter> is text)") << "undecided close";
  r.feed("meter name=\"note\">nu");
  EXPECT_EQ(r.arguments, R"({"location": "line1\nline2 </parameter> is text", "note": )")
      << "a possible null word is held";
  r.feed("ll");
  EXPECT_EQ(r.arguments, R"({"location": "line1\nline2 </parameter> is text", "note": )");
  r.feed("ify</parameter></invoke>");
  EXPECT_EQ(r.arguments, R"({"location": "line1\nline2 </parameter> is text", "note": "nullify"})");
}

TEST(ToolCallStream, NullWordValueForStringParameter) {
  Recorder r;
  r.feed("</think><minimax:tool_call><invoke name=\"get_weather\"><parameter name=\"note\"> None \n");
  r.feed("</parameter></invoke>");
  EXPECT_EQ(r.arguments, R"({"note": null})");
}

TEST(ToolCallStream, EscapesSurviveSplitCharacters) {
  const std::string value = "q\"\\\t é 😀 \x01";
  const std::string raw =
      "</think><minimax:tool_call><invoke name=\"get_weather\"><parameter name=\"location\">" + value +
      "</parameter></invoke></minimax:tool_call>";
  Recorder r;
  for (char c : raw) r.feed(std::string(1, c));  // splits é and 😀 between their bytes
  r.finish();
  EXPECT_EQ(r.arguments, "{\"location\": \"q\\\"\\\\\\t é 😀 \\u0001\"}");
}

TEST(ToolCallStream, PartialTagIsNotLeaked) {
  Recorder r;
  r.feed("</think>\n\nHello <minimax:to");
  EXPECT_EQ(r.content, "Hello") << "the space may precede a block; the tag prefix is held";
  r.feed("ol_call>\n<invoke name=\"get_weather\"></invoke></minimax:tool_call>");
  EXPECT_EQ(r.content, "Hello");
  r.feed(" Bye <minimax:tox");
  EXPECT_EQ(r.content, "Hello Bye <minimax:tox") << "not a tag prefix any more";
  r.finish();
  EXPECT_EQ(r.content, "Hello Bye <minimax:tox");
}

TEST(ToolCallStream, ThinkCloseSplitAcrossDeltas) {
  Recorder r;
  r.feed("Let me think</th");
  EXPECT_EQ(r.reasoning, "Let me think");
  r.feed("ink");
  EXPECT_EQ(r.content, "");
  r.feed(">\n");
  r.feed("\nAnswer");
  EXPECT_EQ(r.reasoning, "Let me think");
  EXPECT_EQ(r.content, "Answer");
}

TEST(ToolCallStream, ReasoningNewlinesHeldUntilDecided) {
  Recorder r;
  r.feed("\nStep 1\n\n");
  EXPECT_EQ(r.reasoning, "Step 1");
  r.feed("Step 2\n");
  EXPECT_EQ(r.reasoning, "Step 1\n\nStep 2");
  r.feed("</think>");
  r.finish();
  EXPECT_EQ(r.reasoning, "Step 1\n\nStep 2");
}

TEST(ToolCallStream, AppendThinkSendsThinkFirst) {
  Recorder r(ReasoningMode::kAppendThink);
  r.feed("Plan");
  EXPECT_EQ(r.content, "<think>Plan");
  EXPECT_EQ(r.reasoning, "");
  r.feed("</think>\n\nDone");
  EXPECT_EQ(r.content, "<think>Plan</think>\n\nDone");
}

TEST(ToolCallStream, ForcedToolCallPrefixIsFedLikeOutput) {
  // tool_choice "required": the server closes the reasoning in the prompt and
  // forces the opening of a call; the model writes the rest.
  Recorder r(ReasoningMode::kSplit, /*starts_in_reasoning=*/false);
  r.feed("<minimax:tool_call>\n<invoke name=\"get_weather\">");
  ASSERT_EQ(r.names.size(), 1u);
  r.feed("\n<parameter name=\"days\">3</parameter>\n</invoke>\n</minimax:tool_call>");
  r.finish();
  EXPECT_EQ(r.arguments, R"({"days": 3})");
  EXPECT_EQ(r.content, "");
  EXPECT_EQ(r.reasoning, "");
}

TEST(ToolCallStream, ForcedToolCallAfterReasoning) {
  // tool_choice "required" with thinking: the server lets the model reason,
  // and injects the call opening once the reasoning has ended.
  Recorder r;
  r.feed("I must call the tool.\n</thi");
  EXPECT_FALSE(r.parser.reasoning_ended());
  r.feed("nk>\n\n");
  EXPECT_TRUE(r.parser.reasoning_ended());
  r.feed("<minimax:tool_call>\n<invoke name=\"get_weather\">");  // forced
  r.feed("\n<parameter name=\"location\">Oslo</parameter>\n</invoke>\n</minimax:tool_call>");
  r.finish();
  EXPECT_EQ(r.reasoning, "I must call the tool.");
  EXPECT_EQ(r.names, std::vector<std::string>{"get_weather"});
  EXPECT_EQ(r.arguments, R"({"location": "Oslo"})");
  EXPECT_EQ(r.content, "");
}

TEST(ToolCallStream, CompleteCallsAreCountedAtTheirInvokeClose) {
  // What stops a parallel_tool_calls: false generation: the first call is
  // complete as soon as its `</invoke>` has been fed, not before.
  Recorder r;
  r.feed("ok</think>\n\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"days\">1</parameter>\n");
  EXPECT_EQ(r.parser.num_complete_tool_calls(), 0);
  r.feed("</invoke");
  EXPECT_EQ(r.parser.num_complete_tool_calls(), 0);
  r.feed(">");
  EXPECT_EQ(r.parser.num_complete_tool_calls(), 1);
  r.feed("\n<invoke name=\"get_weather\">\n</invoke>\n</minimax:tool_call>");
  EXPECT_EQ(r.parser.num_complete_tool_calls(), 2);
}

TEST(ToolCallStream, IncompleteCallIsReported) {
  Recorder r;
  r.feed("</think><minimax:tool_call><invoke name=\"get_weather\"><parameter name=\"days\">4");
  r.finish();
  EXPECT_TRUE(r.parser.has_incomplete_tool_call());
  EXPECT_EQ(r.arguments, R"({"days": )");
}

TEST(ToolCallStream, WholeBlockInOneDelta) {
  // vLLM PR #35895: arguments were dropped when one delta held several tags.
  Recorder r;
  r.feed("x</think>\n\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"days\">2</parameter>\n"
         "</invoke>\n<invoke name=\"get_weather\">\n<parameter name=\"location\">B</parameter>\n</invoke>\n"
         "</minimax:tool_call>");
  r.finish();
  EXPECT_EQ(r.names.size(), 2u);
  EXPECT_EQ(r.arguments, R"({"days": 2}{"location": "B"})");
}

TEST(ToolCallStream, ParametersStayWithTheirInvoke) {
  // SGLang PR #23693: parameters overwritten across invokes. SGLang #23071:
  // one call streamed as two entries. Byte by byte, each call gets exactly
  // one header and its own arguments.
  const std::string raw =
      "</think><minimax:tool_call><invoke name=\"get_weather\"><parameter name=\"days\">1</parameter></invoke>"
      "<invoke name=\"get_weather\"><parameter name=\"days\">2</parameter></invoke></minimax:tool_call>";
  const testing::Streamed s = testing::run_stream(testing::options_with_tools(kTools), testing::chunks_of(raw, 1));
  ASSERT_EQ(s.calls.size(), 2u);
  EXPECT_EQ(s.calls[0].arguments, R"({"days": 1})");
  EXPECT_EQ(s.calls[1].arguments, R"({"days": 2})");
  int headers = 0;
  for (const AssistantDelta& d : s.deltas) {
    for (const ToolCallDelta& c : d.tool_calls) headers += !c.id.empty();
  }
  EXPECT_EQ(headers, 2);
}

TEST(ToolCallStream, DeltaJsonShape) {
  AssistantDelta d;
  d.content = "x";
  d.tool_calls.push_back({0, "call_1", "f", "{"});
  d.tool_calls.push_back({1, "", "", "}"});
  const OrderedJson j = assistant_delta_json(d);
  EXPECT_EQ(j.dump(), R"({"content":"x","tool_calls":[{"index":0,"id":"call_1","type":"function",)"
                      R"("function":{"name":"f","arguments":"{"}},{"index":1,"function":{"arguments":"}"}}]})");
  EXPECT_EQ(assistant_delta_json(AssistantDelta{}).dump(), "{}");
}

}  // namespace
}  // namespace m2::text
