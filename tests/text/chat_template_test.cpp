// ChatTemplate loading and OpenAI request normalisation. The two MiniMax-M2
// renders are the "verified rendering" examples of docs m2-spec.md §5.3,
// produced there with Hugging Face's environment.
#include "text/chat_template.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "text/chat_request.h"

namespace m2::text {
namespace {

namespace fs = std::filesystem;

const std::string kFixtures = std::string(M2CPP_SOURCE_DIR) + "/tests/data/chat_templates/";

OrderedJson json(std::string_view text) {
  auto j = parse_ordered_json(text, "test");
  EXPECT_TRUE(j.ok()) << j.status().message();
  return j.ok() ? j.value() : OrderedJson();
}

Result<std::string> render_request(const std::string& fixture, std::string_view request) {
  M2_ASSIGN_OR_RETURN(ChatTemplate t, ChatTemplate::load_from_dir(kFixtures + fixture));
  return t.render_request(json(request));
}

// A scratch model directory, removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("m2cpp_tpl_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name, std::ios::binary) << text;
  }
};

TEST(ChatTemplate, MiniMaxM2SpecExampleWithToolCall) {
  auto out = render_request("minimax-m2", R"({
    "messages": [
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": null, "reasoning_content": "Need to call tool.",
       "tool_calls": [{"id": "c1", "type": "function",
                       "function": {"name": "get_weather", "arguments": "{\"location\": \"Paris\", \"days\": 2}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "{\"temp\": 20}"},
      {"role": "tool", "tool_call_id": "c1", "content": "second"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Get weather",
      "parameters": {"type": "object", "properties": {"location": {"type": "string"}, "days": {"type": "integer"}},
                     "required": ["location"]}}}]})");
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out.value(),
            "]~!b[]~b]system\nYou are a helpful assistant.\n\n# Tools\nYou may call one or more tools to assist with "
            "the user query.\nHere are the tools available in JSONSchema format:\n\n<tools>\n<tool>{\"name\": "
            "\"get_weather\", \"description\": \"Get weather\", \"parameters\": {\"type\": \"object\", \"properties\": "
            "{\"location\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}}, \"required\": "
            "[\"location\"]}}</tool>\n</tools>\n\nWhen making tool calls, use XML format to invoke tools and pass "
            "parameters:\n\n<minimax:tool_call>\n<invoke name=\"tool-name-1\">\n<parameter "
            "name=\"param-key-1\">param-value-1</parameter>\n<parameter "
            "name=\"param-key-2\">param-value-2</parameter>\n...\n</invoke>\n</minimax:tool_call>[e~[\n]~b]user\n"
            "Weather in Paris?[e~[\n]~b]ai\n<think>\nNeed to call tool.\n</think>\n\n\n<minimax:tool_call>\n<invoke "
            "name=\"get_weather\">\n<parameter name=\"location\">Paris</parameter>\n<parameter "
            "name=\"days\">2</parameter>\n</invoke>\n</minimax:tool_call>[e~[\n]~b]tool\n<response>{\"temp\": "
            "20}</response>\n<response>second</response>[e~[\n]~b]ai\n<think>\n");
}

TEST(ChatTemplate, MiniMaxM2SpecExampleSecondTurnDropsOldReasoning) {
  auto out = render_request("minimax-m2", R"({"messages": [
      {"role": "user", "content": "Hi"},
      {"role": "assistant", "content": "Hello!", "reasoning_content": "greeting"},
      {"role": "user", "content": "Again"}]})");
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out.value(),
            "]~!b[]~b]system\nYou are a helpful assistant.[e~[\n]~b]user\nHi[e~[\n]~b]ai\nHello![e~[\n]~b]user\nAgain"
            "[e~[\n]~b]ai\n<think>\n");
}

TEST(ChatTemplate, TemplateRaiseIsAnError) {
  auto out = render_request("minimax-m2", R"({"messages": [{"role": "user", "content": "x"},
                                                          {"role": "tool", "content": "orphan"}]})");
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find(
                "Message has tool role, but there was no previous assistant message with a tool call!"),
            std::string::npos);
  EXPECT_NE(out.status().message().find("chat_template.jinja: line 129"), std::string::npos) << out.status().message();
}

TEST(ChatTemplate, AddedTokenObjectsBecomeTheirText) {
  // deepseek-v3's tokenizer_config writes bos_token as an AddedToken object.
  auto out = render_request("deepseek-v3", R"({"messages": [{"role": "user", "content": "Hi"}]})");
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out.value(),
            "<\xef\xbd\x9c"
            "begin\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c><\xef\xbd\x9cUser\xef\xbd\x9c>Hi<\xef\xbd\x9c"
            "Assistant\xef\xbd\x9c>");
}

TEST(ChatTemplate, ChatTemplateKwargsReachTheTemplate) {
  auto out = render_request("qwen3", R"({"messages": [{"role": "user", "content": "Hi"}],
                                        "chat_template_kwargs": {"enable_thinking": false}})");
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out.value(), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  auto no_prompt = render_request("qwen3", R"({"messages": [{"role": "user", "content": "Hi"}],
                                              "add_generation_prompt": false})");
  ASSERT_TRUE(no_prompt.ok());
  EXPECT_EQ(no_prompt.value(), "<|im_start|>user\nHi<|im_end|>\n");
}

TEST(ChatTemplate, ContinueFinalMessageLeavesTheTurnOpen) {
  const std::string head = "]~!b[]~b]system\nYou are a helpful assistant.[e~[\n]~b]user\nHi[e~[\n]~b]ai\n";
  auto prefill = render_request("minimax-m2", R"({"messages": [{"role": "user", "content": "Hi"},
      {"role": "assistant", "content": "{\"answer\": "}], "continue_final_message": true})");
  ASSERT_TRUE(prefill.ok()) << prefill.status().message();
  EXPECT_EQ(*prefill, head + "{\"answer\": ") << "the trailing space is kept: the template kept it";
  // With its reasoning: the reasoning is rendered closed, the answer continues.
  auto reasoned = render_request("minimax-m2", R"({"messages": [{"role": "user", "content": "Hi"},
      {"role": "assistant", "reasoning_content": "Plan.", "content": "Sure"}], "continue_final_message": true})");
  ASSERT_TRUE(reasoned.ok()) << reasoned.status().message();
  EXPECT_EQ(*reasoned, head + "<think>\nPlan.\n</think>\n\nSure");
  // Reasoning only: the model continues its reasoning.
  auto thinking = render_request("minimax-m2", R"({"messages": [{"role": "user", "content": "Hi"},
      {"role": "assistant", "reasoning_content": "First,", "content": ""}], "continue_final_message": true})");
  ASSERT_TRUE(thinking.ok()) << thinking.status().message();
  EXPECT_EQ(*thinking, head + "<think>\nFirst,");
  // add_generation_prompt false alone: the prompt ends where the last message does.
  auto closed = render_request("minimax-m2", R"({"messages": [{"role": "user", "content": "Hi"},
      {"role": "assistant", "content": "Hello"}], "add_generation_prompt": false})");
  ASSERT_TRUE(closed.ok());
  EXPECT_EQ(*closed, head + "Hello[e~[\n");
  for (const char* bad : {
           R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": " "}],
               "continue_final_message": true})",
           R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "x", "tool_calls": [
               {"type": "function", "function": {"name": "f", "arguments": {}}}]}], "continue_final_message": true})"}) {
    auto r = render_request("minimax-m2", bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message().rfind("continue_final_message: ", 0), 0u) << r.status().message();
  }
}

TEST(ChatTemplate, EnableThinkingFalseClosesM2sReasoning) {
  // M2's template has no switch: the server closes the generation prompt's <think>.
  auto off = render_request("minimax-m2", R"({"messages": [{"role": "user", "content": "Hi"}],
                                             "chat_template_kwargs": {"enable_thinking": false}})");
  ASSERT_TRUE(off.ok()) << off.status().message();
  EXPECT_EQ(*off, "]~!b[]~b]system\nYou are a helpful assistant.[e~[\n]~b]user\nHi[e~[\n]~b]ai\n<think>\n</think>\n\n");
  auto on = render_request("minimax-m2", R"({"messages": [{"role": "user", "content": "Hi"}],
                                            "chat_template_kwargs": {"enable_thinking": true}})");
  ASSERT_TRUE(on.ok());
  EXPECT_EQ(on->substr(on->size() - 8), "<think>\n");
  auto m2 = ChatTemplate::load_from_dir(kFixtures + "minimax-m2");
  auto qwen = ChatTemplate::load_from_dir(kFixtures + "qwen3");
  ASSERT_TRUE(m2.ok() && qwen.ok());
  EXPECT_FALSE(m2->handles_thinking_switch());
  EXPECT_TRUE(qwen->handles_thinking_switch()) << "qwen3 renders its own (see ChatTemplateKwargsReachTheTemplate)";
}

TEST(ChatTemplate, JinjaFileWinsOverTokenizerConfig) {
  TempDir dir;
  dir.write("chat_template.jinja", "from file {{ bos_token }}");
  dir.write("tokenizer_config.json", R"({"bos_token": "<s>", "chat_template": "from config"})");
  auto t = ChatTemplate::load_from_dir(dir.path.string());
  ASSERT_TRUE(t.ok()) << t.status().message();
  auto out = t->render_request(json(R"({"messages": [{"role": "user", "content": "x"}]})"));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out.value(), "from file <s>");
}

TEST(ChatTemplate, ListFormPicksDefaultOrToolUse) {
  TempDir dir;
  dir.write("tokenizer_config.json", R"({"chat_template": [
      {"name": "tool_use", "template": "tools:{{ tools|length }}"},
      {"name": "default", "template": "default"}]})");
  auto t = ChatTemplate::load_from_dir(dir.path.string());
  ASSERT_TRUE(t.ok()) << t.status().message();
  auto plain = t->render_request(json(R"({"messages": [{"role": "user", "content": "x"}]})"));
  auto tools = t->render_request(json(R"({"messages": [{"role": "user", "content": "x"}],
                                           "tools": [{"type": "function", "function": {"name": "f"}}]})"));
  ASSERT_TRUE(plain.ok() && tools.ok());
  EXPECT_EQ(plain.value(), "default");
  EXPECT_EQ(tools.value(), "tools:1");
}

TEST(ChatTemplate, LoadErrorsNameTheFile) {
  TempDir dir;
  auto none = ChatTemplate::load_from_dir(dir.path.string());
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no chat template"), std::string::npos);

  dir.write("tokenizer_config.json", R"({"chat_template": [{"name": "other", "template": "x"}]})");
  auto no_default = ChatTemplate::load_from_dir(dir.path.string());
  ASSERT_FALSE(no_default.ok());
  EXPECT_NE(no_default.status().message().find("no 'default' entry"), std::string::npos);

  dir.write("tokenizer_config.json", R"({"chat_template": "{% for %}"})");
  auto bad = ChatTemplate::load_from_dir(dir.path.string());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            dir.path.string() +
                ": tokenizer_config.json: chat_template: line 1, column 8: Expected an expression, got 'end of "
                "statement block'");
  // Render errors go to API clients: they name the template's file, not where the server keeps it.
  dir.write("tokenizer_config.json", R"({"chat_template": "{{ raise_exception('no') }}"})");
  auto raising = ChatTemplate::load_from_dir(dir.path.string());
  ASSERT_TRUE(raising.ok()) << raising.status().message();
  auto rendered = raising->render_request(json(R"({"messages": [{"role": "user", "content": "x"}]})"));
  ASSERT_FALSE(rendered.ok());
  EXPECT_EQ(rendered.status().message().rfind("tokenizer_config.json: chat_template: line 1", 0), 0u)
      << rendered.status().message();
  EXPECT_EQ(rendered.status().message().find(dir.path.string()), std::string::npos);

  dir.write("tokenizer_config.json", "{\"chat_template\": ");
  auto broken = ChatTemplate::load_from_dir(dir.path.string());
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("invalid JSON at byte"), std::string::npos);
}

TEST(ChatTemplate, DetectsTemplatesThatHandleContentParts) {
  auto m2 = ChatTemplate::load_from_dir(kFixtures + "minimax-m2");
  auto qwen = ChatTemplate::load_from_dir(kFixtures + "qwen3");
  ASSERT_TRUE(m2.ok() && qwen.ok());
  EXPECT_TRUE(m2->handles_content_parts());
  EXPECT_FALSE(qwen->handles_content_parts());
}

TEST(NormalizeOpenAiMessages, AppliesEveryRule) {
  auto out = normalize_openai_messages(json(R"({"messages": [
      {"role": "system", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
      {"role": "user", "content": "q", "name": null},
      {"role": "assistant", "content": null, "reasoning": "r", "tool_calls": [
          {"id": "1", "type": "function", "function": {"name": "f", "arguments": "{\"z\": 1, \"a\": [true]}"}},
          {"id": "2", "type": "function", "function": {"name": "g", "arguments": ""}},
          {"id": "3", "type": "function", "function": {"name": "h", "arguments": {"k": "v"}}}]},
      {"role": "tool", "tool_call_id": "1", "content": null}]})"),
                                       /*keep_content_parts=*/false);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->dump(),
            R"([{"role":"system","content":"a\nb"},{"role":"user","content":"q"},)"
            R"({"role":"assistant","content":"","reasoning":"r","tool_calls":[)"
            R"({"id":"1","type":"function","function":{"name":"f","arguments":{"z":1,"a":[true]}}},)"
            R"({"id":"2","type":"function","function":{"name":"g","arguments":{}}},)"
            R"({"id":"3","type":"function","function":{"name":"h","arguments":{"k":"v"}}}],"reasoning_content":"r"},)"
            R"({"role":"tool","tool_call_id":"1","content":""}])");
  auto parts = normalize_openai_messages(
      json(R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}]}]})"), true);
  ASSERT_TRUE(parts.ok());
  EXPECT_EQ(parts->dump(), R"([{"role":"user","content":[{"type":"text","text":"a"}]}])");
}

TEST(NormalizeOpenAiMessages, ErrorsNameTheMessage) {
  auto error = [](std::string_view request) {
    auto out = prepare_chat_template_inputs(json(request), true);
    EXPECT_FALSE(out.ok());
    return out.ok() ? std::string() : out.status().message();
  };
  EXPECT_EQ(error(R"({"messages": []})"), "messages: the conversation is empty");
  EXPECT_EQ(error(R"({"model": "x"})"), "request: missing field 'messages'");
  EXPECT_EQ(error(R"({"messages": [{"content": "x"}]})"), "messages[0]: missing string field 'role'");
  EXPECT_EQ(error(R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [
                {"function": {"name": "f", "arguments": "{bad"}}]}]})")
                .substr(0, 66),
            "messages[1].tool_calls[0].function.arguments: invalid JSON at byte");
  EXPECT_EQ(error(R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]})"),
            "messages[0].content[0]: content part type 'image_url' is not supported (this model takes text only)");
  EXPECT_EQ(error(R"({"messages": [{"role": "user", "content": 5}]})"),
            "messages[0].content: expected a string, an array of parts or null, got number");
  EXPECT_EQ(error(R"({"messages": [{"role": "user", "content": "x"}], "tools": {}})"),
            "tools: expected an array, got object");
  EXPECT_EQ(error(R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"messages": []}})"),
            "chat_template_kwargs: 'messages' cannot be set here; use the request field");
  EXPECT_EQ(error(R"({"messages": [{"role": "user", "content": "x"}], "continue_final_message": 1})"),
            "continue_final_message: expected a boolean, got number");
  EXPECT_EQ(error(R"({"messages": [{"role": "assistant", "content": "x"}], "continue_final_message": true,
                     "add_generation_prompt": true})"),
            "continue_final_message and add_generation_prompt cannot both be true");
}

}  // namespace
}  // namespace m2::text
