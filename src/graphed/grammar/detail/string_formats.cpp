// grammar/detail/string_formats.cpp — the patterns of the supported formats (RFC 3339 dates and times, RFC 4122
// UUIDs, dotted IPv4, and a dot-atom email address).
#include "graphed/grammar/detail/string_formats.h"

#include <map>

namespace graphed::grammar::detail {

namespace {

// A month and a day that exist in every year: days 1-28 of any month, 29-30 of all but February, 31 of the long
// months. February 29th is left out (valid in leap years only).
const char* kDate = "[0-9]{4}-((0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])|(0[13-9]|1[0-2])-(29|30)|(0[13578]|1[02])-31)";
const char* kTime = "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])";
const char* kHex = "[0-9a-fA-F]";
const char* kOctet = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
const char* kLabel = "[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?";

const std::map<std::string, std::string>& patterns() {
  static const std::map<std::string, std::string> table = {
      {"date-time", std::string("^") + kDate + "T" + kTime + "$"},
      {"date", std::string("^") + kDate + "$"},
      {"time", std::string("^") + kTime + "$"},
      {"uuid", std::string("^") + kHex + "{8}-" + kHex + "{4}-" + kHex + "{4}-" + kHex + "{4}-" + kHex + "{12}$"},
      {"ipv4", std::string("^") + kOctet + "(\\." + kOctet + "){3}$"},
      {"email",
       std::string("^[A-Za-z0-9_+-]{1,64}(\\.[A-Za-z0-9_+-]{1,64}){0,8}@") + kLabel + "(\\." + kLabel + "){1,8}$"},
  };
  return table;
}

}  // namespace

std::string format_pattern(const std::string& format) {
  const auto found = patterns().find(format);
  return found == patterns().end() ? std::string() : found->second;
}

std::string supported_formats() { return "date-time, date, time, uuid, ipv4, email"; }

}  // namespace graphed::grammar::detail
