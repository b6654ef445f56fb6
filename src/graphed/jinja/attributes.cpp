// jinja/attributes.cpp — jinja2's sandboxed getattr/getitem: Python methods of str, dict and list bound
// to their receiver, dict items and namespace attributes, undefined values with jinja2's hints for a
// miss, and Python slicing.
#include "graphed/jinja/attributes.h"

#include <algorithm>
#include <cctype>

#include "graphed/jinja/arguments.h"
#include "graphed/jinja/operators.h"
#include "graphed/jinja/python_text.h"
#include "graphed/util/utf8.h"

namespace graphed::jinja {
namespace {

/// jinja2's object_type_repr: "None", "dict object", "jinja2.utils.Namespace object", ...
std::string object_description(const Value& object) {
  if (object.is_none()) return "None";
  if (object.is_namespace()) return "jinja2.utils.Namespace object";
  return type_name(object) + " object";
}

Value missing_attribute(const Value& object, const std::string& name) {
  return Value::undefined(python_string_repr(object_description(object)) + " has no attribute " +
                          python_string_repr(name));
}

Value missing_element(const Value& object, const Value& key) {
  if (key.is_string()) return missing_attribute(object, key.as_string());
  return Value::undefined(object_description(object) + " has no element " + to_repr(key));
}

Value method(const Value& receiver, const std::string& name, Callable::Function function) {
  return Value::callable(type_name(receiver) + "." + name, std::move(function));
}

std::optional<std::string> optional_string(const Value& value, const std::string& what) {
  if (value.is_none()) return std::nullopt;
  return string_argument(value, what);
}

bool matches_affix(const std::string& text, const Value& affixes, bool at_start, const std::string& function) {
  auto matches = [&](const Value& affix) {
    const std::string& part = string_argument(affix, function + "() argument");
    if (part.size() > text.size()) return false;
    return at_start ? text.compare(0, part.size(), part) == 0
                    : text.compare(text.size() - part.size(), part.size(), part) == 0;
  };
  if (affixes.is_list() && affixes.as_list().is_tuple) {
    const ValueList& items = affixes.as_list().items;
    return std::any_of(items.begin(), items.end(), matches);
  }
  if (!affixes.is_string()) {
    throw EvaluationError(function + " first arg must be str or a tuple of str, not " + type_name(affixes),
                          "pass a string or a tuple of strings");
  }
  return matches(affixes);
}

bool all_code_points(const std::string& text, bool (*predicate)(char32_t)) {
  const std::u32string points = code_points_of(text);
  return !points.empty() && std::all_of(points.begin(), points.end(), predicate);
}

Value string_list(std::vector<std::string> pieces) {
  ValueList items;
  items.reserve(pieces.size());
  for (std::string& piece : pieces) items.emplace_back(std::move(piece));
  return Value::list(std::move(items));
}

/// split, rsplit, splitlines, strip, lstrip, rstrip, replace, join.
std::optional<Value> string_editing_method(const Value& receiver, const std::string& name) {
  const std::string text = receiver.as_string();
  const std::string function = "str." + name;
  auto bind = [&](Callable::Function body) { return method(receiver, name, std::move(body)); };
  if (name == "split" || name == "rsplit") {
    return bind([text, function, name](const Arguments& arguments) {
      BoundArguments bound(function, arguments, {{"sep", Value::none()}, {"maxsplit", -1}});
      const auto separator = optional_string(bound[0], function + "() separator");
      const int64_t max_split = integer_argument(bound[1], function + "() maxsplit");
      return string_list(name == "split" ? python_split(text, separator, max_split)
                                         : python_rsplit(text, separator, max_split));
    });
  }
  if (name == "splitlines") {
    return bind([text, function](const Arguments& arguments) {
      BoundArguments bound(function, arguments, {});
      return string_list(python_splitlines(text));
    });
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const StripSide side =
        name == "strip" ? StripSide::kBoth : (name == "lstrip" ? StripSide::kLeft : StripSide::kRight);
    return bind([text, function, side](const Arguments& arguments) {
      BoundArguments bound(function, arguments, {{"chars", Value::none()}});
      return Value(python_strip(text, optional_string(bound[0], function + "() chars"), side));
    });
  }
  if (name == "replace") {
    return bind([text, function](const Arguments& arguments) {
      BoundArguments bound(function, arguments, {"old", "new", {"count", -1}});
      return Value(python_replace(text, string_argument(bound[0], function + "() old"),
                                  string_argument(bound[1], function + "() new"),
                                  integer_argument(bound[2], function + "() count")));
    });
  }
  if (name == "join") {
    return bind([text, function](const Arguments& arguments) {
      BoundArguments bound(function, arguments, {"iterable"});
      std::string out;
      bool first = true;
      for (const Value& item : iterate(bound[0])) {
        if (!first) out += text;
        first = false;
        out += string_argument(item, function + "() item");
      }
      return Value(std::move(out));
    });
  }
  return std::nullopt;
}

/// startswith, endswith, find, rfind, index, count.
std::optional<Value> string_search_method(const Value& receiver, const std::string& name) {
  const std::string text = receiver.as_string();
  const std::string function = "str." + name;
  if (name == "startswith" || name == "endswith") {
    return method(receiver, name, [text, function, name](const Arguments& arguments) {
      BoundArguments bound(function, arguments, {"prefix"});
      return Value(matches_affix(text, bound[0], name == "startswith", function));
    });
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "count") {
    return method(receiver, name, [text, function, name](const Arguments& arguments) {
      BoundArguments bound(function, arguments, {"sub"});
      const std::string& sub = string_argument(bound[0], function + "() argument");
      if (name == "count") return Value(python_count(text, sub));
      const int64_t at = name == "rfind" ? python_rfind(text, sub) : python_find(text, sub);
      if (name == "index" && at < 0) throw EvaluationError("substring not found", "test with `in` first");
      return Value(at);
    });
  }
  return std::nullopt;
}

/// upper, lower, title, capitalize and the is...() predicates.
std::optional<Value> string_case_method(const Value& receiver, const std::string& name) {
  const std::string text = receiver.as_string();
  const std::string function = "str." + name;
  using Transform = std::string (*)(std::string_view);
  Transform transform = nullptr;
  if (name == "upper") transform = python_upper;
  if (name == "lower") transform = python_lower;
  if (name == "title") transform = python_title;
  if (name == "capitalize") transform = python_capitalize;
  if (transform != nullptr) {
    return method(receiver, name, [text, function, transform](const Arguments& arguments) {
      BoundArguments bound(function, arguments, {});
      return Value(transform(text));
    });
  }
  using Predicate = bool (*)(char32_t);
  Predicate predicate = nullptr;
  if (name == "isdigit") predicate = [](char32_t c) { return c >= '0' && c <= '9'; };
  if (name == "isalpha") predicate = [](char32_t c) { return c >= 0x80 || std::isalpha(static_cast<int>(c)) != 0; };
  if (name == "isalnum") predicate = [](char32_t c) { return c >= 0x80 || std::isalnum(static_cast<int>(c)) != 0; };
  if (name == "isspace") predicate = is_python_whitespace;
  if (predicate != nullptr) {
    return method(receiver, name, [text, function, predicate](const Arguments& arguments) {
      BoundArguments bound(function, arguments, {});
      return Value(all_code_points(text, predicate));
    });
  }
  if (name == "islower" || name == "isupper") {
    return method(receiver, name, [text, function, name](const Arguments& arguments) {
      BoundArguments bound(function, arguments, {});
      const std::string lower = python_lower(text);
      const std::string upper = python_upper(text);
      return Value(lower != upper && (name == "islower" ? text == lower : text == upper));
    });
  }
  return std::nullopt;
}

std::optional<Value> string_method(const Value& receiver, const std::string& name) {
  if (std::optional<Value> found = string_editing_method(receiver, name)) return found;
  if (std::optional<Value> found = string_search_method(receiver, name)) return found;
  return string_case_method(receiver, name);
}

std::optional<Value> dict_method(const Value& receiver, const std::string& name) {
  const std::string function = "dict." + name;
  if (name == "items" || name == "keys" || name == "values") {
    return method(receiver, name, [receiver, function, name](const Arguments& arguments) {
      BoundArguments bound(function, arguments, {});
      ValueList items;
      for (const auto& [key, value] : receiver.as_dict().entries()) {
        if (name == "items") items.push_back(Value::tuple({key, value}));
        if (name == "keys") items.push_back(key);
        if (name == "values") items.push_back(value);
      }
      return Value::list(std::move(items));
    });
  }
  if (name == "get") {
    return method(receiver, name, [receiver, function](const Arguments& arguments) {
      BoundArguments bound(function, arguments, {"key", {"default", Value::none()}});
      const Value* found = receiver.as_dict().find(bound[0]);
      return found != nullptr ? *found : bound[1];
    });
  }
  return std::nullopt;
}

std::optional<Value> list_method(const Value& receiver, const std::string& name) {
  const std::string function = type_name(receiver) + "." + name;
  if (name == "index" || name == "count") {
    return method(receiver, name, [receiver, function, name](const Arguments& arguments) {
      BoundArguments bound(function, arguments, {"value"});
      const ValueList& items = receiver.as_list().items;
      int64_t count = 0;
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (!equals(items[i], bound[0])) continue;
        if (name == "index") return Value(static_cast<int64_t>(i));
        ++count;
      }
      if (name == "index") {
        throw EvaluationError(to_repr(bound[0]) + " is not in " + type_name(receiver), "test with `in` first");
      }
      return Value(count);
    });
  }
  return std::nullopt;
}

bool is_mutating_method(const Value& object, const std::string& name) {
  static const char* const kListMethods[] = {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"};
  static const char* const kDictMethods[] = {"clear", "pop", "popitem", "setdefault", "update"};
  if (object.is_list() && !object.as_list().is_tuple) {
    return std::any_of(std::begin(kListMethods), std::end(kListMethods), [&](const char* m) { return name == m; });
  }
  if (object.is_dict()) {
    return std::any_of(std::begin(kDictMethods), std::end(kDictMethods), [&](const char* m) { return name == m; });
  }
  return false;
}

/// A Python attribute of the object (a bound method), or nullopt when it has none.
std::optional<Value> python_attribute(const Value& object, const std::string& name) {
  const bool is_dunder =
      name.size() > 4 && name.compare(0, 2, "__") == 0 && name.compare(name.size() - 2, 2, "__") == 0;
  if (is_dunder) {  // Python internals (__class__, __init__, ...) are unsafe in the sandbox
    return Value::undefined("access to attribute " + python_string_repr(name) + " of " +
                            python_string_repr(type_name(object)) + " object is unsafe.");
  }
  if (is_mutating_method(object, name)) {
    return Value::undefined("access to attribute " + python_string_repr(name) + " of " +
                            python_string_repr(type_name(object)) + " object is unsafe.");
  }
  if (object.is_string()) return string_method(object, name);
  if (object.is_dict()) return dict_method(object, name);
  if (object.is_list()) return list_method(object, name);
  if (object.is_namespace()) {
    const Value* found = object.as_namespace().attributes.find(Value(name));
    if (found != nullptr) return *found;
  }
  return std::nullopt;
}

}  // namespace

Value get_attribute(const Value& object, const std::string& name) {
  if (object.is_undefined()) fail_undefined(object);
  if (std::optional<Value> attribute = python_attribute(object, name)) return *attribute;
  if (object.is_dict()) {
    const Value* found = object.as_dict().find(Value(name));
    if (found != nullptr) return *found;
  }
  return missing_attribute(object, name);
}

Value get_item(const Value& object, const Value& key) {
  if (object.is_undefined()) fail_undefined(object);
  const bool integer_key = key.is_integer() || key.is_boolean();
  if (object.is_list() && integer_key) {
    const ValueList& items = object.as_list().items;
    int64_t index = key.as_integer();
    if (index < 0) index += static_cast<int64_t>(items.size());
    if (index >= 0 && index < static_cast<int64_t>(items.size())) return items[static_cast<std::size_t>(index)];
  } else if (object.is_string() && integer_key) {
    if (std::optional<std::string> character = code_point_at(object.as_string(), key.as_integer())) {
      return Value(std::move(*character));
    }
  } else if (object.is_dict() && !key.is_list() && !key.is_dict()) {
    const Value* found = object.as_dict().find(key);
    if (found != nullptr) return *found;
  }
  if (key.is_string()) {
    if (std::optional<Value> attribute = python_attribute(object, key.as_string())) return *attribute;
  }
  return missing_element(object, key);
}

Value get_slice(const Value& object, const Value& start, const Value& stop, const Value& step) {
  if (object.is_undefined()) fail_undefined(object);
  auto bound = [](const Value& value) -> std::optional<int64_t> {
    if (value.is_none() || value.is_undefined()) return std::nullopt;
    if (value.is_integer() || value.is_boolean()) return value.as_integer();
    throw EvaluationError("slice indices must be integers or None, got " + type_name(value),
                          "slice with integers, e.g. items[1:] or text[::-1]");
  };
  if (object.is_list()) {
    const ValueList& items = object.as_list().items;
    ValueList sliced;
    for (const int64_t i : slice_indexes(static_cast<int64_t>(items.size()), bound(start), bound(stop), bound(step))) {
      sliced.push_back(items[static_cast<std::size_t>(i)]);
    }
    return object.as_list().is_tuple ? Value::tuple(std::move(sliced)) : Value::list(std::move(sliced));
  }
  if (object.is_string()) {
    const std::u32string points = code_points_of(object.as_string());
    std::string sliced;
    for (const int64_t i : slice_indexes(static_cast<int64_t>(points.size()), bound(start), bound(stop), bound(step))) {
      append_utf8(sliced, points[static_cast<std::size_t>(i)]);
    }
    return Value(std::move(sliced));
  }
  // jinja2 compiles slices to Python's own subscription, without its getitem fallbacks.
  if (object.is_dict()) throw EvaluationError("unhashable type: 'slice'", "slice a list or a string");
  throw EvaluationError("'" + type_name(object) + "' object is not subscriptable", "slice a list or a string");
}

}  // namespace graphed::jinja
