// Property: for random MiniMax-M2 outputs (well-formed, malformed, cut off)
// and random chunkings (down to single bytes, inside tags, escapes and
// UTF-8 characters), the concatenated stream deltas equal the whole-text
// parse. Fixed seeds: deterministic.
#include <gtest/gtest.h>

#include <random>

#include "assistant_parse_test_util.h"

namespace m2::text {
namespace {

constexpr std::string_view kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
    "location": {"type": "string"}, "days": {"type": "integer"}, "unit": {"enum": ["c", "f"]}}}}},
  {"type": "function", "function": {"name": "run", "parameters": {"type": "object", "properties": {
    "code": {"type": "string"}, "timeout": {"type": "number"}, "env": {"type": "object"},
    "args": {"type": "array"}, "dry": {"type": "boolean"}, "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    "n": {"type": ["integer", "null"]}}}}}
])";

class Generator {
 public:
  explicit Generator(uint32_t seed) : rng_(seed) {}

  // One raw output.
  std::string output() {
    std::string out;
    if (chance(5)) out += "<think>";
    out += text(kReasoningPieces);
    if (chance(10)) out += fake_block();
    if (chance(90)) out += "</think>" + pick({"", "\n", "\n\n", "\n\n\n"});
    const int segments = uniform(0, 3);
    for (int i = 0; i < segments; ++i) {
      out += text(kContentPieces);
      if (chance(80)) out += block();
    }
    if (chance(30)) out += text(kContentPieces);
    if (chance(20)) out.resize(uniform(0, static_cast<int>(out.size())));  // cut off (EOS / length)
    return out;
  }

  std::vector<std::string> chunking(const std::string& raw) {
    std::vector<std::string> chunks;
    const int max_size = pick_int({1, 2, 4, 8, 24});
    for (size_t i = 0; i < raw.size();) {
      const size_t n = uniform(1, max_size);
      chunks.push_back(raw.substr(i, n));
      i += n;
    }
    return chunks;
  }

  bool chance(int percent) { return uniform(0, 99) < percent; }
  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

 private:
  static constexpr std::string_view kReasoningPieces[] = {
      "Let me think.", "\n", "\n\n", " ", "The user asks <about> x.", "</thi", "<think", "😀", "é", "中文",
      "<minimax:tool", "a < b > c", "\t", "</parameter>"};
  static constexpr std::string_view kContentPieces[] = {
      "Sure.", "\n", " ", "\n\n", "Done!", "<minimax:to", "</minimax:tool_call>", "<invoke name=\"x\">",
      "ünïcödé", "👩‍👩‍👧", "<", "code:\n    x = 1\n", "\r\n", "\xF0\x9F", "\xC3"};
  static constexpr std::string_view kValues[] = {
      "Paris", "3", "3.0", "-2", "1e3", "null", "None", " nil ", "true", "yes", "off", "maybe", "",
      "{\"a\": [1, 2.5, {\"b\": null}]}", "[1, \"x\"]", "{bad json", "    indented\n\ttabs  ", "\n",
      "x</parameter>y", "a</parameter>\n</minimax:tool_call>", "</invoke>", "\"quoted\" \\ back",
      "東京 🇯🇵", "\x01\x1f", "line1\nline2\n", "1_000", "nul", "<parameter name=\"k\">",
      "\xE3\x80\x80null\xC2\xA0",
      "x</parameter>                                                                   </invoke>"};

  std::string pick(std::initializer_list<std::string_view> options) {
    return std::string(*(options.begin() + uniform(0, static_cast<int>(options.size()) - 1)));
  }
  int pick_int(std::initializer_list<int> options) {
    return *(options.begin() + uniform(0, static_cast<int>(options.size()) - 1));
  }
  template <size_t N>
  std::string text(const std::string_view (&pieces)[N]) {
    std::string out;
    const int n = uniform(0, 4);
    for (int i = 0; i < n; ++i) out += pieces[uniform(0, static_cast<int>(N) - 1)];
    return out;
  }
  std::string space() { return pick({"", "\n", "\n", " ", "\n\n", " \t\n"}); }

  std::string quoted(std::string_view name) {
    switch (uniform(0, 9)) {
      case 0: return "'" + std::string(name) + "'";
      case 1: return std::string(name);
      default: return "\"" + std::string(name) + "\"";
    }
  }

  std::string invoke() {
    static const std::vector<std::pair<std::string, std::vector<std::string>>> kCalls = {
        {"get_weather", {"location", "days", "unit", "extra"}},
        {"run", {"code", "timeout", "env", "args", "dry", "note", "n"}},
        {"unknown_tool", {"q", "z"}}};
    const auto& [name, params] = kCalls[uniform(0, static_cast<int>(kCalls.size()) - 1)];
    std::string shown = name;
    if (chance(3)) shown = "bad\nname";
    if (chance(2)) shown = std::string(300, 'a');  // longer than a name may be
    std::string out = "<invoke name=" + quoted(shown) + ">" + space();
    const int n = uniform(0, 4);
    for (int i = 0; i < n; ++i) {
      const std::string& p = params[uniform(0, static_cast<int>(params.size()) - 1)];
      std::string value(kValues[uniform(0, static_cast<int>(std::size(kValues)) - 1)]);
      if (chance(30)) value += kValues[uniform(0, static_cast<int>(std::size(kValues)) - 1)];
      if (chance(70)) value = "\n" + value + "\n";
      out += "<parameter name=" + quoted(p) + ">" + value + "</parameter>" + space();
      if (chance(3)) out += "junk ";
    }
    return out + (chance(97) ? "</invoke>" : "") + space();
  }

  std::string block() {
    std::string out = "<minimax:tool_call>" + space();
    if (chance(5)) out += "junk";
    const int n = uniform(chance(5) ? 0 : 1, 3);
    for (int i = 0; i < n; ++i) out += invoke();
    if (chance(90)) out += "</minimax:tool_call>";
    return out;
  }

  std::string fake_block() {
    return "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"days\">1</parameter>\n"
           "</invoke>\n</minimax:tool_call>";
  }

  std::mt19937 rng_;
};

void check_incomplete(const AssistantMessage& whole, const testing::Streamed& s) {
  // The stream sent the name of a call the text never finished: the calls
  // before it agree, and the whole-text parse returns its text as content.
  ASSERT_EQ(s.calls.size(), whole.tool_calls.size() + 1);
  for (size_t i = 0; i < whole.tool_calls.size(); ++i) {
    EXPECT_EQ(whole.tool_calls[i].id, s.calls[i].id);
    const OrderedJson streamed = OrderedJson::parse(s.calls[i].arguments);
    EXPECT_EQ(OrderedJson::parse(whole.tool_calls[i].arguments), streamed);
    if (testing::count_top_level_keys(s.calls[i].arguments) == streamed.size()) {
      EXPECT_EQ(whole.tool_calls[i].arguments, s.calls[i].arguments);
    }
  }
  EXPECT_EQ(whole.reasoning_content.value_or(""), s.reasoning);
  const std::string content = whole.content.value_or("");
  ASSERT_EQ(content.substr(0, s.content.size()), s.content);
  std::string_view tail = std::string_view(content).substr(s.content.size());
  while (!tail.empty() && (tail[0] == ' ' || tail[0] == '\n' || tail[0] == '\t' || tail[0] == '\r')) {
    tail.remove_prefix(1);
  }
  EXPECT_TRUE(tail.substr(0, 19) == "<minimax:tool_call>" || tail.substr(0, 13) == "<invoke name=") << tail;
}

void run_property(uint32_t seed, int outputs) {
  Generator gen(seed);
  int with_calls = 0, incomplete = 0;
  for (int i = 0; i < outputs; ++i) {
    const std::string raw = gen.output();
    AssistantParseOptions options = testing::options_with_tools(
        kTools, gen.chance(50) ? ReasoningMode::kSplit : ReasoningMode::kAppendThink);
    options.starts_in_reasoning = gen.chance(90);
    options.parse_tool_calls = gen.chance(95);
    switch (gen.uniform(0, 5)) {  // tool_choice none, a named or allowed subset, or every tool
      case 0: options.allowed_tools = ToolNameSet{}; break;
      case 1: options.allowed_tools = ToolNameSet{"get_weather"}; break;
      case 2: options.allowed_tools = ToolNameSet{"run", "unknown_tool"}; break;
      default: break;
    }
    options.id_seed = seed * 100000u + i;
    const AssistantMessage whole = parse_assistant_output(raw, options);
    with_calls += !whole.tool_calls.empty();
    std::vector<std::vector<std::string>> chunkings = {testing::chunks_of(raw, 1)};
    for (int k = 0; k < 4; ++k) chunkings.push_back(gen.chunking(raw));
    for (int k = 0; k < 4; ++k) {
      const size_t at = gen.uniform(0, static_cast<int>(raw.size()));
      chunkings.push_back({raw.substr(0, at), raw.substr(at)});
    }
    for (const auto& chunks : chunkings) {
      SCOPED_TRACE(::testing::Message() << "seed " << seed << " output " << i << ": " << raw);
      const testing::Streamed s = testing::run_stream(options, chunks);
      if (s.incomplete) {
        ++incomplete;
        check_incomplete(whole, s);
      } else {
        testing::expect_stream_equals(whole, s, "chunked");
      }
      if (::testing::Test::HasFailure()) return;
    }
  }
  // The generator must exercise both sides of the property.
  EXPECT_GT(with_calls, outputs / 5);
  EXPECT_GT(incomplete, 0);
}

TEST(AssistantOutputProperty, StreamEqualsWholeTextSeed1) { run_property(1, 700); }
TEST(AssistantOutputProperty, StreamEqualsWholeTextSeed2) { run_property(2, 700); }
TEST(AssistantOutputProperty, StreamEqualsWholeTextSeed3) { run_property(3, 700); }

}  // namespace
}  // namespace m2::text
