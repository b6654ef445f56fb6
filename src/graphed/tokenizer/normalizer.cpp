// tokenizer/normalizer.cpp — see tokenizer/normalizer.h.
#include "graphed/tokenizer/normalizer.h"

#include "graphed/tokenizer/detail/json_fields.h"
#include "graphed/tokenizer/nfc.h"

namespace graphed::tokenizer {
namespace {

using nlohmann::json;

const char* const kAccepted = "NFC, Prepend, Replace (with a String pattern), Sequence of these, or null";

std::string replace_all(std::string_view text, const std::string& pattern, const std::string& content) {
  std::string out;
  std::size_t at = 0;
  while (true) {
    const std::size_t found = text.find(pattern, at);
    if (found == std::string_view::npos) break;
    out.append(text.substr(at, found - at));
    out += content;
    at = found + pattern.size();
  }
  out.append(text.substr(at));
  return out;
}

void read_step(const json& value, const detail::JsonPlace& place, std::vector<NormalizerStep>& steps) {
  const std::string type = detail::type_of(value, place, kAccepted);
  if (type == "Sequence") {
    const json& list = detail::required_field(value, "normalizers", place);
    if (!list.is_array())
      detail::fail_at(place.field("normalizers"), "must be a list, got " + detail::json_excerpt(list),
                      "repair the file");
    for (std::size_t index = 0; index < list.size(); ++index)
      read_step(list[index], place.field("normalizers").item(index), steps);
  } else if (type == "NFC") {
    steps.push_back({NormalizerStep::Kind::kNfc, "", ""});
  } else if (type == "Prepend") {
    steps.push_back({NormalizerStep::Kind::kPrepend, "", detail::string_field(value, "prepend", place)});
  } else if (type == "Replace") {
    const json& pattern = detail::required_field(value, "pattern", place);
    if (!pattern.is_object() || !pattern.contains("String") || !pattern["String"].is_string()) {
      detail::fail_at(
          place.field("pattern"),
          "is " + detail::json_excerpt(pattern) + ", but graphed supports only {\"String\": ...} patterns here",
          "use a tokenizer whose Replace normalizer has a String pattern (Regex replacements are not supported)");
    }
    const std::string text = pattern["String"].get<std::string>();
    if (text.empty()) detail::fail_at(place.field("pattern"), "is an empty string", "repair the file");
    steps.push_back({NormalizerStep::Kind::kReplace, text, detail::string_field(value, "content", place)});
  } else {
    detail::fail_at(place.field("type"), "is \"" + type + "\", a normalizer graphed does not support",
                    std::string("use a tokenizer whose normalizer is ") + kAccepted + " (see docs/tokenizers.md)");
  }
}

}  // namespace

Normalizer Normalizer::from_json(const json& value, const detail::JsonPlace& place) {
  std::vector<NormalizerStep> steps;
  if (!value.is_null()) read_step(value, place, steps);
  return Normalizer(std::move(steps));
}

std::string Normalizer::normalize(std::string_view text) const {
  std::string result(text);
  for (const NormalizerStep& step : steps_) {
    switch (step.kind) {
      case NormalizerStep::Kind::kNfc: result = normalize_nfc(result); break;
      case NormalizerStep::Kind::kPrepend:
        if (!result.empty()) result = step.content + result;
        break;
      case NormalizerStep::Kind::kReplace: result = replace_all(result, step.pattern, step.content); break;
    }
  }
  return result;
}

std::string Normalizer::describe() const {
  if (steps_.empty()) return "none";
  std::string text;
  for (const NormalizerStep& step : steps_) {
    if (!text.empty()) text += " + ";
    switch (step.kind) {
      case NormalizerStep::Kind::kNfc: text += "NFC"; break;
      case NormalizerStep::Kind::kPrepend: text += "Prepend(" + step.content + ")"; break;
      case NormalizerStep::Kind::kReplace: text += "Replace(" + step.pattern + "->" + step.content + ")"; break;
    }
  }
  return text;
}

}  // namespace graphed::tokenizer
