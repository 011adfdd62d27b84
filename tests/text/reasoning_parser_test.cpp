// Reasoning split (spec §7): both modes, whole and streamed.
#include "text/reasoning_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace m2::text {
namespace {

// Streams `text` in pieces of `size` bytes and concatenates the deltas.
ReasoningDelta stream(std::string_view text, ReasoningMode mode, bool starts_in_reasoning, size_t size) {
  ReasoningStreamParser parser(mode, starts_in_reasoning);
  ReasoningDelta all;
  for (size_t i = 0; i < text.size(); i += size) parser.feed(text.substr(i, size), &all);
  parser.finish(&all);
  return all;
}

void expect_split(std::string_view text, ReasoningMode mode, bool starts_in_reasoning,
                  std::optional<std::string> reasoning, std::string visible, std::string rest) {
  SCOPED_TRACE(std::string(text));
  const ReasoningSplit whole = split_reasoning(text, mode, starts_in_reasoning);
  EXPECT_EQ(whole.reasoning, reasoning);
  EXPECT_EQ(whole.visible, visible);
  EXPECT_EQ(whole.rest, rest);
  for (size_t size = 1; size <= text.size() + 1; ++size) {
    const ReasoningDelta s = stream(text, mode, starts_in_reasoning, size);
    EXPECT_EQ(s.reasoning, reasoning.value_or("")) << "pieces of " << size;
    EXPECT_EQ(s.visible, visible) << "pieces of " << size;
    EXPECT_EQ(s.rest, rest) << "pieces of " << size;
  }
}

TEST(ReasoningParser, SplitAtFirstThinkClose) {
  expect_split("Plan A.\n</think>\n\nAnswer </think> kept", ReasoningMode::kSplit, true, "Plan A.", "",
               "Answer </think> kept");
}

TEST(ReasoningParser, SplitStripsNewlinesLikeTheTemplate) {
  expect_split("\n\nStep 1\n\nStep 2\n\n</think>\n\n\nText\n", ReasoningMode::kSplit, true, "Step 1\n\nStep 2", "",
               "Text\n");
}

TEST(ReasoningParser, NoThinkCloseIsAllReasoning) {
  expect_split("Still thinking\n", ReasoningMode::kSplit, true, "Still thinking", "", "");
  expect_split("cut at </thi", ReasoningMode::kSplit, true, "cut at </thi", "", "");
}

TEST(ReasoningParser, EmptyReasoningIsNull) {
  expect_split("</think>\n\nHi", ReasoningMode::kSplit, true, std::nullopt, "", "Hi");
  expect_split("\n\n", ReasoningMode::kSplit, true, std::nullopt, "", "");
}

TEST(ReasoningParser, LeadingThinkTagIsDropped) {
  expect_split("<think>\nX\n</think>Y", ReasoningMode::kSplit, true, "X", "", "Y");
  expect_split("<think>X</think>Y", ReasoningMode::kAppendThink, true, std::nullopt, "<think>X</think>", "Y");
  expect_split("<thinking>X</think>Y", ReasoningMode::kSplit, true, "<thinking>X", "", "Y");
  expect_split("<thi", ReasoningMode::kSplit, true, "<thi", "", "");
  expect_split("a<think>b</think>", ReasoningMode::kSplit, true, "a<think>b", "", "");
}

TEST(ReasoningParser, AppendThinkKeepsEverything) {
  expect_split("R\n</think>\n\nC", ReasoningMode::kAppendThink, true, std::nullopt, "<think>R\n</think>", "\n\nC");
  expect_split("R only", ReasoningMode::kAppendThink, true, std::nullopt, "<think>R only", "");
  expect_split("", ReasoningMode::kAppendThink, true, std::nullopt, "<think>", "");
}

TEST(ReasoningParser, PromptWithoutOpenThink) {
  // The server closed the reasoning in the prompt: all output is the rest.
  expect_split("\nA </think> B", ReasoningMode::kSplit, false, std::nullopt, "", "\nA </think> B");
  expect_split("\nA", ReasoningMode::kAppendThink, false, std::nullopt, "", "\nA");
}

TEST(ReasoningParser, PromptOpensReasoning) {
  const std::string head = "]~!b[]~b]system\nS[e~[\n]~b]user\nWhat is <think>?[e~[\n]~b]ai\n";
  EXPECT_TRUE(prompt_opens_reasoning(head + "<think>\n"));                       // the generation prompt
  EXPECT_TRUE(prompt_opens_reasoning(head + "<think>\nFirst,"));                 // a continued reasoning
  EXPECT_FALSE(prompt_opens_reasoning(head + "<think>\n</think>\n\n"));          // thinking closed
  EXPECT_FALSE(prompt_opens_reasoning(head + "<think>\nPlan.\n</think>\n\n{"));  // a continued answer
  EXPECT_FALSE(prompt_opens_reasoning(head + "{"));  // the user's own "<think>" is in another message
  EXPECT_FALSE(prompt_opens_reasoning(head + "Hello[e~[\n"));
}

}  // namespace
}  // namespace m2::text
