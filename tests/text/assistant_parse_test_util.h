// Helpers for the assistant-output parser tests: run the streaming parser
// over a chunking of an output, and check that its concatenated deltas equal
// the whole-text parse.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "text/assistant_output_parser.h"

namespace m2::text::testing {

struct StreamedCall {
  std::string id, name, arguments;
};

// The concatenation of a stream's deltas.
struct Streamed {
  std::string reasoning, content;
  std::vector<StreamedCall> calls;
  bool has_tool_calls = false;
  bool incomplete = false;
  std::vector<AssistantDelta> deltas;
};

inline Streamed run_stream(const AssistantParseOptions& options, const std::vector<std::string>& chunks) {
  AssistantStreamParser parser(options);
  Streamed s;
  auto take = [&](AssistantDelta d) {
    s.reasoning += d.reasoning_content;
    s.content += d.content;
    for (const ToolCallDelta& c : d.tool_calls) {
      if (!c.id.empty()) {
        EXPECT_EQ(c.index, static_cast<int>(s.calls.size())) << "a new call must take the next index";
        s.calls.push_back({c.id, c.name, ""});
      }
      EXPECT_FALSE(s.calls.empty()) << "arguments before the call's header";
      if (s.calls.empty()) continue;
      EXPECT_EQ(c.index, static_cast<int>(s.calls.size()) - 1) << "arguments must belong to the last call";
      s.calls.back().arguments += c.arguments;
      EXPECT_EQ(sanitize_utf8(c.arguments), c.arguments) << "a delta must be valid UTF-8";
    }
    EXPECT_EQ(sanitize_utf8(d.content), d.content) << "a delta must be valid UTF-8";
    EXPECT_EQ(sanitize_utf8(d.reasoning_content), d.reasoning_content) << "a delta must be valid UTF-8";
    s.deltas.push_back(std::move(d));
  };
  for (const std::string& chunk : chunks) take(parser.feed(chunk));
  take(parser.finish());
  s.has_tool_calls = parser.has_tool_calls();
  s.incomplete = parser.has_incomplete_tool_call();
  return s;
}

inline std::vector<std::string> chunks_of(std::string_view text, size_t size) {
  std::vector<std::string> out;
  for (size_t i = 0; i < text.size(); i += size) out.emplace_back(text.substr(i, size));
  return out;
}

// Number of keys of the top-level object of JSON text, duplicates included.
inline size_t count_top_level_keys(const std::string& text) {
  struct Counter : nlohmann::json_sax<OrderedJson> {
    int depth = 0;
    size_t keys = 0;
    bool null() override { return true; }
    bool boolean(bool) override { return true; }
    bool number_integer(number_integer_t) override { return true; }
    bool number_unsigned(number_unsigned_t) override { return true; }
    bool number_float(number_float_t, const string_t&) override { return true; }
    bool string(string_t&) override { return true; }
    bool binary(binary_t&) override { return true; }
    bool start_object(std::size_t) override { return ++depth, true; }
    bool key(string_t&) override { return keys += depth == 1, true; }
    bool end_object() override { return --depth, true; }
    bool start_array(std::size_t) override { return ++depth, true; }
    bool end_array() override { return --depth, true; }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }
  } counter;
  OrderedJson::sax_parse(text, &counter);
  return counter.keys;
}

// Checks that a stream equals the whole-text message: same parsed arguments,
// and the same arguments text unless a parameter was given twice (the stream
// then repeats the key; parse_tool_calls keeps one).
inline void expect_stream_equals(const AssistantMessage& whole, const Streamed& s, const std::string& where) {
  SCOPED_TRACE(where);
  EXPECT_EQ(whole.reasoning_content.value_or(""), s.reasoning);
  EXPECT_EQ(whole.content.value_or(""), s.content);
  EXPECT_FALSE(s.incomplete);
  EXPECT_EQ(s.has_tool_calls, !whole.tool_calls.empty());
  ASSERT_EQ(whole.tool_calls.size(), s.calls.size());
  for (size_t i = 0; i < s.calls.size(); ++i) {
    EXPECT_EQ(whole.tool_calls[i].id, s.calls[i].id);
    EXPECT_EQ(whole.tool_calls[i].name, s.calls[i].name);
    const OrderedJson streamed = OrderedJson::parse(s.calls[i].arguments, nullptr, false);
    ASSERT_FALSE(streamed.is_discarded()) << "streamed arguments are not JSON: " << s.calls[i].arguments;
    EXPECT_EQ(OrderedJson::parse(whole.tool_calls[i].arguments), streamed);
    if (count_top_level_keys(s.calls[i].arguments) == streamed.size()) {
      EXPECT_EQ(whole.tool_calls[i].arguments, s.calls[i].arguments);
    }
  }
}

// Streams `raw` split at every single byte position (two chunks), byte by
// byte, and in a few fixed chunk sizes; each must equal the whole-text parse.
inline AssistantMessage parse_and_check_streams(std::string_view raw, AssistantParseOptions options) {
  options.id_seed = 1234;
  const AssistantMessage whole = parse_assistant_output(raw, options);
  for (size_t split = 0; split <= raw.size(); ++split) {
    const Streamed s = run_stream(options, {std::string(raw.substr(0, split)), std::string(raw.substr(split))});
    expect_stream_equals(whole, s, "split at byte " + std::to_string(split));
    if (::testing::Test::HasFailure()) return whole;
  }
  for (size_t size : {1, 2, 3, 5, 7, 16}) {
    expect_stream_equals(whole, run_stream(options, chunks_of(raw, size)), "chunks of " + std::to_string(size));
  }
  return whole;
}

// Options for a request with these tools (JSON text of the `tools` array).
inline AssistantParseOptions options_with_tools(std::string_view tools_json,
                                                ReasoningMode mode = ReasoningMode::kSplit) {
  AssistantParseOptions options = options_from_request(Json{{"tools", Json::parse(tools_json)}});
  options.reasoning = mode;
  return options;
}

}  // namespace m2::text::testing
