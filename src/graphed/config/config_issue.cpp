// config/config_issue.cpp — see config/config_issue.h.
#include "graphed/config/config_issue.h"

#include <algorithm>

#include "graphed/util/error.h"

namespace graphed::config {

std::string to_string(Severity severity) {
  switch (severity) {
    case Severity::kNote: return "note";
    case Severity::kWarning: return "warning";
    case Severity::kError: return "error";
  }
  return "error";
}

std::string format_issue(const ConfigIssue& issue) {
  return to_string(issue.severity) + " [" + issue.rule + "]: " + issue.message;
}

void IssueList::note(const std::string& rule, const std::string& message) {
  issues_.push_back({rule, Severity::kNote, message});
}

void IssueList::warn(const std::string& rule, const std::string& message) {
  issues_.push_back({rule, Severity::kWarning, message});
}

void IssueList::error(const std::string& rule, const std::string& message) {
  issues_.push_back({rule, Severity::kError, message});
}

bool IssueList::has_errors() const {
  return std::any_of(issues_.begin(), issues_.end(),
                     [](const ConfigIssue& issue) { return issue.severity == Severity::kError; });
}

std::vector<std::string> IssueList::formatted(Severity severity) const {
  std::vector<std::string> lines;
  for (const auto& issue : issues_) {
    if (issue.severity == severity) lines.push_back(format_issue(issue));
  }
  return lines;
}

bool IssueList::contains(const std::string& rule) const {
  return std::any_of(issues_.begin(), issues_.end(), [&](const ConfigIssue& issue) { return issue.rule == rule; });
}

void IssueList::throw_errors(const std::string& what) const {
  if (!has_errors()) return;
  const auto errors = formatted(Severity::kError);
  if (errors.size() > 1) throw ConfigError(what + " (" + std::to_string(errors.size()) + " errors)", errors);
  for (const auto& issue : issues_) {
    if (issue.severity == Severity::kError) throw ConfigError(issue.message + " [" + issue.rule + "]", errors);
  }
}

}  // namespace graphed::config
