// jinja/globals.h — the global functions every render sees: jinja2's range (limited to 100000 items as
// in its sandbox), dict and namespace, and transformers' raise_exception(message) and
// strftime_now(format) (local time, as datetime.now().strftime). No lipsum, cycler or joiner.
#pragma once

#include "graphed/jinja/value.h"

namespace graphed::jinja {

/// A dict of the global functions by name.
Dict make_globals();

}  // namespace graphed::jinja
