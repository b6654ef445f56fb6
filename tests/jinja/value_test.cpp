// tests/jinja/value_test.cpp — Value's Python semantics: str()/repr() printing, float repr, truthiness,
// == and ordering, int/float arithmetic, slicing, Python str methods on UTF-8, and json.dumps. Expected
// texts are what CPython 3 prints.
#include "graphed/jinja/value.h"

#include <gtest/gtest.h>

#include "error_text.h"
#include "graphed/jinja/json_values.h"
#include "graphed/jinja/operators.h"
#include "graphed/jinja/python_text.h"
#include "graphed/jinja/template.h"

namespace graphed::jinja {
namespace {

std::string render_value(const std::string& source) {
  return Template(source).render(nlohmann::ordered_json::object());
}

std::string evaluation_error(const std::function<void()>& action) {
  return testing::error_text<EvaluationError>(action);
}

TEST(ValueTest, PrintsLikePythonStr) {
  Dict dict;
  dict.set(Value("k"), Value("it's"));
  dict.set(Value(1), Value::tuple({Value(true)}));
  const Value list = Value::list({Value(1), Value("a"), Value::none(), Value(true), Value(1.5), Value::dict(dict)});
  EXPECT_EQ(to_str(list), "[1, 'a', None, True, 1.5, {'k': \"it's\", 1: (True,)}]");
  EXPECT_EQ(to_str(Value("plain")), "plain");
  EXPECT_EQ(to_str(Value()), "");
  EXPECT_EQ(to_repr(Value()), "Undefined");
  EXPECT_EQ(to_str(Value::tuple({})), "()");
  EXPECT_EQ(to_repr(Value("a\\b\n\x01\xC2\xA0\xC3\xA9")), "'a\\\\b\\n\\x01\\xa0\xC3\xA9'");
  EXPECT_EQ(to_repr(Value("say \"hi\" it's")), "'say \"hi\" it\\'s'");
}

TEST(ValueTest, FloatsPrintAsPythonRepr) {
  EXPECT_EQ(format_float(1.0), "1.0");
  EXPECT_EQ(format_float(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(format_float(1e16), "1e+16");
  EXPECT_EQ(format_float(1234567890123456.0), "1234567890123456.0");
  EXPECT_EQ(format_float(1.5e-7), "1.5e-07");
  EXPECT_EQ(format_float(1e-4), "0.0001");
  EXPECT_EQ(format_float(1e-5), "1e-05");
  EXPECT_EQ(format_float(-0.0), "-0.0");
  EXPECT_EQ(format_float(123456789012345678.0), "1.2345678901234568e+17");
  EXPECT_EQ(format_float(1.0 / 0.0), "inf");
}

TEST(ValueTest, TruthinessAndEquality) {
  EXPECT_FALSE(is_true(Value()));
  EXPECT_FALSE(is_true(Value::none()));
  EXPECT_FALSE(is_true(Value(0.0)));
  EXPECT_FALSE(is_true(Value("")));
  EXPECT_FALSE(is_true(Value::list({})));
  EXPECT_TRUE(is_true(Value::new_namespace({})));
  EXPECT_TRUE(equals(Value(1), Value(1.0)));
  EXPECT_TRUE(equals(Value(true), Value(1)));
  EXPECT_FALSE(equals(Value::list({Value(1)}), Value::tuple({Value(1)})));
  EXPECT_TRUE(equals(Value(), Value()));
  EXPECT_FALSE(equals(Value(), Value::none()));
  EXPECT_FALSE(equals(Value("1"), Value(1)));
  EXPECT_LT(compare(Value::list({Value(1), Value(2)}), Value::list({Value(1), Value(3)}), "<"), 0);
  EXPECT_EQ(evaluation_error([] { compare(Value(1), Value("a"), "<"); }),
            "'<' not supported between instances of 'int' and 'str'");
}

TEST(ValueTest, ArithmeticFollowsPython) {
  EXPECT_EQ(render_value("{{ 1 / 2 }} {{ 4 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 7.5 // 2 }} "
                         "{{ -7.5 % 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 1 + true }} {{ 1.5 + 1 }}"),
            "0.5 2.0 3 -4 2 -2 3.0 0.5 1024 0.5 2 2.5");
  EXPECT_EQ(render_value("{{ 'x' * 3 }} {{ [1] * 2 }} {{ [1] + [2] }} {{ 'a' ~ 1 ~ 1.5 ~ none ~ true }} {{ -(3) }}"),
            "xxx [1, 1] [1, 2] a11.5NoneTrue -3");
  EXPECT_EQ(evaluation_error([] { binary_operation("+", Value("a"), Value(1)); }),
            "can only concatenate str (not \"int\") to str");
  EXPECT_EQ(evaluation_error([] { binary_operation("/", Value(1), Value(0)); }), "division by zero");
  EXPECT_EQ(evaluation_error([] { binary_operation("+", Value(INT64_MAX), Value(1)); }), "integer overflow in '+'");
  EXPECT_EQ(evaluation_error([] { contains(Value::none(), Value("a")); }),
            "argument of type 'NoneType' is not iterable");
}

TEST(ValueTest, SlicesAndNegativeIndexes) {
  EXPECT_EQ(
      render_value(
          "{{ [1, 2, 3][1:] }} {{ [1, 2, 3][:-1] }} {{ [1, 2, 3][::-1] }} {{ [1, 2, 3][::2] }} {{ [1, 2, 3][5:] }} "
          "{{ [1, 2, 3][-10:2] }} {{ [1, 2, 3][-1] }} {{ (1, 2, 3)[1:] }}"),
      "[2, 3] [1, 2] [3, 2, 1] [1, 3] [] [1, 2] 3 (2, 3)");
  EXPECT_EQ(render_value("{{ 'hello'[1:4:2] }} {{ 'héllo'[::-1] }} {{ 'héllo'[1] }} {{ 'abc'[-1] }}"),
            "el oll\xC3\xA9h \xC3\xA9 c");
  EXPECT_EQ(slice_indexes(5, std::nullopt, std::nullopt, -2), (std::vector<int64_t>{4, 2, 0}));
  EXPECT_EQ(evaluation_error([] { slice_indexes(3, std::nullopt, std::nullopt, 0); }), "slice step cannot be zero");
}

TEST(PythonTextTest, StripAndSplitUseUnicodeWhitespace) {
  EXPECT_EQ(python_strip("\xE3\x80\x80 a\t\n", std::nullopt, StripSide::kBoth), "a");
  EXPECT_EQ(python_strip("xyax", std::string("xy"), StripSide::kLeft), "ax");
  EXPECT_EQ(python_split(" a\xC2\xA0"
                         "b  c ",
                         std::nullopt, -1),
            (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(python_split("a::b::c", std::string("::"), 1), (std::vector<std::string>{"a", "b::c"}));
  EXPECT_EQ(python_rsplit("a::b::c", std::string("::"), 1), (std::vector<std::string>{"a::b", "c"}));
  EXPECT_EQ(python_splitlines("a\r\nb\rc\n\nd"), (std::vector<std::string>{"a", "b", "c", "", "d"}));
  EXPECT_EQ(python_replace("abc", "", "-", -1), "-a-b-c-");
}

TEST(PythonTextTest, CaseChanges) {
  EXPECT_EQ(python_title("hello wörld-x 3rd"), "Hello Wörld-X 3Rd");
  EXPECT_EQ(python_upper("déjà vu ÿ"), "DÉJÀ VU Ÿ");
  EXPECT_EQ(python_capitalize("hELLO"), "Hello");
  EXPECT_EQ(jinja_title("hello wORLD-foo(bar)"), "Hello World-Foo(Bar)");
}

TEST(JsonValuesTest, DumpsLikePythonJsonDumps) {
  nlohmann::ordered_json json = nlohmann::ordered_json::parse(
      R"({"z": [1, 2.0, 1e-07, true, null], "a": {"s": "\u00e9\"\\\n\u0001\u2028", "e": [], "o": {}}})");
  const Value value = value_from_json(json, 10);
  EXPECT_EQ(
      dump_json(value, {}),
      "{\"z\": [1, 2.0, 1e-07, true, null], \"a\": {\"s\": \"\xC3\xA9\\\"\\\\\\n\\u0001\xE2\x80\xA8\", \"e\": [], "
      "\"o\": {}}}");
  JsonDumpOptions indented;
  indented.indent = "  ";
  indented.item_separator = ",";
  EXPECT_EQ(dump_json(Value::list({Value(1), Value::list({})}), indented), "[\n  1,\n  []\n]");
  JsonDumpOptions ascii;
  ascii.ensure_ascii = true;
  EXPECT_EQ(dump_json(Value("\xF0\x9F\x98\x80\xC3\xA9"), ascii), "\"\\ud83d\\ude00\\u00e9\"");
  EXPECT_EQ(evaluation_error([] { value_from_json(nlohmann::ordered_json::parse("[[[1]]]"), 2); }),
            "the context is nested too deeply");
}

}  // namespace
}  // namespace graphed::jinja
