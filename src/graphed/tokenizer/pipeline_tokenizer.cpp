// tokenizer/pipeline_tokenizer.cpp — see tokenizer/pipeline_tokenizer.h. The order of the stages and the
// treatment of added tokens follow HF tokenizers' TokenizerImpl::encode_single_sequence and
// AddedVocabulary::extract_and_normalize; decode follows TokenizerImpl::decode (an added token
// decodes through the decoder like any other, by its normalized content).
#include "graphed/tokenizer/pipeline_tokenizer.h"

#include "graphed/util/error.h"
#include "graphed/util/text.h"
#include "graphed/util/utf8.h"

namespace graphed::tokenizer {
namespace {

std::vector<AddedToken> tokens_where_normalized(const std::vector<AddedToken>& tokens, bool normalized,
                                                const Normalizer& normalizer) {
  std::vector<AddedToken> selected;
  for (AddedToken token : tokens) {
    if (token.normalized != normalized) continue;
    if (normalized) token.content = normalizer.normalize(token.content);  // matched in normalized text
    selected.push_back(std::move(token));
  }
  return selected;
}

int64_t largest_id(const PipelineParts& parts) {
  int64_t largest = -1;
  for (const auto& [token, id] : parts.model->vocabulary()) largest = std::max(largest, id);
  for (const AddedToken& token : parts.added_tokens) largest = std::max(largest, token.id);
  return largest;
}

}  // namespace

PipelineTokenizer::PipelineTokenizer(PipelineParts parts)
    : parts_(std::move(parts)),
      raw_matcher_(tokens_where_normalized(parts_.added_tokens, false, parts_.normalizer)),
      normalized_matcher_(tokens_where_normalized(parts_.added_tokens, true, parts_.normalizer)) {
  const auto size = static_cast<std::size_t>(largest_id(parts_) + 1);
  id_to_token_.assign(size, "");
  has_token_.assign(size, false);
  special_.assign(size, false);
  for (const auto& [token, id] : parts_.model->vocabulary()) {
    id_to_token_[static_cast<std::size_t>(id)] = token;
    has_token_[static_cast<std::size_t>(id)] = true;
  }
  for (const AddedToken& token : parts_.added_tokens) {
    const auto index = static_cast<std::size_t>(token.id);
    id_to_token_[index] = token.normalized ? parts_.normalizer.normalize(token.content) : token.content;
    has_token_[index] = true;
    special_[index] = token.special;
    added_by_content_[token.content] = token.id;
    if (token.special) special_by_content_[token.content] = token.id;
  }
  resolve_bos_eos(parts_.bos_token, parts_.eos_token);
}

std::optional<int64_t> PipelineTokenizer::find_id(const std::string& token) const {
  const auto added = added_by_content_.find(token);
  if (added != added_by_content_.end()) return added->second;
  return parts_.model->find_token(token);
}

void PipelineTokenizer::resolve_bos_eos(const std::optional<std::string>& bos_token,
                                        const std::optional<std::string>& eos_token) {
  if (bos_token) bos_id_ = find_id(*bos_token);
  if (!bos_id_) {
    const std::vector<int64_t> prefix = parts_.post_processor.prefix_ids();
    if (!prefix.empty()) bos_id_ = prefix.front();
  }
  if (eos_token) eos_id_ = find_id(*eos_token);
  for (const char* candidate : {"<|endoftext|>", "</s>", "<|end_of_text|>", "<eos>"}) {
    if (eos_id_) break;
    const auto found = added_by_content_.find(candidate);
    if (found != added_by_content_.end()) eos_id_ = found->second;
  }
}

void PipelineTokenizer::encode_segment(std::string_view segment, bool at_text_start, std::vector<int64_t>& ids) const {
  const std::string normalized = parts_.normalizer.normalize(segment);
  bool first = at_text_start;
  for (const TextSegment& piece : normalized_matcher_.split(normalized)) {
    if (piece.token_id) {
      ids.push_back(*piece.token_id);
    } else {
      for (const PreToken& word : parts_.pre_tokenizer.pre_tokenize(piece.text, first))
        parts_.model->encode_word(word.text, ids);
    }
    first = false;
  }
}

std::vector<int64_t> PipelineTokenizer::encode(std::string_view text, bool add_special_tokens) const {
  check_utf8(text, "the text");
  std::vector<int64_t> ids;
  for (const TextSegment& segment : raw_matcher_.split(text)) {
    if (segment.token_id) {
      ids.push_back(*segment.token_id);
    } else if (!segment.text.empty()) {
      encode_segment(segment.text, segment.text.data() == text.data(), ids);
    }
  }
  if (add_special_tokens) ids = parts_.post_processor.apply(std::move(ids));
  return ids;
}

void PipelineTokenizer::check_id(int64_t id) const {
  if (id < 0 || id >= vocab_size()) throw DataError(bad_token_id_message(id, vocab_size()));
  if (!has_token_[static_cast<std::size_t>(id)]) {
    throw DataError("token id " + std::to_string(id) + " has no entry in the vocabulary of " + parts_.source +
                    " (ids are 0.." + std::to_string(vocab_size() - 1) +
                    " with gaps); fix: pass ids this tokenizer produced");
  }
}

std::string PipelineTokenizer::decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const int64_t id : ids) {
    check_id(id);
    if (skip_special_tokens && special_[static_cast<std::size_t>(id)]) continue;
    tokens.push_back(id_to_token_[static_cast<std::size_t>(id)]);
  }
  return parts_.decoder.decode(std::move(tokens));
}

std::string PipelineTokenizer::token_text(int64_t id) const {
  check_id(id);
  return id_to_token_[static_cast<std::size_t>(id)];
}

bool PipelineTokenizer::is_special(int64_t id) const {
  return id >= 0 && id < vocab_size() && special_[static_cast<std::size_t>(id)];
}

std::string PipelineTokenizer::description() const {
  bool byte_level = false;
  for (const PreTokenizerStep& step : parts_.pre_tokenizer.steps())
    byte_level = byte_level || step.kind == PreTokenizerStep::Kind::kByteLevel;
  std::string text = byte_level ? "byte-level BPE" : "BPE";
  if (parts_.model->options().byte_fallback) text += " with byte fallback";
  text += " from " + parts_.source + " (" + std::to_string(vocab_size()) + " ids, " +
          counted(parts_.added_tokens.size(), "added token") + ", " + counted(parts_.model->merge_count(), "merge") +
          "; normalizer " + parts_.normalizer.describe() + "; pre-tokenizer " + parts_.pre_tokenizer.describe() +
          "; post-processor " + parts_.post_processor.describe() + "; decoder " + parts_.decoder.describe() + ")";
  return text;
}

}  // namespace graphed::tokenizer
