// jinja/filters.cpp — jinja2 3.1's builtin filters (jinja2/filters.py) on Values, plus transformers'
// tojson. Sorting filters compare strings case-insensitively unless case_sensitive=true, as jinja2.
#include "graphed/jinja/filters.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>

#include "graphed/jinja/arguments.h"
#include "graphed/jinja/attributes.h"
#include "graphed/jinja/json_values.h"
#include "graphed/jinja/operators.h"
#include "graphed/jinja/python_text.h"
#include "graphed/jinja/value_tests.h"

namespace graphed::jinja {
namespace {

using FilterFunction = Value (*)(const Value& subject, const Arguments& arguments);

/// jinja2's make_attrgetter: "a.b.0" looks up a, then b, then item 0 (items before attributes).
Value lookup_path(const Value& item, const Value& path) {
  if (!path.is_string()) return get_item(item, path);
  Value current = item;
  for (const std::string& part : python_split(path.as_string(), std::string("."), -1)) {
    const bool numeric =
        !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    current = get_item(current, numeric ? Value(static_cast<int64_t>(std::stoll(part))) : Value(part));
  }
  return current;
}

/// The sort key of jinja2's filters: strings lower-cased unless case_sensitive.
Value sort_key(const Value& item, const Value& attribute, bool case_sensitive) {
  Value key = attribute.is_none() ? item : lookup_path(item, attribute);
  if (!case_sensitive && key.is_string()) return Value(python_lower(key.as_string()));
  return key;
}

Value filter_abs(const Value& subject, const Arguments& arguments) {
  BoundArguments("abs", arguments, {});
  if (subject.is_float()) return Value(std::fabs(subject.as_float()));
  if (subject.is_number()) return Value(static_cast<int64_t>(std::llabs(subject.as_integer())));
  if (subject.is_undefined()) fail_undefined(subject);
  throw EvaluationError("bad operand type for abs(): '" + type_name(subject) + "'", "apply abs to numbers");
}

Value filter_center(const Value& subject, const Arguments& arguments) {
  BoundArguments bound("center", arguments, {{"width", 80}});
  const std::string text = to_str(subject);
  const int64_t width = integer_argument(bound[0], "center's width");
  const auto length = static_cast<int64_t>(code_point_count(text));
  if (width <= length) return Value(text);
  const int64_t margin = width - length;
  const int64_t left = margin / 2 + (margin & width & 1);
  return Value(std::string(static_cast<std::size_t>(left), ' ') + text +
               std::string(static_cast<std::size_t>(margin - left), ' '));
}

Value filter_default(const Value& subject, const Arguments& arguments) {
  BoundArguments bound("default", arguments, {{"default_value", ""}, {"boolean", false}});
  if (subject.is_undefined() || (is_true(bound[1]) && !is_true(subject))) return bound[0];
  return subject;
}

Value filter_dictsort(const Value& subject, const Arguments& arguments) {
  BoundArguments bound("dictsort", arguments, {{"case_sensitive", false}, {"by", "key"}, {"reverse", false}});
  if (!subject.is_dict()) {
    throw EvaluationError("You can only sort by either 'key' or 'value'", "apply dictsort to a dict");
  }
  const std::string by = string_argument(bound[1], "dictsort's by");
  if (by != "key" && by != "value") {
    throw EvaluationError("You can only sort by either 'key' or 'value'", "pass by='key' or by='value'");
  }
  std::vector<std::pair<Value, Value>> entries = subject.as_dict().entries();
  const bool case_sensitive = is_true(bound[0]);
  const bool reverse = is_true(bound[2]);
  std::stable_sort(entries.begin(), entries.end(), [&](const auto& a, const auto& b) {
    const Value& left = by == "key" ? a.first : a.second;
    const Value& right = by == "key" ? b.first : b.second;
    const int order =
        compare(sort_key(left, Value::none(), case_sensitive), sort_key(right, Value::none(), case_sensitive), "<");
    return reverse ? order > 0 : order < 0;
  });
  ValueList pairs;
  for (auto& [key, value] : entries) pairs.push_back(Value::tuple({key, value}));
  return Value::list(std::move(pairs));
}

Value filter_escape(const Value& subject, const Arguments& arguments) {
  BoundArguments("escape", arguments, {});
  return subject.is_markup() ? subject : Value::markup(html_escape(to_str(subject)));
}

Value filter_forceescape(const Value& subject, const Arguments& arguments) {
  BoundArguments("forceescape", arguments, {});
  return Value::markup(html_escape(to_str(subject)));
}

Value filter_first(const Value& subject, const Arguments& arguments) {
  BoundArguments("first", arguments, {});
  const ValueList items = iterate(subject);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value filter_last(const Value& subject, const Arguments& arguments) {
  BoundArguments("last", arguments, {});
  const ValueList items = iterate(subject);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

/// Python's float(text): surrounding whitespace allowed, "inf"/"nan" accepted; nullopt when invalid.
std::optional<double> parse_float(const std::string& text) {
  std::string trimmed = python_strip(text, std::nullopt, StripSide::kBoth);
  trimmed.erase(std::remove(trimmed.begin(), trimmed.end(), '_'), trimmed.end());
  if (trimmed.empty()) return std::nullopt;
  char* end = nullptr;
  const double number = std::strtod(trimmed.c_str(), &end);
  if (end != trimmed.c_str() + trimmed.size()) return std::nullopt;
  const bool hex = trimmed.find_first_of("xX") != std::string::npos;
  return hex ? std::nullopt : std::optional<double>(number);
}

Value filter_float(const Value& subject, const Arguments& arguments) {
  BoundArguments bound("float", arguments, {{"default", 0.0}});
  if (subject.is_undefined()) fail_undefined(subject);  // jinja2's Undefined.__float__ raises
  if (subject.is_number()) return Value(subject.as_float());
  if (subject.is_string()) {
    if (std::optional<double> number = parse_float(subject.as_string())) return Value(*number);
  }
  return bound[0];
}

/// A float truncated toward zero as Python's int() does; graphed's ints are 64-bit, so larger values fail.
Value truncated(double number) {
  if (!(std::fabs(number) < 9223372036854775808.0)) {
    throw EvaluationError("the number " + format_float(number) + " does not fit in a 64-bit integer",
                          "keep integers within +-9.2e18");
  }
  return Value(static_cast<int64_t>(number));
}

Value filter_int(const Value& subject, const Arguments& arguments) {
  BoundArguments bound("int", arguments, {{"default", 0}, {"base", 10}});
  if (subject.is_undefined()) fail_undefined(subject);  // jinja2's Undefined.__int__ raises
  if (subject.is_integer() || subject.is_boolean()) return Value(subject.as_integer());
  if (subject.is_float()) {
    if (!std::isfinite(subject.as_float())) return bound[0];
    return truncated(subject.as_float());
  }
  if (!subject.is_string()) return bound[0];
  std::string text = python_strip(subject.as_string(), std::nullopt, StripSide::kBoth);
  text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
  const int base = static_cast<int>(integer_argument(bound[1], "int's base"));
  char* end = nullptr;
  errno = 0;
  const long long number = text.empty() ? 0 : std::strtoll(text.c_str(), &end, base);
  if (!text.empty() && end == text.c_str() + text.size() && errno == 0) return Value(static_cast<int64_t>(number));
  if (std::optional<double> real = parse_float(subject.as_string())) {
    if (std::isfinite(*real)) return truncated(*real);
  }
  return bound[0];
}

Value filter_indent(const Value& subject, const Arguments& arguments) {
  BoundArguments bound("indent", arguments, {{"width", 4}, {"first", false}, {"blank", false}});
  const std::string indentation =
      bound[0].is_string()
          ? bound[0].as_string()
          : std::string(static_cast<std::size_t>(std::max<int64_t>(0, integer_argument(bound[0], "indent's width"))),
                        ' ');
  if (!subject.is_string()) {
    if (subject.is_undefined()) fail_undefined(subject);
    throw EvaluationError("unsupported operand type(s) for +=: '" + type_name(subject) + "' and 'str'",
                          "indent a string (convert it with |string first)");
  }
  const std::vector<std::string> lines = python_splitlines(subject.as_string() + "\n");
  std::string out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) {
      out += '\n';
      if (is_true(bound[2]) || !lines[i].empty()) out += indentation;
    }
    out += lines[i];
  }
  if (is_true(bound[1])) out = indentation + out;
  return Value(std::move(out));
}

Value filter_items(const Value& subject, const Arguments& arguments) {
  BoundArguments("items", arguments, {});
  if (subject.is_undefined()) return Value::list({});
  if (!subject.is_dict()) throw EvaluationError("Can only get item pairs from a mapping.", "apply items to a dict");
  ValueList pairs;
  for (const auto& [key, value] : subject.as_dict().entries()) pairs.push_back(Value::tuple({key, value}));
  return Value::list(std::move(pairs));
}

Value filter_join(const Value& subject, const Arguments& arguments) {
  BoundArguments bound("join", arguments, {{"d", ""}, {"attribute", Value::none()}});
  const std::string separator = to_str(bound[0]);
  std::string out;
  bool first = true;
  for (const Value& item : iterate(subject)) {
    if (!first) out += separator;
    first = false;
    out += to_str(bound[1].is_none() ? item : lookup_path(item, bound[1]));
  }
  return Value(std::move(out));
}

Value filter_length(const Value& subject, const Arguments& arguments) {
  BoundArguments("length", arguments, {});
  return Value(length_of(subject));
}

Value filter_list(const Value& subject, const Arguments& arguments) {
  BoundArguments("list", arguments, {});
  return Value::list(iterate(subject));
}

Value filter_map(const Value& subject, const Arguments& arguments) {
  ValueList mapped;
  if (!is_true(subject)) return Value::list({});  // jinja2's generator starts with `if value:`
  const auto attribute = std::find_if(arguments.keyword.begin(), arguments.keyword.end(),
                                      [](const auto& keyword) { return keyword.first == "attribute"; });
  if (arguments.positional.empty() && attribute != arguments.keyword.end()) {
    BoundArguments bound("map", arguments, {"attribute", {"default", Value()}});
    for (const Value& item : iterate(subject)) {
      Value value = lookup_path(item, bound[0]);
      mapped.push_back(value.is_undefined() && bound.given(1) ? bound[1] : value);
    }
    return Value::list(std::move(mapped));
  }
  if (arguments.positional.empty()) {
    throw EvaluationError("map requires a filter argument", "write map('filter_name') or map(attribute='name')");
  }
  const std::string name = string_argument(arguments.positional[0], "map's filter name");
  Arguments rest{ValueList(arguments.positional.begin() + 1, arguments.positional.end()), arguments.keyword};
  for (const Value& item : iterate(subject)) mapped.push_back(apply_filter(name, item, rest));
  return Value::list(std::move(mapped));
}

Value extreme(const Value& subject, const Arguments& arguments, bool want_max) {
  BoundArguments bound(want_max ? "max" : "min", arguments, {{"case_sensitive", false}, {"attribute", Value::none()}});
  const ValueList items = iterate(subject);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  const bool case_sensitive = is_true(bound[0]);
  std::size_t best = 0;
  for (std::size_t i = 1; i < items.size(); ++i) {
    const int order = compare(sort_key(items[i], bound[1], case_sensitive),
                              sort_key(items[best], bound[1], case_sensitive), want_max ? ">" : "<");
    if (want_max ? order > 0 : order < 0) best = i;
  }
  return items[best];
}

Value filter_max(const Value& subject, const Arguments& arguments) { return extreme(subject, arguments, true); }
Value filter_min(const Value& subject, const Arguments& arguments) { return extreme(subject, arguments, false); }

/// select/reject/selectattr/rejectattr: keep items whose test (or truthiness) equals `keep`.
Value select_items(const Value& subject, const Arguments& arguments, bool keep, bool by_attribute) {
  const std::string filter = std::string(keep ? "select" : "reject") + (by_attribute ? "attr" : "");
  std::size_t next = 0;
  Value attribute;
  if (by_attribute) {
    if (arguments.positional.empty())
      throw EvaluationError(filter + " needs an attribute name", "write " + filter + "('name')");
    attribute = arguments.positional[next++];
  }
  std::string test;
  if (next < arguments.positional.size()) test = string_argument(arguments.positional[next++], filter + "'s test name");
  const Arguments test_arguments{
      ValueList(arguments.positional.begin() + static_cast<std::ptrdiff_t>(next), arguments.positional.end()),
      arguments.keyword};
  ValueList kept;
  if (!is_true(subject)) return Value::list({});  // jinja2's generator starts with `if value:`
  for (const Value& item : iterate(subject)) {
    const Value tested = by_attribute ? lookup_path(item, attribute) : item;
    const bool passes = test.empty() ? is_true(tested) : apply_test(test, tested, test_arguments);
    if (passes == keep) kept.push_back(item);
  }
  return Value::list(std::move(kept));
}

Value filter_select(const Value& s, const Arguments& a) { return select_items(s, a, true, false); }
Value filter_reject(const Value& s, const Arguments& a) { return select_items(s, a, false, false); }
Value filter_selectattr(const Value& s, const Arguments& a) { return select_items(s, a, true, true); }
Value filter_rejectattr(const Value& s, const Arguments& a) { return select_items(s, a, false, true); }

Value filter_replace(const Value& subject, const Arguments& arguments) {
  BoundArguments bound("replace", arguments, {"old", "new", {"count", Value::none()}});
  const int64_t count = bound[2].is_none() ? -1 : integer_argument(bound[2], "replace's count");
  return Value(python_replace(to_str(subject), to_str(bound[0]), to_str(bound[1]), count));
}

Value filter_reverse(const Value& subject, const Arguments& arguments) {
  BoundArguments("reverse", arguments, {});
  if (subject.is_string()) return get_slice(subject, Value::none(), Value::none(), Value(-1));
  ValueList items = iterate(subject);
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

/// Python's round(number, digits): halves go to the even neighbour of the exact binary value.
Value python_round(const Value& number, int64_t digits) {
  if (!number.is_float()) {
    if (digits >= 0) return Value(number.as_integer());
    int64_t scale = 1;
    for (int64_t i = 0; i < -digits && scale < (int64_t{1} << 60); ++i) scale *= 10;
    const int64_t value = number.as_integer();
    int64_t quotient = value / scale;
    int64_t remainder = value % scale;
    if (remainder < 0) {
      remainder += scale;
      --quotient;
    }
    if (remainder * 2 > scale || (remainder * 2 == scale && quotient % 2 != 0)) ++quotient;
    return Value(quotient * scale);
  }
  const double value = number.as_float();
  if (!std::isfinite(value)) return Value(value);
  if (digits < 0) {
    const double scale = std::pow(10.0, static_cast<double>(-digits));
    return Value(std::nearbyint(value / scale) * scale);
  }
  char buffer[400];
  std::snprintf(buffer, sizeof buffer, "%.*f", static_cast<int>(std::min<int64_t>(digits, 300)), value);
  return Value(std::strtod(buffer, nullptr));
}

Value filter_round(const Value& subject, const Arguments& arguments) {
  BoundArguments bound("round", arguments, {{"precision", 0}, {"method", "common"}});
  if (!subject.is_number()) {
    if (subject.is_undefined()) fail_undefined(subject);
    throw EvaluationError("type " + type_name(subject) + " doesn't define __round__ method", "round numbers only");
  }
  const int64_t precision = integer_argument(bound[0], "round's precision");
  const std::string method = string_argument(bound[1], "round's method");
  if (method == "common") return python_round(subject, precision);
  if (method != "ceil" && method != "floor") {
    throw EvaluationError("method must be 'common', 'ceil' or 'floor'", "pass method='common', 'ceil' or 'floor'");
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double scaled = subject.as_float() * scale;
  return Value((method == "ceil" ? std::ceil(scaled) : std::floor(scaled)) / scale);
}

Value filter_sort(const Value& subject, const Arguments& arguments) {
  BoundArguments bound("sort", arguments,
                       {{"reverse", false}, {"case_sensitive", false}, {"attribute", Value::none()}});
  ValueList items = iterate(subject);
  const bool reverse = is_true(bound[0]);
  const bool case_sensitive = is_true(bound[1]);
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    const int order = compare(sort_key(a, bound[2], case_sensitive), sort_key(b, bound[2], case_sensitive), "<");
    return reverse ? order > 0 : order < 0;
  });
  return Value::list(std::move(items));
}

Value filter_sum(const Value& subject, const Arguments& arguments) {
  BoundArguments bound("sum", arguments, {{"attribute", Value::none()}, {"start", 0}});
  Value total = bound[1];
  for (const Value& item : iterate(subject)) {
    total = binary_operation("+", total, bound[0].is_none() ? item : lookup_path(item, bound[0]));
  }
  return total;
}

Value filter_tojson(const Value& subject, const Arguments& arguments) {
  BoundArguments bound(
      "tojson", arguments,
      {{"ensure_ascii", false}, {"indent", Value::none()}, {"separators", Value::none()}, {"sort_keys", false}});
  JsonDumpOptions options;
  options.ensure_ascii = is_true(bound[0]);
  options.sort_keys = is_true(bound[3]);
  if (!bound[1].is_none()) {
    options.indent =
        bound[1].is_string()
            ? bound[1].as_string()
            : std::string(static_cast<std::size_t>(std::max<int64_t>(0, integer_argument(bound[1], "tojson's indent"))),
                          ' ');
    options.item_separator = ",";
  }
  if (!bound[2].is_none()) {
    if (!bound[2].is_list() || bound[2].as_list().items.size() != 2) {
      throw EvaluationError("tojson's separators must be a pair (item_separator, key_separator)",
                            "pass separators=(', ', ': ')");
    }
    options.item_separator = string_argument(bound[2].as_list().items[0], "tojson's item separator");
    options.key_separator = string_argument(bound[2].as_list().items[1], "tojson's key separator");
  }
  return Value(dump_json(subject, options));
}

Value filter_trim(const Value& subject, const Arguments& arguments) {
  BoundArguments bound("trim", arguments, {{"chars", Value::none()}});
  const std::optional<std::string> characters =
      bound[0].is_none() ? std::nullopt : std::optional<std::string>(string_argument(bound[0], "trim's chars"));
  return Value(python_strip(to_str(subject), characters, StripSide::kBoth));
}

Value filter_unique(const Value& subject, const Arguments& arguments) {
  BoundArguments bound("unique", arguments, {{"case_sensitive", false}, {"attribute", Value::none()}});
  ValueList kept;
  ValueList seen;
  for (const Value& item : iterate(subject)) {
    const Value key = sort_key(item, bound[1], is_true(bound[0]));
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& other) { return equals(other, key); })) continue;
    seen.push_back(key);
    kept.push_back(item);
  }
  return Value::list(std::move(kept));
}

template <std::string (*Transform)(std::string_view)>
Value text_filter(const Value& subject, const Arguments& arguments) {
  BoundArguments("text filter", arguments, {});
  return Value(Transform(to_str(subject)));
}

Value filter_string(const Value& subject, const Arguments& arguments) {
  BoundArguments("string", arguments, {});
  return subject.is_string() ? subject : Value(to_str(subject));
}

Value filter_safe(const Value& subject, const Arguments& arguments) {
  BoundArguments("safe", arguments, {});
  return subject.is_markup() ? subject : Value::markup(to_str(subject));
}

Value filter_wordcount(const Value& subject, const Arguments& arguments) {
  BoundArguments("wordcount", arguments, {});
  return Value(word_count(to_str(subject)));
}

const std::unordered_map<std::string, FilterFunction>& filters() {
  static const std::unordered_map<std::string, FilterFunction> table = {
      {"abs", filter_abs},
      {"capitalize", text_filter<python_capitalize>},
      {"center", filter_center},
      {"count", filter_length},
      {"d", filter_default},
      {"default", filter_default},
      {"dictsort", filter_dictsort},
      {"e", filter_escape},
      {"escape", filter_escape},
      {"first", filter_first},
      {"float", filter_float},
      {"forceescape", filter_forceescape},
      {"indent", filter_indent},
      {"int", filter_int},
      {"items", filter_items},
      {"join", filter_join},
      {"last", filter_last},
      {"length", filter_length},
      {"list", filter_list},
      {"lower", text_filter<python_lower>},
      {"map", filter_map},
      {"max", filter_max},
      {"min", filter_min},
      {"reject", filter_reject},
      {"rejectattr", filter_rejectattr},
      {"replace", filter_replace},
      {"reverse", filter_reverse},
      {"round", filter_round},
      {"safe", filter_safe},
      {"select", filter_select},
      {"selectattr", filter_selectattr},
      {"sort", filter_sort},
      {"string", filter_string},
      {"sum", filter_sum},
      {"title", text_filter<jinja_title>},
      {"tojson", filter_tojson},
      {"trim", filter_trim},
      {"unique", filter_unique},
      {"upper", text_filter<python_upper>},
      {"wordcount", filter_wordcount},
  };
  return table;
}

}  // namespace

bool has_filter(const std::string& name) { return filters().count(name) != 0; }

Value apply_filter(const std::string& name, const Value& subject, const Arguments& arguments) {
  const auto found = filters().find(name);
  if (found == filters().end()) {
    throw EvaluationError("no filter named '" + name + "'", "use a jinja2 builtin filter such as trim, tojson, length");
  }
  return found->second(subject, arguments);
}

}  // namespace graphed::jinja
