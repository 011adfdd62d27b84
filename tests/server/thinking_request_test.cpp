// The thinking fields (thinking_request.h): reasoning_effort's budgets and
// "none", vLLM's thinking_token_budget, the Anthropic `thinking` and
// `output_config.effort` conversions, and what reaches the prompt and the
// engine job.
#include <gtest/gtest.h>

#include "server/anthropic_request.h"
#include "server/chat_prompt.h"
#include "server/thinking_request.h"
#include "tiny_chat_test_base.h"

namespace m2::server {
namespace {

const ThinkingSigner& signer() {
  static const ThinkingSigner s;
  return s;
}

OrderedJson J(const std::string& text) { return OrderedJson::parse(text); }

Result<ThinkingRequest> parse(const std::string& body, OrderedJson* request = nullptr) {
  OrderedJson scratch = J(body);
  return parse_thinking_request(J(body), request ? *request : scratch);
}

TEST(ThinkingRequest, EffortsAndBudgets) {
  EXPECT_EQ(parse("{}")->budget, -1);
  EXPECT_EQ(parse(R"({"reasoning_effort": "minimal"})")->budget, 256);
  EXPECT_EQ(parse(R"({"reasoning_effort": "low"})")->budget, 1024);
  EXPECT_EQ(parse(R"({"reasoning_effort": "medium"})")->budget, 4096);
  EXPECT_EQ(parse(R"({"reasoning_effort": "high"})")->budget, 16384);
  EXPECT_EQ(parse(R"({"reasoning_effort": "xhigh"})")->budget, 32768);
  EXPECT_EQ(parse(R"({"reasoning_effort": "max"})")->budget, -1);
  EXPECT_EQ(parse(R"({"reasoning_effort": "low", "thinking_token_budget": 7})")->budget, 7) << "the budget wins";
  EXPECT_EQ(parse(R"({"thinking_token_budget": 0})")->budget, 0);
  OrderedJson request = J("{}");
  ASSERT_TRUE(parse(R"({"reasoning_effort": "none"})", &request).ok());
  EXPECT_EQ(request["chat_template_kwargs"], J(R"({"enable_thinking": false})"));
  OrderedJson explicit_on = J(R"({"chat_template_kwargs": {"enable_thinking": true}})");
  ASSERT_TRUE(parse(R"({"reasoning_effort": "none"})", &explicit_on).ok());
  EXPECT_EQ(explicit_on["chat_template_kwargs"]["enable_thinking"], true) << "the request's own switch is kept";
  for (const auto& [body, message] : std::vector<std::pair<std::string, std::string>>{
           {R"({"reasoning_effort": "huge"})", "'reasoning_effort' must be none, minimal"},
           {R"({"reasoning_effort": 1})", "'reasoning_effort' must be a string"},
           {R"({"thinking_token_budget": -1})", "'thinking_token_budget' must be a non-negative"},
           {R"({"thinking_token_budget": 1.5})", "'thinking_token_budget'"}}) {
    auto r = parse(body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_NE(r.status().message().find(message), std::string::npos) << r.status().message();
  }
}

TEST(ThinkingRequest, AnthropicThinkingAndEffort) {
  auto convert = [](const std::string& extra) {
    return parse_anthropic_request(J(R"({"max_tokens": 50, "messages": [{"role": "user", "content": "q"}], )" + extra +
                                     "}"),
                                   SamplingParams(), signer(), false);
  };
  auto off = convert(R"("thinking": {"type": "disabled"})");
  ASSERT_TRUE(off.ok()) << off.status().message();
  EXPECT_EQ(off->chat_body["chat_template_kwargs"], J(R"({"enable_thinking": false})"));
  auto on = convert(R"("thinking": {"type": "enabled", "budget_tokens": 12, "display": "summarized"})");
  ASSERT_TRUE(on.ok()) << on.status().message();
  EXPECT_EQ(on->chat_body["thinking_token_budget"], 12);
  auto adaptive = convert(R"("thinking": {"type": "adaptive"}, "output_config": {"effort": "medium"})");
  ASSERT_TRUE(adaptive.ok()) << adaptive.status().message();
  EXPECT_FALSE(adaptive->chat_body.contains("thinking_token_budget"));
  EXPECT_EQ(adaptive->chat_body["reasoning_effort"], "medium");
  auto format = convert(R"("output_config": {"format": {"type": "json_schema", "schema": {"type": "object"}}})");
  ASSERT_TRUE(format.ok()) << format.status().message();
  EXPECT_EQ(format->chat_body["response_format"],
            J(R"({"type": "json_schema", "json_schema": {"name": "output", "schema": {"type": "object"}}})"));
  for (const auto& [extra, message] : std::vector<std::pair<std::string, std::string>>{
           {R"("thinking": {"type": "enabled"})", "thinking.budget_tokens: Field required"},
           {R"("thinking": {"type": "enabled", "budget_tokens": 0})", "'thinking.budget_tokens' must be at least 1"},
           {R"("thinking": {"type": "between_tools"})", "'thinking.type' must be enabled, disabled or adaptive"},
           {R"("thinking": {"type": "enabled", "budget_tokens": 5, "display": "omitted"})", "'thinking.display'"},
           {R"("thinking": "on")", "'thinking' must be an object"},
           {R"("output_config": {"effort": "none"})", "'output_config.effort' must be low"},
           {R"("output_config": {"format": {"type": "json_schema"}})", "'output_config.format.schema' must be an object"},
           {R"("output_config": {"format": {"type": "xml"}})", "'output_config.format' must be an object with type"}}) {
    auto r = convert(extra);
    ASSERT_FALSE(r.ok()) << extra;
    EXPECT_NE(r.status().message().find(message), std::string::npos) << r.status().message();
  }
}

class ThinkingPromptTest : public TinyChatTest {
 protected:
  Result<ChatTurn> turn(const std::string& extra) {
    return build_chat_turn(J(R"({"messages": [{"role": "user", "content": "q"}])" + extra + "}"), SamplingRequest(),
                           ctx_, false);
  }
};

TEST_F(ThinkingPromptTest, BudgetReachesTheJobAndNoneClosesTheReasoning) {
  const int32_t close = *tokenizer_->token_to_id("</think>");
  auto budget = turn(R"(, "thinking_token_budget": 9)");
  ASSERT_TRUE(budget.ok()) << budget.status().message();
  EXPECT_EQ(budget->job.params.reasoning_budget, 9);
  EXPECT_EQ(budget->job.params.reasoning_end_token, close);
  EXPECT_EQ(budget->prompt.reasoning_end_token, close);
  auto none = turn(R"(, "reasoning_effort": "none", "thinking_token_budget": 9)");
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_TRUE(none->prompt.text.ends_with("]~b]ai\n<think>\n</think>\n\n"));
  EXPECT_FALSE(none->prompt.parse.starts_in_reasoning);
  EXPECT_EQ(none->job.params.reasoning_budget, -1) << "no open reasoning: nothing to cap";
  EXPECT_EQ(none->prompt.reasoning_end_token, -1);
  auto kwargs = turn(R"(, "chat_template_kwargs": {"enable_thinking": false})");
  ASSERT_TRUE(kwargs.ok());
  EXPECT_EQ(kwargs->prompt.text, none->prompt.text);
}

}  // namespace
}  // namespace m2::server
