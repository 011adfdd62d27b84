// Python's text forms of values. Expected strings were printed by CPython
// 3.11 (repr(), json.dumps()).
#include "text/jinja/py_format.h"

#include <gtest/gtest.h>

#include <cmath>

namespace m2::text::jinja {
namespace {

TEST(PyFormat, FloatReprMatchesCPython) {
  const std::pair<double, const char*> kCases[] = {
      {0, "0.0"},
      {-0.0, "-0.0"},
      {1, "1.0"},
      {-1.5, "-1.5"},
      {0.1, "0.1"},
      {0.30000000000000004, "0.30000000000000004"},
      {1.0 / 3, "0.3333333333333333"},
      {2.0 / 3, "0.6666666666666666"},
      {1e16, "1e+16"},
      {1e15, "1000000000000000.0"},
      {9999999999999998.0, "9999999999999998.0"},
      {0.0001, "0.0001"},
      {1e-05, "1e-05"},
      {1.5e-07, "1.5e-07"},
      {1.2345678901234568e+17, "1.2345678901234568e+17"},
      {4.9406564584124654e-324, "5e-324"},
      {1.7976931348623157e+308, "1.7976931348623157e+308"},
      {1e+22, "1e+22"},
      {0.5, "0.5"},
      {100, "100.0"},
      {1234.5678, "1234.5678"},
      {2.5e-05, "2.5e-05"},
      {3e-10, "3e-10"},
      {123456780000000, "123456780000000.0"},
      {INFINITY, "inf"},
      {-INFINITY, "-inf"},
      {NAN, "nan"},
  };
  for (const auto& [v, want] : kCases) EXPECT_EQ(py_float_repr(v), want) << want;
}

TEST(PyFormat, StringReprEscapesLikeCPython) {
  Value s =
      Value::string("q'\"\\\t\n\r\x01\x7f\xc2\x85\xc2\xa0\xe2\x80\x8b\xe2\x80\xa8\xc3\xa9\xe4\xb8\xad\xf0\x9f\x8e\x89");
  EXPECT_EQ(py_repr(s), "'q\\'\"\\\\\\t\\n\\r\\x01\\x7f\\x85\\xa0\\u200b\\u2028\xc3\xa9\xe4\xb8\xad\xf0\x9f\x8e\x89'");
  // The quote that needs no escaping is chosen.
  Value list = Value::list({Value::string("it's"), Value::string("say \"x\""), Value::string("both '\"")});
  EXPECT_EQ(py_str(list), "[\"it's\", 'say \"x\"', 'both \\'\"']");
}

TEST(PyFormat, StrOfContainersAndScalars) {
  Dict d;
  d.set("b", Value::integer(1));
  d.set("a", Value::list({Value::none(), Value::boolean(true), Value::real(1.0)}, SeqKind::kTuple));
  EXPECT_EQ(py_str(Value::dict(d)), "{'b': 1, 'a': (None, True, 1.0)}");
  EXPECT_EQ(py_str(Value::list({Value::integer(1)}, SeqKind::kTuple)), "(1,)");
  EXPECT_EQ(py_str(Value::list(std::vector<Value>{}, SeqKind::kTuple)), "()");
  EXPECT_EQ(py_str(Value()), "");
  EXPECT_EQ(py_repr(Value()), "Undefined");
  EXPECT_EQ(py_str(Value::none()), "None");
  EXPECT_EQ(py_str(Value::string("plain")), "plain");
}

TEST(PyFormat, JsonDumpsLikeTransformersTojson) {
  Value s =
      Value::string("q'\"\\\t\n\r\x01\x7f\xc2\x85\xc2\xa0\xe2\x80\x8b\xe2\x80\xa8\xc3\xa9\xe4\xb8\xad\xf0\x9f\x8e\x89");
  auto plain = py_json_dumps(s, JsonDumpOptions());
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(
      plain.value(),
      "\"q'\\\"\\\\\\t\\n\\r\\u0001\x7f\xc2\x85\xc2\xa0\xe2\x80\x8b\xe2\x80\xa8\xc3\xa9\xe4\xb8\xad\xf0\x9f\x8e\x89\"");
  JsonDumpOptions ascii;
  ascii.ensure_ascii = true;
  auto escaped = py_json_dumps(s, ascii);
  ASSERT_TRUE(escaped.ok());
  EXPECT_EQ(escaped.value(),
            "\"q'\\\"\\\\\\t\\n\\r\\u0001\\u007f\\u0085\\u00a0\\u200b\\u2028\\u00e9\\u4e2d\\ud83c\\udf89\"");
}

TEST(PyFormat, JsonIndentSeparatorsAndSortKeys) {
  Dict d;
  d.set("a", Value::list({Value::integer(1), Value::real(2.0), Value::none(), Value::boolean(true)}));
  d.set("b", Value::dict(Dict()));
  d.set("c", Value::list(std::vector<Value>{}));
  JsonDumpOptions indent;
  indent.indent = "  ";
  auto pretty = py_json_dumps(Value::dict(d), indent);
  ASSERT_TRUE(pretty.ok());
  EXPECT_EQ(pretty.value(), "{\n  \"a\": [\n    1,\n    2.0,\n    null,\n    true\n  ],\n  \"b\": {},\n  \"c\": []\n}");

  Dict inner;
  inner.set("d", Value::integer(1));
  inner.set("c", Value::integer(2));
  Dict outer;
  outer.set("b", Value::integer(1));
  outer.set("a", Value::dict(inner));
  JsonDumpOptions compact;
  compact.sort_keys = true;
  compact.item_separator = ",";
  compact.key_separator = ":";
  auto sorted = py_json_dumps(Value::dict(outer), compact);
  ASSERT_TRUE(sorted.ok());
  EXPECT_EQ(sorted.value(), "{\"a\":{\"c\":2,\"d\":1},\"b\":1}");

  auto specials = py_json_dumps(Value::list({Value::real(1e16), Value::real(-0.0), Value::real(INFINITY),
                                             Value::real(-INFINITY), Value::real(NAN)}),
                                JsonDumpOptions());
  ASSERT_TRUE(specials.ok());
  EXPECT_EQ(specials.value(), "[1e+16, -0.0, Infinity, -Infinity, NaN]");
}

TEST(PyFormat, JsonRefusesWhatPythonRefuses) {
  auto r = py_json_dumps(Value::list({Value()}), JsonDumpOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "Object of type Undefined is not JSON serializable");
}

}  // namespace
}  // namespace m2::text::jinja
