// jinja/filters.h — jinja2 3.1's builtin filters that chat templates use, and transformers' `tojson`
// (json.dumps with ensure_ascii=False, indent, separators, sort_keys).
#pragma once

#include <string>

#include "graphed/jinja/value.h"

namespace graphed::jinja {

// The filters: abs capitalize center count d default dictsort e escape first float forceescape indent int
// items join last length list lower map max min reject rejectattr replace reverse round safe select
// selectattr sort string sum title tojson trim unique upper wordcount.
// safe, escape and forceescape return Markup (a flagged string: `+` escapes the plain side, as markupsafe
// does; other operations give plain strings). Filters that return generators in jinja2 (map, select,
// reverse, unique, ...) return lists here: they print as lists and pass through tojson, where jinja2
// prints "<generator object ...>" and tojson fails.

/// Whether a filter of that name exists (checked when a template is parsed, as jinja2 does).
bool has_filter(const std::string& name);

/// subject | name(arguments). Throws EvaluationError for an unknown filter or bad arguments.
Value apply_filter(const std::string& name, const Value& subject, const Arguments& arguments);

}  // namespace graphed::jinja
