// jinja/json_values.cpp — JSON -> Value for render contexts, and Python's json.dumps for `tojson`
// (same separators, indentation, float repr, string escapes and errors as CPython's json module).
#include "graphed/jinja/json_values.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "graphed/jinja/python_text.h"
#include "graphed/util/utf8.h"

namespace graphed::jinja {
namespace {

void append_json_string(std::string& out, const std::string& text, bool ensure_ascii) {
  out += '"';
  for (const char32_t c : code_points_of(text)) {
    char buffer[16];
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (c < 0x20) {
      std::snprintf(buffer, sizeof buffer, "\\u%04x", static_cast<unsigned>(c));
      out += buffer;
    } else if (c < 0x80 || !ensure_ascii) {
      out += utf8_of(c);
    } else if (c < 0x10000) {
      std::snprintf(buffer, sizeof buffer, "\\u%04x", static_cast<unsigned>(c));
      out += buffer;
    } else {
      const char32_t offset = c - 0x10000;
      std::snprintf(buffer, sizeof buffer, "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (offset >> 10)),
                    static_cast<unsigned>(0xDC00 + (offset & 0x3FF)));
      out += buffer;
    }
  }
  out += '"';
}

std::string json_number(const Value& value) {
  if (value.is_boolean()) return value.as_boolean() ? "true" : "false";
  if (value.is_integer()) return std::to_string(value.as_integer());
  const double number = value.as_float();
  if (std::isnan(number)) return "NaN";
  if (std::isinf(number)) return number < 0 ? "-Infinity" : "Infinity";
  return format_float(number);
}

[[noreturn]] void fail_not_serializable(const Value& value) {
  throw EvaluationError("Object of type " + type_name(value) + " is not JSON serializable",
                        "pass only JSON values (strings, numbers, booleans, none, lists, dicts) to tojson");
}

/// A dict key as json.dumps writes it: strings as they are; numbers, booleans and None converted.
std::string json_key(const Value& key) {
  if (key.is_string()) return key.as_string();
  if (key.is_none()) return "null";
  if (key.is_number()) return json_number(key);
  throw EvaluationError("keys must be str, int, float, bool or None, not " + type_name(key),
                        "use string keys in dicts passed to tojson");
}

constexpr int kMaxNesting = 512;

class JsonWriter {
 public:
  explicit JsonWriter(const JsonDumpOptions& options) : options_(options) {}

  void write(const Value& value, int level) {
    if (level > kMaxNesting) {
      throw EvaluationError(
          "a value passed to tojson is nested more than " + std::to_string(kMaxNesting) + " levels deep",
          "pass a value with fewer nested lists and dicts");
    }
    switch (value.kind()) {
      case ValueKind::kNone: out_ += "null"; return;
      case ValueKind::kBoolean:
      case ValueKind::kInteger:
      case ValueKind::kFloat: out_ += json_number(value); return;
      case ValueKind::kString: append_json_string(out_, value.as_string(), options_.ensure_ascii); return;
      case ValueKind::kList: write_list(value.as_list().items, level); return;
      case ValueKind::kDict: write_dict(value.as_dict(), level); return;
      default: fail_not_serializable(value);
    }
  }

  std::string take() { return std::move(out_); }

 private:
  void new_line(int level) {
    if (!options_.indent) return;
    out_ += '\n';
    for (int i = 0; i < level; ++i) out_ += *options_.indent;
  }

  void write_list(const ValueList& items, int level) {
    if (items.empty()) {
      out_ += "[]";
      return;
    }
    out_ += '[';
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out_ += options_.item_separator;
      new_line(level + 1);
      write(items[i], level + 1);
    }
    new_line(level);
    out_ += ']';
  }

  void write_dict(const Dict& dict, int level) {
    if (dict.empty()) {
      out_ += "{}";
      return;
    }
    std::vector<const std::pair<Value, Value>*> entries;
    for (const auto& entry : dict.entries()) entries.push_back(&entry);
    if (options_.sort_keys) {
      std::stable_sort(entries.begin(), entries.end(),
                       [](const auto* a, const auto* b) { return compare(a->first, b->first, "<") < 0; });
    }
    out_ += '{';
    for (std::size_t i = 0; i < entries.size(); ++i) {
      if (i > 0) out_ += options_.item_separator;
      new_line(level + 1);
      append_json_string(out_, json_key(entries[i]->first), options_.ensure_ascii);
      out_ += options_.key_separator;
      write(entries[i]->second, level + 1);
    }
    new_line(level);
    out_ += '}';
  }

  const JsonDumpOptions& options_;
  std::string out_;
};

}  // namespace

Value value_from_json(const nlohmann::ordered_json& json, int max_depth) {
  if (max_depth < 0) {
    throw EvaluationError("the context is nested too deeply", "pass a context with fewer nested lists and objects");
  }
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null:
    case nlohmann::ordered_json::value_t::discarded: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(json.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const auto number = json.get<uint64_t>();
      if (number <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Value(static_cast<int64_t>(number));
      }
      return Value(static_cast<double>(number));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value(json.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value(json.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      ValueList items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(value_from_json(item, max_depth - 1));
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict dict;
      for (const auto& [key, item] : json.items()) dict.set(Value(key), value_from_json(item, max_depth - 1));
      return Value::dict(std::move(dict));
    }
    case nlohmann::ordered_json::value_t::binary: break;
  }
  throw EvaluationError("the context holds a binary JSON value", "pass only JSON text values in the context");
}

std::string dump_json(const Value& value, const JsonDumpOptions& options) {
  JsonWriter writer(options);
  writer.write(value, 0);
  return writer.take();
}

}  // namespace graphed::jinja
