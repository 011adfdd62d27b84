// Lexical rules of the MiniMax-M2 tool-call format (spec §6.1), shared by the
// whole-text parser (tool_call_parser.cpp) and the streaming parser
// (tool_call_stream.cpp) so that both decide every boundary the same way.
//
//   <minimax:tool_call>
//   <invoke name="NAME">
//   <parameter name="KEY">VALUE</parameter>
//   </invoke>
//   </minimax:tool_call>
//
// A VALUE is raw text and may itself contain `</parameter>`: a
// `</parameter>` ends the value only when what follows it (after at most
// kMaxTagGap spaces) is `<parameter name=` or `</invoke>`.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace m2::text::tool_syntax {

inline constexpr std::string_view kBlockOpen = "<minimax:tool_call>";
inline constexpr std::string_view kBlockClose = "</minimax:tool_call>";
inline constexpr std::string_view kInvokeOpen = "<invoke name=";
inline constexpr std::string_view kInvokeClose = "</invoke>";
inline constexpr std::string_view kParamOpen = "<parameter name=";
inline constexpr std::string_view kParamClose = "</parameter>";

// A tool or parameter name longer than this (bytes between `name=` and `>`)
// makes the tag malformed; it bounds what a streaming parser holds back.
inline constexpr size_t kMaxNameBytes = 256;
// The most spaces allowed between `</parameter>` and the tag that confirms
// it ends the value; it bounds the look-ahead of a streaming parser.
inline constexpr size_t kMaxTagGap = 64;

// Spaces allowed between tags: ' ', '\t', '\n', '\r'.
inline bool is_tag_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

enum class Scan {
  kFound,      // decided: yes
  kNeedMore,   // the text ends before it can be decided
  kMalformed,  // decided: no
};

// `text` follows `<invoke name=` or `<parameter name=`: the name runs to the
// first '>' (*end = its offset). kMalformed when a '\n' or '<' comes first
// or the name exceeds kMaxNameBytes.
Scan scan_name(std::string_view text, size_t* end);

// The name written between `name=` and '>': Python-space trimmed, then one
// pair of enclosing double or single quotes removed (as vLLM does). An empty
// result makes the tag malformed.
std::string unquote_name(std::string_view raw);

// `after` follows a `</parameter>`: kFound if the value ends there (up to
// kMaxTagGap tag spaces, then `<parameter name=` or `</invoke>`), kMalformed
// if the `</parameter>` is part of the value, kNeedMore if `after` ends first.
Scan classify_after_param_close(std::string_view after);

// Length of the longest suffix of `text` that is a proper prefix of `tag`:
// the bytes a streaming parser must hold back because they may start `tag`.
size_t partial_tag_suffix(std::string_view text, std::string_view tag);

}  // namespace m2::text::tool_syntax
