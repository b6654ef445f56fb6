// tokenizer/post_processor.cpp — see tokenizer/post_processor.h. The JSON shapes are HF tokenizers'
// (processors/template.rs): "single" is a list of {"Sequence": {"id": "A"}} and
// {"SpecialToken": {"id": NAME}} pieces, "special_tokens" maps NAME to {"ids": [...]}.
#include "graphed/tokenizer/post_processor.h"

#include "graphed/tokenizer/detail/json_fields.h"

namespace graphed::tokenizer {
namespace {

using nlohmann::json;

const char* const kAccepted = "TemplateProcessing, ByteLevel, Sequence of these, or null";

TemplatePiece read_piece(const json& value, const json& special_tokens, const detail::JsonPlace& place) {
  TemplatePiece piece;
  if (value.is_object() && value.contains("Sequence")) {
    const std::string id = detail::string_field(value["Sequence"], "id", place.field("Sequence"));
    if (id != "A") {
      detail::fail_at(place.field("Sequence").field("id"), "is \"" + id + "\" in the single-sequence template",
                      "use \"A\"");
    }
    piece.is_sequence = true;
    return piece;
  }
  if (!value.is_object() || !value.contains("SpecialToken")) {
    detail::fail_at(place, "is " + detail::json_excerpt(value) + ", neither a Sequence nor a SpecialToken piece",
                    "repair the file");
  }
  piece.special_token = detail::string_field(value["SpecialToken"], "id", place.field("SpecialToken"));
  const detail::JsonPlace token_place =
      detail::JsonPlace{place.file, "post_processor special_tokens"}.field(piece.special_token);
  if (!special_tokens.is_object() || !special_tokens.contains(piece.special_token)) {
    detail::fail_at(place.field("SpecialToken").field("id"),
                    "names \"" + piece.special_token + "\", which special_tokens does not define",
                    "add it to the post-processor's special_tokens");
  }
  const json& ids = detail::required_field(special_tokens[piece.special_token], "ids", token_place);
  if (!ids.is_array())
    detail::fail_at(token_place.field("ids"), "must be a list of ids, got " + detail::json_excerpt(ids),
                    "repair the file");
  for (std::size_t index = 0; index < ids.size(); ++index) {
    piece.ids.push_back(detail::token_id_value(ids[index], token_place.field("ids").item(index)));
  }
  return piece;
}

void read_processor(const json& value, const detail::JsonPlace& place, std::vector<TemplatePiece>& single) {
  if (value.is_null()) return;
  const std::string type = detail::type_of(value, place, kAccepted);
  if (type == "ByteLevel") return;  // offsets only
  if (type == "Sequence") {
    const json& list = detail::required_field(value, "processors", place);
    if (!list.is_array())
      detail::fail_at(place.field("processors"), "must be a list, got " + detail::json_excerpt(list),
                      "repair the file");
    for (std::size_t index = 0; index < list.size(); ++index)
      read_processor(list[index], place.field("processors").item(index), single);
    return;
  }
  if (type != "TemplateProcessing") {
    detail::fail_at(place.field("type"), "is \"" + type + "\", a post-processor graphed does not support",
                    std::string("use a tokenizer whose post-processor is ") + kAccepted + " (see docs/tokenizers.md)");
  }
  if (!single.empty()) detail::fail_at(place, "is a second TemplateProcessing", "keep one template");
  const json& pieces = detail::required_field(value, "single", place);
  if (!pieces.is_array())
    detail::fail_at(place.field("single"), "must be a list of pieces, got " + detail::json_excerpt(pieces),
                    "repair the file");
  const json empty = json::object();
  const json& special_tokens = value.contains("special_tokens") ? value["special_tokens"] : empty;
  for (std::size_t index = 0; index < pieces.size(); ++index) {
    single.push_back(read_piece(pieces[index], special_tokens, place.field("single").item(index)));
  }
}

}  // namespace

PostProcessor PostProcessor::from_json(const json& value, const detail::JsonPlace& place) {
  std::vector<TemplatePiece> single;
  read_processor(value, place, single);
  return PostProcessor(std::move(single));
}

std::vector<int64_t> PostProcessor::apply(std::vector<int64_t> ids) const {
  if (single_.empty()) return ids;
  std::vector<int64_t> result;
  result.reserve(ids.size() + single_.size());
  for (const TemplatePiece& piece : single_) {
    if (piece.is_sequence) {
      result.insert(result.end(), ids.begin(), ids.end());
    } else {
      result.insert(result.end(), piece.ids.begin(), piece.ids.end());
    }
  }
  return result;
}

std::vector<int64_t> PostProcessor::prefix_ids() const {
  std::vector<int64_t> ids;
  for (const TemplatePiece& piece : single_) {
    if (piece.is_sequence) break;
    ids.insert(ids.end(), piece.ids.begin(), piece.ids.end());
  }
  return ids;
}

std::string PostProcessor::describe() const {
  if (single_.empty()) return "none";
  std::string text = "template";
  for (const TemplatePiece& piece : single_)
    text += " " + (piece.is_sequence ? std::string("$A") : piece.special_token);
  return text;
}

}  // namespace graphed::tokenizer
