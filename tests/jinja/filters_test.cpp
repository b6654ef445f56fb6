// tests/jinja/filters_test.cpp — builtin filters, tests (`is ...`), and the str/dict/list methods chat
// templates call, including the sandbox's refusal of mutating methods. Expected texts were checked
// against jinja2 3.1.6 with transformers' tojson.
#include "graphed/jinja/filters.h"

#include <gtest/gtest.h>

#include "error_text.h"
#include "graphed/jinja/template.h"

namespace graphed::jinja {
namespace {

using graphed::testing::error_text;
using Json = nlohmann::ordered_json;

std::string render_filtered(const std::string& source, const Json& context = Json::object()) {
  return Template(source).render(context);
}

TEST(FiltersTest, TextFilters) {
  EXPECT_EQ(render_filtered("{{ '  x  '|trim }}|{{ 'xxyxx'|trim('x') }}|{{ ' \xE3\x80\x80"
                            "a\n'|trim }}"),
            "x|y|a");
  EXPECT_EQ(render_filtered(
                "{{ 'hello'|capitalize }} {{ 'HeLLo'|lower }} {{ 'abc'|upper }} {{ 'hello wORLD-foo(bar)'|title }}"),
            "Hello hello ABC Hello World-Foo(Bar)");
  EXPECT_EQ(render_filtered("{{ 'a-b'|replace('-', '+') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ 'abc'|center(9) }}|"),
            "a+b bba    abc   |");
  EXPECT_EQ(render_filtered("{{ 'a\nb'|indent(2) }}|{{ 'a\nb'|indent(2, true) }}|{{ 'a\n\nb'|indent }}|{{ "
                            "'a\n\nb'|indent(blank=true) }}"),
            "a\n  b|  a\n  b|a\n\n    b|a\n    \n    b");
  EXPECT_EQ(render_filtered("{{ 'a b  c'|wordcount }} {{ 1.5|string }} {{ none|string }} {{ [1]|string }}"),
            "3 1.5 None [1]");
  EXPECT_EQ(render_filtered("{{ '<a href=\"x\">&\\''|escape }} {{ '<b>'|e }} {{ '<i>'|safe }}"),
            "&lt;a href=&#34;x&#34;&gt;&amp;&#39; &lt;b&gt; <i>");
}

TEST(FiltersTest, SafeAndEscapeGiveMarkupThatEscapesWhatIsAddedToIt) {
  EXPECT_EQ(
      render_filtered("{{ '<b>'|safe + '<i>' }}|{{ '<i>' + '<b>'|safe }}|{{ ('<b>'|safe) ~ '<i>' }}|{{ '<a>'|e|e }}|"
                      "{{ '<a>'|e|forceescape }}|{{ ['x'|safe] }}|{{ none|safe }}"),
      "<b>&lt;i&gt;|&lt;i&gt;<b>|<b><i>|&lt;a&gt;|&amp;lt;a&amp;gt;|[Markup('x')]|None");
}

TEST(FiltersTest, NumberFilters) {
  EXPECT_EQ(render_filtered("{{ '3'|int }} {{ '3.7'|int }} {{ 'x'|int }} {{ 3.9|int }} {{ true|int }} {{ ' 42 '|int }} "
                            "{{ '1A'|int(0, 16) }} {{ 'x'|int(-1) }}"),
            "3 3 0 3 1 42 26 -1");
  EXPECT_EQ(render_filtered("{{ '2.5'|float }} {{ 'x'|float }} {{ 2|float }} {{ -1|abs }} {{ -2.5|abs }}"),
            "2.5 0.0 2.0 1 2.5");
  EXPECT_EQ(render_filtered("{{ 2.5|round }} {{ 3.5|round }} {{ 2|round }} {{ 2.675|round(2) }} {{ 1250|round(-2) }} "
                            "{{ 1.55|round(1, 'floor') }} {{ 1.51|round(1, 'ceil') }}"),
            "2.0 4.0 2 2.67 1200 1.5 1.6");
}

TEST(FiltersTest, SequenceFilters) {
  EXPECT_EQ(render_filtered("{{ [1, 2, 3]|length }} {{ 'héllo'|count }} {{ {'a': 1}|length }} {{ [1, 2, 3]|sum }} "
                            "{{ [1.5, 2]|sum }} {{ [{'a': 3}, {'a': 1}]|sum(attribute='a') }}"),
            "3 5 1 6 3.5 4");
  EXPECT_EQ(render_filtered(
                "{{ [3, 1]|min }} {{ ['b', 'A', 'a']|max }} [{{ []|first }}] {{ [1, 2]|last }} {{ 'abc'|first }}"),
            "1 b [] 2 a");
  EXPECT_EQ(
      render_filtered("{{ 'abc'|list }} {{ {'a': 1, 'b': 2}|list }} {{ 'abc'|reverse }} {{ [3, 1, 2]|reverse|list }}"),
      "['a', 'b', 'c'] ['a', 'b'] cba [2, 1, 3]");
  EXPECT_EQ(render_filtered("{{ ['b', 'A', 'a', 'C']|sort }} {{ [3, 1, 2]|sort(reverse=true) }} {{ ['b', "
                            "'A']|sort(case_sensitive=true) }} "
                            "{{ [{'n': 2}, {'n': 1}]|sort(attribute='n') }}"),
            "['A', 'a', 'b', 'C'] [3, 2, 1] ['A', 'b'] [{'n': 1}, {'n': 2}]");
  EXPECT_EQ(render_filtered(
                "{{ ['b', 'A', 'a', 'C']|unique|list }} {{ {'b': 1, 'a': 2}|dictsort }} {{ {'a': 1}|items|list }}"),
            "['b', 'A', 'C'] [('a', 2), ('b', 1)] [('a', 1)]");
  EXPECT_EQ(render_filtered(
                "{{ [1, 2, 3]|join }} {{ [1, 2]|join(', ') }} {{ [{'n': 'a'}, {'n': 'b'}]|join(',', attribute='n') }}"),
            "123 1, 2 a,b");
}

TEST(FiltersTest, MapSelectAndReject) {
  EXPECT_EQ(render_filtered(
                "{{ [1, 2, 3]|select('odd')|list }} {{ [1, 2, 3]|reject('odd')|list }} {{ [0, 1, '']|select|list }}"),
            "[1, 3] [2] [1]");
  EXPECT_EQ(render_filtered(
                "{{ [{'a': 1}, {'a': 2}]|map(attribute='a')|list }} {{ ['a', 'b']|map('upper')|join(',') }} "
                "{{ [{'a': {'b': 5}}]|map(attribute='a.b')|list }} {{ [{}]|map(attribute='x', default=0)|list }}"),
            "[1, 2] A,B [5] [0]");
  EXPECT_EQ(
      render_filtered("{{ [{'a': 1}, {'b': 2}]|selectattr('a', 'defined')|list }} "
                      "{{ [{'r': 'user'}, {'r': 'tool'}]|rejectattr('r', 'equalto', 'tool')|list }} "
                      "{{ ['code_interpreter', 'brave_search']|reject('equalto', 'code_interpreter')|join(', ') }}"),
      "[{'a': 1}] [{'r': 'user'}] brave_search");
  EXPECT_EQ(
      render_filtered("{{ tools|selectattr('type', 'equalto', 'x')|list|length }} {{ none|map(attribute='a')|list }}",
                      {{"tools", nullptr}}),
      "0 []");
}

TEST(FiltersTest, DefaultFilter) {
  EXPECT_EQ(
      render_filtered("{{ 'x'|default('d') }} {{ y|default('d') }} {{ ''|default('d', true) }} {{ none|default('d') }} "
                      "[{{ y|d }}]"),
      "x d d None []");
}

TEST(FiltersTest, ToJsonMatchesPythonJsonDumps) {
  EXPECT_EQ(render_filtered("{{ {'b': [1, {'c': 'é\"\\n'}], 'a': none, 'f': 1.0, 't': true}|tojson }}"),
            "{\"b\": [1, {\"c\": \"é\\\"\\n\"}], \"a\": null, \"f\": 1.0, \"t\": true}");
  EXPECT_EQ(render_filtered("{{ {'a': [1, 2], 'e': [], 'd': {}}|tojson(indent=2) }}"),
            "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"e\": [],\n  \"d\": {}\n}");
  EXPECT_EQ(render_filtered("{{ 'xé'|tojson(ensure_ascii=true) }} {{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }} "
                            "{{ [1, {'a': 2}]|tojson(separators=(',', ':')) }} {{ 1.5e20|tojson }} {{ 'abc'|tojson }}"),
            "\"x\\u00e9\" {\"a\": 2, \"b\": 1} [1,{\"a\":2}] 1.5e+20 \"abc\"");
  EXPECT_EQ(error_text<TemplateError>([] { render_filtered("{{ x|tojson }}"); }),
            "template line 1, column 6: Object of type Undefined is not JSON serializable; fix: pass only JSON values "
            "(strings, numbers, booleans, none, lists, dicts) to tojson");
}

TEST(FiltersTest, FilterArgumentErrors) {
  EXPECT_EQ(
      error_text<TemplateError>([] { render_filtered("{{ 'a'|trim(foo=1) }}"); }),
      "template line 1, column 8: trim() got an unexpected keyword argument 'foo'; fix: use one of its parameters: "
      "chars");
  EXPECT_EQ(error_text<TemplateError>([] { render_filtered("{{ 'a'|replace('a') }}"); }),
            "template line 1, column 8: replace() missing required argument 'new'; fix: pass a value for 'new'");
  EXPECT_EQ(error_text<TemplateError>([] { render_filtered("{{ 5|items }}"); }),
            "template line 1, column 6: Can only get item pairs from a mapping.; fix: apply items to a dict");
}

TEST(TestsTest, BuiltinTests) {
  EXPECT_EQ(
      render_filtered(
          "{{ x is defined }} {{ none is none }} {{ 3 is divisibleby 3 }} {{ 3 is odd }} {{ 4 is even }} "
          "{{ 'a' is eq 'a' }} {{ 2 is in [1, 2] }} {{ 'A' is upper }} {{ 'a' is lower }} {{ 5 is divisibleby(2) }}"),
      "False True True True True True True True True False");
  EXPECT_EQ(
      render_filtered(
          "{{ true is number }} {{ true is integer }} {{ true is boolean }} {{ 1 is integer }} {{ 1.0 is float }} "
          "{{ 'a' is string }} {{ {} is mapping }} {{ 'a' is iterable }} {{ x is iterable }} {{ 3 is sequence }}"),
      "True False True True True True True True True False");
  EXPECT_EQ(
      render_filtered(
          "{{ 3 is gt 2 }} {{ 3 is lessthan 2 }} {{ 1 is ne 2 }} {{ 2 is ge 2 }} {{ none is sameas none }} "
          "{{ false is false }} {{ 0 is false }} {{ true is true }} {{ x is not defined }} {{ not x is defined }}"),
      "True False True True True True False True True True");
  EXPECT_EQ(error_text<TemplateError>([] { render_filtered("{{ 'a' is odd }}"); }),
            "template line 1, column 8: the 'odd' test needs a number, got str 'a'; fix: apply it to numbers only");
}

TEST(MethodsTest, StringMethods) {
  EXPECT_EQ(render_filtered("{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a b c'.split(' ', 1) }} "
                            "{{ 'a b c'.rsplit(' ', 1) }} {{ '  a b  c  '.split(none, 1) }}"),
            "['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b c'] ['a b', 'c'] ['a', 'b  c  ']");
  EXPECT_EQ(render_filtered(
                "{{ 'xxaxx'.strip('x') }}|{{ '\n a \n'.lstrip() }}|{{ '\n a \n'.rstrip('\n') }}|{{ ' a '.strip() }}"),
            "a|a \n|\n a |a");
  EXPECT_EQ(
      render_filtered("{{ 'abc'.startswith('a') }} {{ 'abc'.endswith(('x', 'c')) }} {{ 'abc'.find('c') }} "
                      "{{ 'héllo'.find('l') }} {{ 'aXbX'.count('X') }} {{ 'abc'.replace('b', '') }} {{ 'ab'.upper() }} "
                      "{{ 'AB'.lower() }} {{ 'a\nb'.splitlines() }} {{ '-'.join(['a', 'b']) }} {{ '12'.isdigit() }}"),
      "True True 2 2 2 ac AB ab ['a', 'b'] a-b True");
  EXPECT_EQ(
      render_filtered("{%- set content = c.split('</think>')[-1].lstrip('\\n') %}"
                      "{%- set reasoning = c.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}"
                      "[{{ reasoning }}][{{ content }}]",
                      {{"c", "<think>\nstep 1\n</think>\n\nanswer"}}),
      "[step 1][answer]");
}

TEST(MethodsTest, DictAndListMethods) {
  EXPECT_EQ(
      render_filtered("{{ d.get('b') }} {{ d.get('a') }} {{ d.get('b', 5) }} {{ d.items()|list }} {{ d.keys()|list }} "
                      "{{ d.values()|list }} {{ [1, 2, 3].index(2) }} {{ [1, 2, 2].count(2) }}",
                      {{"d", {{"a", 1}}}}),
      "None 1 5 [('a', 1)] ['a'] [1] 1 2");
  EXPECT_EQ(render_filtered("{{ d['items'] }} {{ d.x }}", {{"d", {{"items", 1}, {"x", 2}}}}), "1 2");
}

TEST(MethodsTest, MutatingMethodsAreUnsafeAsInTheSandbox) {
  EXPECT_EQ(render_filtered("[{{ [1].append }}]"), "[]");
  EXPECT_EQ(error_text<TemplateError>([] { render_filtered("{{ [1].append(2) }}"); }),
            "template line 1, column 8: access to attribute 'append' of 'list' object is unsafe.; fix: pass the value "
            "in the context, or test it with `is defined` before using it");
}

}  // namespace
}  // namespace graphed::jinja
