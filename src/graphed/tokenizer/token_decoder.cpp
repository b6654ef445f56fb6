// tokenizer/token_decoder.cpp — see tokenizer/token_decoder.h. Each step follows the HF tokenizers decoder
// of the same name (decoders/*.rs, pre_tokenizers/byte_level.rs and metaspace.rs).
#include "graphed/tokenizer/token_decoder.h"

#include "graphed/tokenizer/byte_level.h"
#include "graphed/tokenizer/detail/json_fields.h"
#include "graphed/util/text.h"
#include "graphed/util/utf8.h"

namespace graphed::tokenizer {
namespace {

using nlohmann::json;

const char* const kAccepted =
    "ByteLevel, Replace (String pattern), ByteFallback, Fuse, Strip, Metaspace, Sequence of these, or null";

std::string replace_all(const std::string& text, const std::string& pattern, const std::string& content) {
  std::string out;
  std::size_t at = 0;
  for (std::size_t found = text.find(pattern); found != std::string::npos; found = text.find(pattern, at)) {
    out.append(text, at, found - at);
    out += content;
    at = found + pattern.size();
  }
  out.append(text, at, std::string::npos);
  return out;
}

std::vector<std::string> decode_byte_level(const std::vector<std::string>& tokens) {
  std::string bytes;
  for (const std::string& token : tokens) {
    // A token with a code point outside the byte map (an added token such as "<|endoftext|>" has
    // none, but "<|é|>" would) keeps its own UTF-8, as in HF tokenizers.
    const auto decoded = from_byte_level(token);
    bytes += decoded ? *decoded : token;
  }
  return {to_valid_utf8_lossy(bytes)};
}

/// The byte a "<0xXX>" token stands for, or -1.
int byte_of_fallback_token(const std::string& token) {
  if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return -1;
  int value = 0;
  for (std::size_t index = 3; index < 5; ++index) {
    const char digit = token[index];
    value *= 16;
    if (digit >= '0' && digit <= '9') {
      value += digit - '0';
    } else if (digit >= 'A' && digit <= 'F') {
      value += digit - 'A' + 10;
    } else if (digit >= 'a' && digit <= 'f') {
      value += digit - 'a' + 10;
    } else {
      return -1;
    }
  }
  return value;
}

std::vector<std::string> decode_byte_fallback(const std::vector<std::string>& tokens) {
  std::vector<std::string> out;
  std::string pending;  // bytes of consecutive <0xXX> tokens
  auto flush = [&out, &pending] {
    if (pending.empty()) return;
    if (find_invalid_utf8(pending) == pending.size()) {
      out.push_back(pending);
    } else {
      for (std::size_t index = 0; index < pending.size(); ++index) out.emplace_back(kReplacementCharacter);
    }
    pending.clear();
  };
  for (const std::string& token : tokens) {
    const int byte = byte_of_fallback_token(token);
    if (byte >= 0) {
      pending += static_cast<char>(byte);
      continue;
    }
    flush();
    out.push_back(token);
  }
  flush();
  return out;
}

std::string strip(const std::string& token, const std::string& character, std::size_t start, std::size_t stop) {
  std::u32string code_points = to_code_points(token);
  const std::u32string strip_points = to_code_points(character);
  if (strip_points.size() != 1) return token;
  const char32_t target = strip_points[0];
  std::size_t begin = 0;
  while (begin < start && begin < code_points.size() && code_points[begin] == target) ++begin;
  std::size_t end = code_points.size();
  for (std::size_t count = 0; count < stop && end > begin && code_points[end - 1] == target; ++count) --end;
  return to_utf8(code_points.substr(begin, end - begin));
}

std::vector<std::string> apply_step(const DecoderStep& step, std::vector<std::string> tokens) {
  switch (step.kind) {
    case DecoderStep::Kind::kByteLevel: return decode_byte_level(tokens);
    case DecoderStep::Kind::kByteFallback: return decode_byte_fallback(tokens);
    case DecoderStep::Kind::kFuse: return {join(tokens, "")};
    case DecoderStep::Kind::kReplace:
      for (std::string& token : tokens) token = replace_all(token, step.pattern, step.content);
      return tokens;
    case DecoderStep::Kind::kStrip:
      for (std::string& token : tokens) token = strip(token, step.content, step.strip_start, step.strip_stop);
      return tokens;
    case DecoderStep::Kind::kMetaspace:
      for (std::size_t index = 0; index < tokens.size(); ++index) {
        const bool drop = index == 0 && step.metaspace_prepend;
        tokens[index] = replace_all(tokens[index], step.pattern, drop ? "" : " ");
      }
      return tokens;
  }
  return tokens;
}

DecoderStep read_replace(const json& value, const detail::JsonPlace& place) {
  const json& pattern = detail::required_field(value, "pattern", place);
  if (!pattern.is_object() || !pattern.contains("String") || !pattern["String"].is_string() ||
      pattern["String"].get<std::string>().empty()) {
    detail::fail_at(
        place.field("pattern"),
        "is " + detail::json_excerpt(pattern) + ", but graphed supports only non-empty {\"String\": ...} patterns here",
        "use a tokenizer whose Replace decoder has a String pattern");
  }
  DecoderStep step;
  step.kind = DecoderStep::Kind::kReplace;
  step.pattern = pattern["String"].get<std::string>();
  step.content = detail::string_field(value, "content", place);
  return step;
}

DecoderStep read_strip(const json& value, const detail::JsonPlace& place) {
  DecoderStep step;
  step.kind = DecoderStep::Kind::kStrip;
  step.content = detail::string_field(value, "content", place);
  if (to_code_points(step.content).size() != 1) {
    detail::fail_at(place.field("content"), "is \"" + step.content + "\", not one character", "repair the file");
  }
  step.strip_start = static_cast<std::size_t>(detail::index_field(value, "start", place));
  step.strip_stop = static_cast<std::size_t>(detail::index_field(value, "stop", place));
  return step;
}

void read_step(const json& value, const detail::JsonPlace& place, std::vector<DecoderStep>& steps) {
  const std::string type = detail::type_of(value, place, kAccepted);
  DecoderStep step;
  if (type == "Sequence") {
    const json& list = detail::required_field(value, "decoders", place);
    if (!list.is_array())
      detail::fail_at(place.field("decoders"), "must be a list, got " + detail::json_excerpt(list), "repair the file");
    for (std::size_t index = 0; index < list.size(); ++index)
      read_step(list[index], place.field("decoders").item(index), steps);
    return;
  }
  if (type == "ByteLevel") {
    step.kind = DecoderStep::Kind::kByteLevel;
  } else if (type == "ByteFallback") {
    step.kind = DecoderStep::Kind::kByteFallback;
  } else if (type == "Fuse") {
    step.kind = DecoderStep::Kind::kFuse;
  } else if (type == "Replace") {
    step = read_replace(value, place);
  } else if (type == "Strip") {
    step = read_strip(value, place);
  } else if (type == "Metaspace") {
    step.kind = DecoderStep::Kind::kMetaspace;
    step.pattern = detail::string_field(value, "replacement", place);
    const std::string scheme = detail::optional_string_field(value, "prepend_scheme", place).value_or("always");
    step.metaspace_prepend = scheme != "never" && detail::bool_field(value, "add_prefix_space", place, true);
  } else {
    detail::fail_at(place.field("type"), "is \"" + type + "\", a decoder graphed does not support",
                    std::string("use a tokenizer whose decoder is ") + kAccepted + " (see docs/tokenizers.md)");
  }
  steps.push_back(step);
}

}  // namespace

TokenDecoder TokenDecoder::from_json(const json& value, const detail::JsonPlace& place) {
  std::vector<DecoderStep> steps;
  if (!value.is_null()) read_step(value, place, steps);
  return TokenDecoder(std::move(steps));
}

std::string TokenDecoder::decode(std::vector<std::string> tokens) const {
  if (steps_.empty()) return to_valid_utf8_lossy(join(tokens, " "));
  for (const DecoderStep& step : steps_) tokens = apply_step(step, std::move(tokens));
  return to_valid_utf8_lossy(join(tokens, ""));
}

std::string TokenDecoder::describe() const {
  if (steps_.empty()) return "none";
  static const char* const kNames[] = {"ByteLevel", "Replace", "ByteFallback", "Fuse", "Strip", "Metaspace"};
  std::string text;
  for (const DecoderStep& step : steps_) {
    if (!text.empty()) text += " + ";
    text += kNames[static_cast<int>(step.kind)];
  }
  return text;
}

}  // namespace graphed::tokenizer
