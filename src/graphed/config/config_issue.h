// config/config_issue.h — one finding of normalization, migration or validation: a stable rule id,
// a severity and a message ("what, which value; fix: ..."). Validation returns every issue, never
// just the first (STYLE.md rule 10); ConfigError carries the whole list.
#pragma once

#include <string>
#include <vector>

namespace graphed::config {

enum class Severity { kNote, kWarning, kError };

/// "note", "warning" or "error".
std::string to_string(Severity severity);

struct ConfigIssue {
  std::string rule;  ///< stable id, e.g. "TC-9", "M1", "MC-1"; see docs/configuration.md
  Severity severity = Severity::kError;
  std::string message;  ///< lower-case, no final period; ends with "; fix: ..." for errors
};

/// "error [TC-9]: cuda_graph_modules must not ..."
std::string format_issue(const ConfigIssue& issue);

/// Collects issues in the order they are found.
class IssueList {
 public:
  void note(const std::string& rule, const std::string& message);
  void warn(const std::string& rule, const std::string& message);
  void error(const std::string& rule, const std::string& message);

  const std::vector<ConfigIssue>& all() const { return issues_; }
  bool has_errors() const;
  /// The issues of one severity, formatted.
  std::vector<std::string> formatted(Severity severity) const;
  /// Whether an issue with this rule id was recorded.
  bool contains(const std::string& rule) const;
  /// Throws ConfigError carrying every error when there is one: a single one as "<message> [RULE]" (printed
  /// after "error: "), several under "<what> (N errors)" with each formatted below.
  void throw_errors(const std::string& what) const;

 private:
  std::vector<ConfigIssue> issues_;
};

}  // namespace graphed::config
