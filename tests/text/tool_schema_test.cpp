// Parameter types from schemas (vLLM's _extract_types_from_schema) and the
// value conversion edge cases. tests/text/test_parse_reference.py checks the
// conversions against Python's own int/float/json on many more values.
#include "text/tool_schema.h"

#include <gtest/gtest.h>

namespace m2::text {
namespace {

uint8_t types_of(std::string_view schema) { return param_types_from_schema(Json::parse(schema)).bits; }

TEST(ToolSchema, TypesFromSchema) {
  using T = ParamTypes;
  EXPECT_EQ(types_of(R"({"type": "integer"})"), T::kInteger);
  EXPECT_EQ(types_of(R"({"type": "INT"})"), T::kInteger);
  EXPECT_EQ(types_of(R"({"type": ["number", "null"]})"), T::kNumber | T::kOther);
  EXPECT_EQ(types_of(R"({"enum": [1, 2.5, "a", true, null, [1], {"k": 1}]})"),
            T::kInteger | T::kNumber | T::kString | T::kBoolean | T::kOther | T::kArray | T::kObject);
  EXPECT_EQ(types_of(R"({"anyOf": [{"type": "integer"}, {"type": "null"}]})"), T::kInteger | T::kOther);
  EXPECT_EQ(types_of(R"({"oneOf": [{"type": "boolean"}, {"description": "no type"}]})"), T::kBoolean | T::kString);
  EXPECT_EQ(types_of(R"({"allOf": [{"anyOf": [{"type": "array"}]}], "type": "object"})"), T::kArray | T::kObject);
  EXPECT_EQ(types_of(R"({})"), T::kString);
  EXPECT_EQ(types_of(R"("integer")"), T::kString);
  EXPECT_EQ(types_of(R"({"type": "text"})"), T::kString);
  EXPECT_TRUE(param_types_from_schema(Json::parse(R"({"type": ["string", "null"]})")).always_string());
  EXPECT_FALSE(param_types_from_schema(Json::parse(R"({"type": ["string", "integer"]})")).always_string());
}

TEST(ToolSchema, DeepSchemaIsBounded) {
  // 10,000 nested anyOf (from a hostile request): no stack overflow; types
  // below kMaxSchemaDepth count as string.
  std::string text;
  for (int i = 0; i < 10000; ++i) text += R"({"anyOf": [)";
  text += R"({"type": "integer"})";
  for (int i = 0; i < 10000; ++i) text += "]}";
  EXPECT_EQ(param_types_from_schema(Json::parse(text)).bits, ParamTypes::kString);
}

TEST(ToolSchema, FirstToolOfANameWins) {
  const ToolSchemas s = ToolSchemas::from_request_tools(Json::parse(R"([
    {"type": "function", "function": {"name": "f", "parameters": {"properties": {"x": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "f", "parameters": {"properties": {"x": {"type": "boolean"}}}}},
    {"type": "function", "function": {"parameters": {}}}, 5, {"function": {"name": 7}}])"));
  EXPECT_TRUE(s.has_tool("f"));
  EXPECT_EQ(s.param_types("f", "x").bits, ParamTypes::kInteger);
  EXPECT_EQ(s.param_types("f", "y").bits, ParamTypes::kString);
  EXPECT_EQ(s.param_types("g", "x").bits, ParamTypes::kString);
}

TEST(ToolSchema, PythonWhitespaceTrim) {
  EXPECT_EQ(trim_python_space("\xE3\x80\x80 \t\x1c x y\xC2\xA0\xE2\x80\xA8\n"), "x y");
  EXPECT_EQ(trim_python_space("\xE2\x80\x8B" "x"), "\xE2\x80\x8B" "x");  // U+200B is not a space
  EXPECT_EQ(trim_python_space(" \n "), "");
}

TEST(ToolSchema, ConversionLimits) {
  ParamTypes json_only;
  json_only.bits = ParamTypes::kObject;
  // Deeper than kMaxJsonDepth: kept as text rather than parsed.
  const std::string deep = std::string(300, '[') + std::string(300, ']');
  EXPECT_EQ(convert_param_value(deep, json_only), deep);
  EXPECT_EQ(convert_param_value("[[1]]", json_only), OrderedJson::parse("[[1]]"));
  EXPECT_EQ(convert_param_value("\xEF\xBB\xBF{}", json_only), "\xEF\xBB\xBF{}");
  EXPECT_EQ(convert_param_value("NaN", json_only), "NaN");
  ParamTypes number;
  number.bits = ParamTypes::kNumber;
  EXPECT_EQ(convert_param_value("1e400", number), "1e400");
  EXPECT_EQ(convert_param_value("inf", number), "inf");
  EXPECT_EQ(convert_param_value("1e-400", number), OrderedJson(0));
  EXPECT_EQ(convert_param_value("1__0", number), "1__0");
  EXPECT_EQ(convert_param_value("_1", number), "_1");
  EXPECT_EQ(convert_param_value(".5", number), OrderedJson(0.5));
  EXPECT_EQ(convert_param_value("5.", number), OrderedJson(5));
}

}  // namespace
}  // namespace m2::text
