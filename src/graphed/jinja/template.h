// jinja/template.h — Template: a torch-free Jinja2 subset that renders Hugging Face chat templates
// (tokenizer_config.json's "chat_template") byte for byte as transformers does, and TemplateError.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "graphed/util/error.h"

namespace graphed::jinja {

// What is supported: jinja2's ImmutableSandboxedEnvironment as transformers sets it up (trim_blocks,
// lstrip_blocks, loop controls, its `tojson` = json.dumps with ensure_ascii=False, the globals
// raise_exception() and strftime_now()): expressions with Python precedence and semantics, the builtin
// filters and tests of filters.h and value_tests.h, str/dict/list methods (attributes.h), if/elif/else,
// for (loop variables, else, inline if, unpacking), set (also ns.attr and block form), macro, call, filter
// blocks, raw, break/continue, namespace(), range(), dict(). Not supported: extends/include/import/block,
// with, recursive loops, macro varargs/kwargs, `*args` calls, autoescape, line statements, async.

/// A template that cannot be parsed or rendered. what() reads "template line 12, column 8: <problem>;
/// fix: <fix>". For raise_exception(message) the problem is "the template raised an error: <message>"
/// with no fix: the template's own message says what is wrong with the input.
class TemplateError : public Error {
 public:
  TemplateError(const std::string& problem, const std::string& fix, int line, int column,
                bool raised_by_template = false);
  /// 1-based line and column (code points) in the template source; 0 when not known.
  int line() const { return line_; }
  int column() const { return column_; }
  /// What went wrong, without the position and the fix; for raise_exception, the template's message.
  const std::string& problem() const { return problem_; }
  /// True when the template called raise_exception() (the input broke one of the template's rules,
  /// e.g. roles that do not alternate), false for a broken template or a failed operation.
  bool raised_by_template() const { return raised_by_template_; }

 private:
  std::string problem_;
  int line_;
  int column_;
  bool raised_by_template_;
};

/// Limits that stop a runaway template with a TemplateError instead of exhausting the machine.
struct TemplateOptions {
  /// Most bytes a render may produce (default 64 MiB).
  std::size_t max_output_bytes = std::size_t{64} << 20;
  /// Deepest nesting of macro calls (and caller() calls) in a render (default 100).
  int max_call_depth = 100;
  /// Most loop iterations in one render, all loops together (default 1 million).
  int64_t max_loop_iterations = 1'000'000;
};

/// A parsed template; render() may be called any number of times, from several threads at once.
///
///   graphed::jinja::Template chat(tokenizer_config["chat_template"].get<std::string>());
///   std::string prompt = chat.render({{"messages", messages}, {"add_generation_prompt", true},
///                                     {"bos_token", "<|begin_of_text|>"}});
class Template {
 public:
  /// Parses the source. Throws TemplateError naming the line and column of a syntax error.
  explicit Template(std::string source, TemplateOptions options = {});
  ~Template();
  Template(const Template&);
  Template& operator=(const Template&);

  /// Renders with the context's keys as variables. `context` must be a JSON object; its objects become
  /// dicts in their key order (so tool schemas print as given), arrays lists. A nlohmann::json context
  /// converts implicitly but its keys are then sorted. The globals range, dict, namespace,
  /// raise_exception and strftime_now (local time) are always there. Throws TemplateError.
  std::string render(const nlohmann::ordered_json& context) const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

}  // namespace graphed::jinja
