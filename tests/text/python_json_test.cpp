// json.dumps(ensure_ascii=False) compatibility. The values were printed by
// CPython 3.11 (`repr(float)`, `json.dumps(x, ensure_ascii=False)`); the
// differential test tests/text/test_parse_reference.py checks many more
// against Python directly.
#include "text/python_json.h"

#include <gtest/gtest.h>

#include <cmath>

namespace m2::text {
namespace {

TEST(PythonJson, FloatRepr) {
  const std::pair<double, const char*> cases[] = {
      {3.0, "3.0"},        {0.1, "0.1"},         {-0.0, "-0.0"},      {1e-05, "1e-05"},
      {0.0001, "0.0001"},  {1e16, "1e+16"},      {1e15, "1000000000000000.0"},
      {1.5e16, "1.5e+16"}, {123456789.125, "123456789.125"},     {2.5e-300, "2.5e-300"},
      {1e100, "1e+100"},   {5e-324, "5e-324"},   {1.7976931348623157e308, "1.7976931348623157e+308"},
      {0.30000000000000004, "0.30000000000000004"}, {-12.5, "-12.5"}, {100.0, "100.0"}};
  for (const auto& [value, expected] : cases) EXPECT_EQ(python_float_repr(value), expected) << expected;
}

TEST(PythonJson, StringEscapes) {
  std::string out;
  append_python_json_string("a\"b\\c\n\r\t\b\f\x01\x1f\x7f é 😀 \xE2\x80\xA8", &out);
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\n\\r\\t\\b\\f\\u0001\\u001f\x7f é 😀 \xE2\x80\xA8\"");
}

TEST(PythonJson, Dumps) {
  const OrderedJson v =
      OrderedJson::parse(R"({"b": [1, -2, 3.5, true, null, {}, []], "a": {"x": "y"}, "u": 18446744073709551615})");
  EXPECT_EQ(python_json_dumps(v),
            R"({"b": [1, -2, 3.5, true, null, {}, []], "a": {"x": "y"}, "u": 18446744073709551615})");
  EXPECT_EQ(python_json_dumps(OrderedJson::object()), "{}");
  EXPECT_EQ(python_json_dumps(OrderedJson(std::nan(""))), "null");
}

}  // namespace
}  // namespace m2::text
