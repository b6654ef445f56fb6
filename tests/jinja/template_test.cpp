// tests/jinja/template_test.cpp — Template: syntax errors with line and column, loops, scoping and
// namespaces, macros, blocks, raise_exception, undefined values, runaway limits, context key order and a
// real chat template. Expected texts were checked against jinja2 3.1.6 set up as transformers does.
#include "graphed/jinja/template.h"

#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "error_text.h"

namespace graphed::jinja {
namespace {

using graphed::testing::error_text;
using Json = nlohmann::ordered_json;

std::string render(const std::string& source, const Json& context = Json::object()) {
  return Template(source).render(context);
}

std::string render_error(const std::string& source, const Json& context = Json::object()) {
  return error_text<TemplateError>([&] { render(source, context); });
}

TEST(TemplateTest, SyntaxErrorsNameLineColumnAndFix) {
  EXPECT_EQ(render_error("line1\n{% if x %}\nno end"),
            "template line 3, column 7: unexpected end of template: the 'if' block opened at line 2, column 1 is not "
            "closed; fix: add {% endif %}");
  EXPECT_EQ(render_error("{% for x in y %}{% endif %}"),
            "template line 1, column 20: unexpected {% endif %} inside the 'for' block opened at line 1, column 1; "
            "fix: close that block first with {% endfor %} or {% else %}");
  EXPECT_EQ(render_error("{% endfor %}"),
            "template line 1, column 4: unexpected {% endfor %}: no block is open that it could close; fix: remove it, "
            "or open the matching block before it");
  EXPECT_EQ(render_error("{{ x + }}"),
            "template line 1, column 8: expected an expression, got '}}'; fix: write a value or a variable there");
  EXPECT_EQ(
      render_error("{{ a b }}"),
      "template line 1, column 6: expected '}}' to end the expression, got 'b'; fix: close the expression with }} "
      "(or join its parts with an operator)");
  EXPECT_EQ(render_error("{{ x | nosuch }}"),
            "template line 1, column 8: no filter named 'nosuch'; fix: use a jinja2 builtin filter (trim, tojson, "
            "length, join, default, ...)");
  EXPECT_EQ(render_error("{% include 'x' %}"),
            "template line 1, column 4: unknown tag 'include'; fix: use one of if, for, set, macro, call, filter, raw, "
            "break, continue (graphed's Jinja subset has no extends, include, import, block or with)");
  EXPECT_EQ(render_error("{% break %}"),
            "template line 1, column 4: {% break %} outside a for loop; fix: move it inside {% for %}");
}

TEST(TemplateTest, SyntaxErrorCarriesPosition) {
  try {
    Template("{% if true %}\n\n  {{ 1 + }}{% endif %}");
    FAIL() << "no error";
  } catch (const TemplateError& error) {
    EXPECT_EQ(error.line(), 3);
    EXPECT_EQ(error.column(), 10);
    EXPECT_FALSE(error.raised_by_template());
  }
}

TEST(TemplateTest, LoopVariables) {
  EXPECT_EQ(render("{% for x in ['a', 'b', 'c'] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
                   "{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}"),
            "1032TrueFalse3;2121FalseFalse3;3210FalseTrue3;");
  EXPECT_EQ(
      render("{% for x in [1, 2] %}{{ loop.previtem }}|{{ loop.nextitem }};{{ loop.cycle('a', 'b') }}{% endfor %}"),
      "|2;a1|;b");
}

TEST(TemplateTest, LoopElseInlineIfAndUnpacking) {
  EXPECT_EQ(render("{% for x in [] %}a{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(
      render("{% for x in [1, 2, 3] if x > 1 %}{{ loop.index }}{{ x }}{{ loop.first }}{% else %}none{% endfor %}"),
      "12True23False");
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}", {{"d", {{"b", 1}, {"a", 2}}}}),
            "b=1,a=2,");
  EXPECT_EQ(render("{% for (x, y) in [(1, 2)] %}{{ x + y }}{% endfor %}"), "3");
  EXPECT_EQ(render("{% for k in {'x': 1, 'y': 2} %}{{ k }}{% endfor %}"), "xy");
  EXPECT_EQ(render("{% for c in 'héllo' %}{{ c }}.{% endfor %}"), "h.\xC3\xA9.l.l.o.");
}

TEST(TemplateTest, BreakAndContinue) {
  EXPECT_EQ(render("{% for x in [1, 2, 3, 4] %}{% if x == 2 %}{% continue %}{% endif %}{{ x }}"
                   "{% if x == 3 %}{% break %}{% endif %}{% endfor %}"),
            "13");
}

TEST(TemplateTest, SetInsideALoopStaysInTheLoopButANamespaceIsShared) {
  EXPECT_EQ(
      render("{% set ns = namespace(total=1) %}{% set y = 0 %}{% for x in [1, 2] %}{% set ns.total = ns.total + x %}"
             "{% set y = x %}{% endfor %}{{ ns.total }} {{ y }}"),
      "4 0");
  EXPECT_EQ(render("{% if true %}{% set z = 5 %}{% endif %}{{ z }}"), "5");
  EXPECT_EQ(render("{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = (1, 2) %}{{ t }}"), "12(1, 2)");
  EXPECT_EQ(render("{% set ns = namespace(x=[]) %}{% set ns.x = ns.x + [1] %}{{ ns.x }} {{ ns }}"),
            "[1] <Namespace {'x': [1]}>");
  EXPECT_EQ(render_error("{% set x.y = 1 %}"),
            "template line 1, column 1: cannot assign attribute on non-namespace object 'x'; fix: create it first with "
            "{% set x = namespace() %}");
}

TEST(TemplateTest, MacrosAndCallBlocks) {
  EXPECT_EQ(
      render("{% macro m(a, b=2) %}[{{ a }}{{ b }}]{% endmacro %}{{ m(1) }}{{ m(1, b=3) }}{{ m(b=5, a=0) }}{{ m() }}"),
      "[12][13][05][2]");
  EXPECT_EQ(render("{% macro m(a) %}<{{ caller(a * 2) }}>{% endmacro %}{% call(x) m(1) %}in{{ x }}{% endcall %}"),
            "<in2>");
  EXPECT_EQ(render_error("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}"),
            "template line 1, column 34: macro 'm' takes not more than 1 argument(s); fix: pass at most 1 arguments");
}

TEST(TemplateTest, SetAndFilterBlocks) {
  EXPECT_EQ(
      render("{% set x %}  block {{ 1 }}{% endset %}[{{ x }}]{% set y | trim | upper %}  z  {% endset %}[{{ y }}]"),
      "[  block 1][Z]");
  EXPECT_EQ(render("{% filter upper %}abc{{ 'd' }}{% endfilter %}"), "ABCD");
}

TEST(TemplateTest, GenerationTagsRenderTheirBody) {
  EXPECT_EQ(render("a{% generation %}b{% endgeneration %}c"), "abc");
}

TEST(TemplateTest, RaiseExceptionGivesTheTemplatesMessage) {
  try {
    render("x\n  {{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}");
    FAIL() << "no error";
  } catch (const TemplateError& error) {
    EXPECT_TRUE(error.raised_by_template());
    EXPECT_EQ(error.problem(), "Conversation roles must alternate user/assistant/user/assistant/...");
    EXPECT_EQ(std::string(error.what()),
              "template line 2, column 7: the template raised an error: Conversation roles must alternate "
              "user/assistant/user/assistant/...");
  }
}

TEST(TemplateTest, UndefinedBehavesAsJinja2) {
  EXPECT_EQ(render("[{{ missing }}]{{ missing is defined }}{{ missing is undefined }}{{ missing|length }}"
                   "{% for x in missing %}x{% endfor %}{% if not missing %}falsy{% endif %}{{ missing|default('d') }}"),
            "[]FalseTrue0falsyd");
  EXPECT_EQ(render("{{ d.nope }}|{{ d['nope'] }}|{{ none.a }}|{{ [][0] }}", {{"d", Json::object()}}), "|||");
  EXPECT_EQ(render_error("{{ foo.bar }}"),
            "template line 1, column 8: 'foo' is undefined; fix: pass the value in the context, or test it with "
            "`is defined` before using it");
  EXPECT_EQ(render_error("{{ d.a.b }}", {{"d", Json::object()}}),
            "template line 1, column 8: 'dict object' has no attribute 'a'; fix: pass the value in the context, or "
            "test it with `is defined` before using it");
  EXPECT_EQ(render_error("{{ m + 1 }}"),
            "template line 1, column 6: 'm' is undefined; fix: pass the value in the context, or test it with "
            "`is defined` before using it");
}

TEST(TemplateTest, RunawayTemplatesStopWithAClearError) {
  TemplateOptions options;
  options.max_loop_iterations = 1000;
  options.max_output_bytes = 100;
  options.max_call_depth = 20;
  auto limited_error = [&](const std::string& source) {
    return error_text<TemplateError>([&] { Template(source, options).render(Json::object()); });
  };
  EXPECT_EQ(limited_error("{% for x in range(100) %}{% for y in range(100) %}{% endfor %}{% endfor %}"),
            "template line 1, column 26: the template ran more than 1000 loop iterations; fix: check the template for "
            "a runaway loop, or raise TemplateOptions::max_loop_iterations");
  EXPECT_EQ(
      limited_error("{% for x in range(50) %}abc{% endfor %}"),
      "template line 1, column 25: the rendered text passes the limit of 100 bytes; fix: check the template for a "
      "runaway loop, or raise TemplateOptions::max_output_bytes");
  EXPECT_EQ(limited_error("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}"),
            "template line 1, column 20: macro calls nest more than 20 deep; fix: check the template for a macro that "
            "calls itself without end");
  EXPECT_EQ(limited_error("{{ " + std::string(150, '(') + "1" + std::string(150, ')') + " }}"),
            "template line 1, column 103: the template nests expressions or blocks more than 100 levels deep; fix: "
            "split the expression or block into smaller ones");
  std::string long_chain = "{{ 1";
  for (int i = 0; i < 400; ++i) long_chain += " ~ 1";
  EXPECT_EQ(limited_error(long_chain + " }}"),
            "template line 1, column 1202: the expression nests more than 300 operations deep; fix: split it with "
            "{% set %} into smaller expressions");
}

TEST(TemplateTest, ContextKeepsKeyOrderAndMustBeAnObject) {
  Json tool = Json::object();
  tool["name"] = "f";
  tool["description"] = "d";
  tool["arguments"] = {{"z", 1}, {"a", 2}};
  EXPECT_EQ(render("{{ tool|tojson }}", {{"tool", tool}}),
            R"({"name": "f", "description": "d", "arguments": {"z": 1, "a": 2}})");
  EXPECT_EQ(Template("{{ x }}").render(nlohmann::json{{"x", {{"b", 1}, {"a", 2}}}}), "{'a': 2, 'b': 1}");
  EXPECT_EQ(error_text<TemplateError>([] { Template("x").render(Json::array()); }),
            "template: the render context must be a JSON object, got array; fix: pass an object such as "
            "{\"messages\": [...]}");
}

TEST(TemplateTest, CopiesAndConcurrentRendersAgree) {
  const Template original("{% for m in messages %}{{ m.role }}:{{ m.content|trim }};{% endfor %}");
  const Template copy = original;
  const Json context = {
      {"messages", {{{"role", "user"}, {"content", " hi "}}, {{"role", "assistant"}, {"content", "yo"}}}}};
  std::vector<std::string> results(4);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < results.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = (i % 2 == 0 ? original : copy).render(context); });
  }
  for (std::thread& thread : threads) thread.join();
  for (const std::string& result : results) EXPECT_EQ(result, "user:hi;assistant:yo;");
}

TEST(TemplateTest, RendersQwenChatTemplateWithTools) {
  std::ifstream file(std::string(GRAPHED_SOURCE_DIR) + "/tests/jinja/templates/qwen2.5-7b-instruct.jinja");
  ASSERT_TRUE(file) << "missing fixture";
  std::stringstream source;
  source << file.rdbuf();
  const Json context = {
      {"messages",
       {{{"role", "user"}, {"content", "Weather in Paris?"}},
        {{"role", "assistant"},
         {"content", ""},
         {"tool_calls",
          {{{"type", "function"}, {"function", {{"name", "weather"}, {"arguments", {{"city", "Paris"}}}}}}}}},
        {{"role", "tool"}, {"content", "22.5"}}}},
      {"tools", {{{"type", "function"}, {"function", {{"name", "weather"}, {"parameters", Json::object()}}}}}},
      {"add_generation_prompt", true}};
  EXPECT_EQ(Template(source.str()).render(context),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n\n# Tools\n\n"
            "You may call one or more functions to assist with the user query.\n\nYou are provided with function "
            "signatures within <tools></tools> XML tags:\n<tools>\n"
            "{\"type\": \"function\", \"function\": {\"name\": \"weather\", \"parameters\": {}}}\n</tools>\n\n"
            "For each function call, return a json object with function name and arguments within "
            "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
            "<args-json-object>}\n</tool_call><|im_end|>\n"
            "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
            "<|im_start|>assistant\n<tool_call>\n{\"name\": \"weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
            "</tool_call><|im_end|>\n"
            "<|im_start|>user\n<tool_response>\n22.5\n</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n");
}

}  // namespace
}  // namespace graphed::jinja
