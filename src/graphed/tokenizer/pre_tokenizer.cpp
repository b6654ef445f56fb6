// tokenizer/pre_tokenizer.cpp — see tokenizer/pre_tokenizer.h. Each step maps every word to zero or more
// words, as HF tokenizers' PreTokenizedString::split does; ByteLevel's byte mapping applies to the
// words its own split produced.
#include "graphed/tokenizer/pre_tokenizer.h"

#include "graphed/tokenizer/byte_level.h"
#include "graphed/tokenizer/detail/json_fields.h"

namespace graphed::tokenizer {
namespace {

using nlohmann::json;

const char* const kAccepted = "Split (a known pattern), ByteLevel, Metaspace, Sequence of these, or null";

std::string replace_spaces(std::string_view text, const std::string& replacement) {
  std::string out;
  for (const char byte : text) {
    if (byte == ' ') {
      out += replacement;
    } else {
      out += byte;
    }
  }
  return out;
}

/// Pieces that each start at an occurrence of the delimiter (HF's MergedWithNext behavior).
std::vector<std::string> split_before(const std::string& text, const std::string& delimiter) {
  std::vector<std::string> pieces;
  std::size_t start = 0;
  std::size_t found = text.find(delimiter, 1);  // a delimiter at 0 starts the first piece
  while (found != std::string::npos) {
    pieces.push_back(text.substr(start, found - start));
    start = found;
    found = text.find(delimiter, found + delimiter.size());
  }
  pieces.push_back(text.substr(start));
  return pieces;
}

void apply_step(const PreTokenizerStep& step, const PreToken& word, std::vector<PreToken>& out) {
  auto emit = [&out, &word](std::string text) {
    if (text.empty()) return;
    out.push_back({std::move(text), word.at_text_start && out.empty()});
  };
  switch (step.kind) {
    case PreTokenizerStep::Kind::kSplit:
      for (const std::string_view piece : split_with_pattern(word.text, step.pattern)) emit(std::string(piece));
      return;
    case PreTokenizerStep::Kind::kByteLevel: {
      std::string text = word.text;
      if (step.add_prefix_space && (text.empty() || text[0] != ' ')) text = " " + text;
      if (!step.use_regex) {
        emit(to_byte_level(text));
        return;
      }
      for (const std::string_view piece : split_with_pattern(text, SplitPattern::kGpt2)) emit(to_byte_level(piece));
      return;
    }
    case PreTokenizerStep::Kind::kMetaspace: {
      std::string text = replace_spaces(word.text, step.replacement);
      const bool starts_with_replacement = text.compare(0, step.replacement.size(), step.replacement) == 0;
      const bool prepend = step.prepend_scheme == PreTokenizerStep::PrependScheme::kAlways ||
                           (step.prepend_scheme == PreTokenizerStep::PrependScheme::kFirst && word.at_text_start);
      if (prepend && !starts_with_replacement) text = step.replacement + text;
      if (!step.split) {
        emit(std::move(text));
        return;
      }
      for (std::string& piece : split_before(text, step.replacement)) emit(std::move(piece));
      return;
    }
  }
}

PreTokenizerStep read_split(const json& value, const detail::JsonPlace& place) {
  const json& pattern = detail::required_field(value, "pattern", place);
  const std::string behavior = detail::string_field(value, "behavior", place);
  if (behavior != "Isolated") {
    detail::fail_at(place.field("behavior"), "is \"" + behavior + "\", but graphed supports only \"Isolated\" splits",
                    "use a tokenizer whose Split pre-tokenizer isolates its matches (GPT-2, Llama-3, Qwen2 do)");
  }
  if (detail::bool_field(value, "invert", place, false)) {
    detail::fail_at(place.field("invert"), "is true, but graphed supports only invert=false",
                    "use a supported tokenizer");
  }
  if (!pattern.is_object() || !pattern.contains("Regex") || !pattern["Regex"].is_string()) {
    detail::fail_at(place.field("pattern"),
                    "is " + detail::json_excerpt(pattern) + ", not a {\"Regex\": ...} pattern graphed knows",
                    "supported patterns: " + supported_split_patterns());
  }
  const std::string regex = pattern["Regex"].get<std::string>();
  const auto known = find_split_pattern(regex);
  if (!known) {
    detail::fail_at(
        place.field("pattern").field("Regex"), "is the pattern \"" + regex + "\", which graphed does not know",
        "graphed matches only these patterns exactly, written as hand-made matchers: " + supported_split_patterns());
  }
  PreTokenizerStep step;
  step.kind = PreTokenizerStep::Kind::kSplit;
  step.pattern = *known;
  return step;
}

PreTokenizerStep read_metaspace(const json& value, const detail::JsonPlace& place) {
  PreTokenizerStep step;
  step.kind = PreTokenizerStep::Kind::kMetaspace;
  step.replacement = detail::string_field(value, "replacement", place);
  const std::string scheme = detail::optional_string_field(value, "prepend_scheme", place).value_or("always");
  if (scheme == "always") {
    step.prepend_scheme = PreTokenizerStep::PrependScheme::kAlways;
  } else if (scheme == "first") {
    step.prepend_scheme = PreTokenizerStep::PrependScheme::kFirst;
  } else if (scheme == "never") {
    step.prepend_scheme = PreTokenizerStep::PrependScheme::kNever;
  } else {
    detail::fail_at(place.field("prepend_scheme"), "is \"" + scheme + "\"", "use always, first or never");
  }
  if (!detail::bool_field(value, "add_prefix_space", place, true))
    step.prepend_scheme = PreTokenizerStep::PrependScheme::kNever;
  step.split = detail::bool_field(value, "split", place, true);
  return step;
}

void read_step(const json& value, const detail::JsonPlace& place, std::vector<PreTokenizerStep>& steps) {
  const std::string type = detail::type_of(value, place, kAccepted);
  if (type == "Sequence") {
    const json& list = detail::required_field(value, "pretokenizers", place);
    if (!list.is_array())
      detail::fail_at(place.field("pretokenizers"), "must be a list, got " + detail::json_excerpt(list),
                      "repair the file");
    for (std::size_t index = 0; index < list.size(); ++index)
      read_step(list[index], place.field("pretokenizers").item(index), steps);
  } else if (type == "Split") {
    steps.push_back(read_split(value, place));
  } else if (type == "ByteLevel") {
    PreTokenizerStep step;
    step.kind = PreTokenizerStep::Kind::kByteLevel;
    step.add_prefix_space = detail::bool_field(value, "add_prefix_space", place, true);
    step.use_regex = detail::bool_field(value, "use_regex", place, true);
    steps.push_back(step);
  } else if (type == "Metaspace") {
    steps.push_back(read_metaspace(value, place));
  } else {
    detail::fail_at(place.field("type"), "is \"" + type + "\", a pre-tokenizer graphed does not support",
                    std::string("use a tokenizer whose pre-tokenizer is ") + kAccepted + " (see docs/tokenizers.md)");
  }
}

}  // namespace

PreTokenizer PreTokenizer::from_json(const json& value, const detail::JsonPlace& place) {
  std::vector<PreTokenizerStep> steps;
  if (!value.is_null()) read_step(value, place, steps);
  return PreTokenizer(std::move(steps));
}

std::vector<PreToken> PreTokenizer::pre_tokenize(std::string_view text, bool at_text_start) const {
  std::vector<PreToken> words;
  if (!text.empty()) words.push_back({std::string(text), at_text_start});
  for (const PreTokenizerStep& step : steps_) {
    std::vector<PreToken> next;
    for (const PreToken& word : words) {
      std::vector<PreToken> pieces;
      apply_step(step, word, pieces);
      for (PreToken& piece : pieces) next.push_back(std::move(piece));
    }
    words = std::move(next);
  }
  return words;
}

std::string PreTokenizer::describe() const {
  if (steps_.empty()) return "none";
  std::string text;
  for (const PreTokenizerStep& step : steps_) {
    if (!text.empty()) text += " + ";
    switch (step.kind) {
      case PreTokenizerStep::Kind::kSplit: text += "Split(" + to_string(step.pattern) + ")"; break;
      case PreTokenizerStep::Kind::kByteLevel: text += step.use_regex ? "ByteLevel(gpt2)" : "ByteLevel"; break;
      case PreTokenizerStep::Kind::kMetaspace: text += "Metaspace"; break;
    }
  }
  return text;
}

}  // namespace graphed::tokenizer
