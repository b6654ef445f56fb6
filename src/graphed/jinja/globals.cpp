// jinja/globals.cpp — the global callables: range (sandbox-limited), dict, namespace, raise_exception and
// strftime_now (datetime.now().strftime, with %f).
#include "graphed/jinja/globals.h"

#include <chrono>
#include <cstdio>
#include <ctime>

#include "graphed/jinja/arguments.h"
#include "graphed/jinja/operators.h"

namespace graphed::jinja {
namespace {

/// jinja2's sandbox refuses ranges longer than this (MAX_RANGE).
constexpr int64_t kMaxRange = 100000;

Value range_function(const Arguments& arguments) {
  if (!arguments.keyword.empty()) {
    throw EvaluationError("range() takes no keyword arguments", "call range(stop) or range(start, stop, step)");
  }
  const ValueList& given = arguments.positional;
  if (given.empty() || given.size() > 3) {
    throw EvaluationError("range expected 1 to 3 arguments, got " + std::to_string(given.size()),
                          "call range(stop) or range(start, stop, step)");
  }
  const int64_t start = given.size() == 1 ? 0 : integer_argument(given[0], "range() start");
  const int64_t stop = integer_argument(given.size() == 1 ? given[0] : given[1], "range() stop");
  const int64_t step = given.size() == 3 ? integer_argument(given[2], "range() step") : 1;
  if (step == 0) throw EvaluationError("range() arg 3 must not be zero", "use a non-zero step");
  const int64_t count = step > 0 ? (stop > start ? (stop - start + step - 1) / step : 0)
                                 : (start > stop ? (start - stop - step - 1) / -step : 0);
  if (count > kMaxRange) {
    throw EvaluationError("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).",
                          "loop over fewer items");
  }
  ValueList items;
  items.reserve(static_cast<std::size_t>(count));
  for (int64_t i = 0; i < count; ++i) items.emplace_back(start + i * step);
  return Value::list(std::move(items));
}

/// dict(mapping_or_pairs, **keywords), as Python's dict() and jinja2's namespace() take them.
Dict dict_from_arguments(const std::string& function, const Arguments& arguments) {
  if (arguments.positional.size() > 1) {
    throw EvaluationError(
        function + " expected at most 1 positional argument, got " + std::to_string(arguments.positional.size()),
        "pass one dict, or name=value pairs");
  }
  Dict dict;
  if (!arguments.positional.empty()) {
    const Value& source = arguments.positional.front();
    if (source.is_dict()) {
      dict = source.as_dict();
    } else {
      for (const Value& pair : iterate(source)) {
        if (!pair.is_list() || pair.as_list().items.size() != 2) {
          throw EvaluationError(function + " needs a dict or (key, value) pairs", "pass a dict or a list of pairs");
        }
        dict.set(pair.as_list().items[0], pair.as_list().items[1]);
      }
    }
  }
  for (const auto& [name, value] : arguments.keyword) dict.set(Value(name), value);
  return dict;
}

/// Python's datetime.now().strftime(format): C strftime on local time, plus %f (microseconds).
std::string strftime_now(const std::string& format) {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto microseconds =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000;
  std::tm local{};
  localtime_r(&seconds, &local);
  std::string expanded;
  for (std::size_t i = 0; i < format.size(); ++i) {
    if (format[i] == '%' && i + 1 < format.size() && format[i + 1] == 'f') {
      char digits[8];
      std::snprintf(digits, sizeof digits, "%06lld", static_cast<long long>(microseconds));
      expanded += digits;
      ++i;
    } else if (format[i] == '%' && i + 1 < format.size() && format[i + 1] == '%') {
      expanded += "%%";
      ++i;
    } else {
      expanded += format[i];
    }
  }
  if (expanded.empty()) return "";
  std::string out(expanded.size() * 4 + 64, '\0');
  while (true) {
    const std::size_t written = std::strftime(out.data(), out.size(), expanded.c_str(), &local);
    if (written > 0 || out.size() > (std::size_t{1} << 20)) {
      out.resize(written);
      return out;
    }
    out.resize(out.size() * 2);
  }
}

}  // namespace

Dict make_globals() {
  Dict globals;
  globals.set(Value("range"), Value::callable("range", range_function));
  globals.set(Value("dict"), Value::callable("dict", [](const Arguments& arguments) {
                return Value::dict(dict_from_arguments("dict", arguments));
              }));
  globals.set(Value("namespace"), Value::callable("namespace", [](const Arguments& arguments) {
                return Value::new_namespace(dict_from_arguments("namespace", arguments));
              }));
  globals.set(Value("raise_exception"), Value::callable("raise_exception", [](const Arguments& arguments) -> Value {
                BoundArguments bound("raise_exception", arguments, {"message"});
                throw EvaluationError(to_str(bound[0]), "", true);
              }));
  globals.set(Value("strftime_now"), Value::callable("strftime_now", [](const Arguments& arguments) {
                BoundArguments bound("strftime_now", arguments, {"format"});
                return Value(strftime_now(string_argument(bound[0], "strftime_now's format")));
              }));
  return globals;
}

}  // namespace graphed::jinja
