// Schema-driven typing of MiniMax-M2 tool-call parameter values (spec §6.2).
//
// The model writes every parameter value as raw text; the request's tool
// schemas say what JSON value it stands for. The rules are vLLM's
// (MinimaxM2ToolParser._convert_param_value_with_types), so clients get
// the same arguments from us as from vLLM, with these deliberate
// differences:
//  - A value typed as string keeps its exact text (vLLM strip()s it, which
//    destroys the indentation of code arguments). Every other conversion
//    sees the value with Python-whitespace trimmed, as in vLLM.
//  - A value is null only when the value itself is a null word (null,
//    none, nil; any case), never because the schema allows null (SGLang's
//    bug turns every value of an `anyOf [string, null]` parameter into null).
//  - Integers outside int64/uint64, JSON with NaN/Infinity, numbers that
//    overflow a double, lone-surrogate escapes and JSON nested deeper than
//    kMaxJsonDepth are not converted (the next type in line is tried, and
//    in the end the raw string is kept). Python would keep big integers
//    exact, write the invalid tokens NaN/Infinity, or crash; an integral
//    "number" beyond int64 stays a float (1e+20, not 100000000000000000000).
//  - Only ASCII digits count as digits (Python's int() also takes other
//    scripts' digits, such as "٣").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "util/json.h"

namespace m2::text {

// The JSON types a parameter's schema allows, as vLLM collects them: the
// `type` field (string or list), the types of `enum` values, and recursively
// anyOf/oneOf/allOf. Names are compared lowercased, with vLLM's aliases.
struct ParamTypes {
  enum Bits : uint8_t {
    kInteger = 1 << 0,  // "integer", "int"
    kNumber = 1 << 1,   // "number", "float"
    kBoolean = 1 << 2,  // "boolean", "bool"
    kObject = 1 << 3,
    kArray = 1 << 4,
    kString = 1 << 5,  // "string", "str", "text"
    kOther = 1 << 6,   // any other name, including "null"
  };
  uint8_t bits = kString;  // default when the schema says nothing usable

  // True when every value converts to its own text as a JSON string, except
  // a null word (which becomes null): the streaming parser can then send the
  // string character by character.
  bool always_string() const { return bits == kString || bits == (kString | kOther); }
};

// Types of one parameter schema (a JSON Schema object). Not an object, or no
// type information: string. Recursion stops at kMaxSchemaDepth levels.
ParamTypes param_types_from_schema(const Json& schema);

// Parameter schemas of the tools of one request.
class ToolSchemas {
 public:
  ToolSchemas() = default;
  // `tools` is an OpenAI request's `tools` array (null or absent: no tools):
  // [{type: "function", function: {name, parameters: {properties: {...}}}}].
  // As in vLLM, the first tool with a given name wins; entries without a
  // function name are ignored.
  static ToolSchemas from_request_tools(const Json& tools);

  bool has_tool(std::string_view name) const { return tools_.count(std::string(name)) != 0; }
  // Types of `param` of `tool`; a tool or parameter the request does not
  // declare is a string.
  ParamTypes param_types(std::string_view tool, std::string_view param) const;

 private:
  // tool name -> (parameter name -> types)
  std::unordered_map<std::string, std::unordered_map<std::string, ParamTypes>> tools_;
};

constexpr int kMaxSchemaDepth = 64;
constexpr int kMaxJsonDepth = 256;

// Python's str.strip(): removes the characters for which str.isspace() is
// true (ASCII whitespace, \x1c-\x1f, U+0085, U+00A0, U+1680, U+2000-U+200A,
// U+2028, U+2029, U+202F, U+205F, U+3000) from both ends of UTF-8 text.
std::string_view trim_python_space(std::string_view utf8);
// Byte length of the leading run of such characters in `utf8`.
size_t python_space_prefix(std::string_view utf8);

// True if `trimmed` is null, none or nil in any letter case.
bool is_null_word(std::string_view trimmed);

// The JSON value of parameter text `value` (already without the newline the
// format puts after `>` and before `</parameter>`), following vLLM's order:
// null word -> null; then the first of integer, number, boolean, object,
// array, string that the schema allows and that applies; else JSON, else the
// raw text.
OrderedJson convert_param_value(std::string_view value, ParamTypes types);

}  // namespace m2::text
