// tokenizer/pipeline_tokenizer.h — PipelineTokenizer: a Tokenizer made of HF tokenizers' stages, in
// their order: added tokens split out of the raw text, normalizer, added tokens again in the
// normalized text, pre-tokenizer, BPE model, and (with add_special_tokens) the post-processor's
// template; decode maps ids to vocabulary entries and runs the decoder. What tokenizer.json and the
// GPT-2 vocab files are read into (tokenizer/tokenizer_files.cpp). Truncation and padding settings of a
// tokenizer.json are not applied.
#pragma once

#include <memory>
#include <vector>

#include "graphed/tokenizer/added_tokens.h"
#include "graphed/tokenizer/bpe_model.h"
#include "graphed/tokenizer/normalizer.h"
#include "graphed/tokenizer/post_processor.h"
#include "graphed/tokenizer/pre_tokenizer.h"
#include "graphed/tokenizer/token_decoder.h"
#include "graphed/tokenizer/tokenizer.h"

namespace graphed::tokenizer {

/// Everything a PipelineTokenizer is made of.
struct PipelineParts {
  std::string source;  ///< the file or folder it came from, for description()
  std::unique_ptr<BpeModel> model;
  std::vector<AddedToken> added_tokens;
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  PostProcessor post_processor;
  TokenDecoder decoder;
  std::optional<std::string> bos_token;  ///< tokenizer_config.json's bos_token, if any
  std::optional<std::string> eos_token;  ///< tokenizer_config.json's eos_token, if any
};

class PipelineTokenizer final : public Tokenizer {
 public:
  /// An added token's id may also be a vocabulary entry's (GPT-2's <|endoftext|>); decode then
  /// gives the added token's content.
  explicit PipelineTokenizer(PipelineParts parts);

  std::vector<int64_t> encode(std::string_view text, bool add_special_tokens = true) const override;
  std::string decode(const std::vector<int64_t>& ids, bool skip_special_tokens = false) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(id_to_token_.size()); }
  std::string token_text(int64_t id) const override;
  const std::map<std::string, int64_t>& added_tokens() const override { return added_by_content_; }
  const std::map<std::string, int64_t>& special_tokens() const override { return special_by_content_; }
  bool is_special(int64_t id) const override;
  std::optional<int64_t> bos_id() const override { return bos_id_; }
  std::optional<int64_t> eos_id() const override { return eos_id_; }
  std::string description() const override;

 private:
  /// Appends the ids of one segment of raw text that holds no non-normalized added token.
  void encode_segment(std::string_view segment, bool at_text_start, std::vector<int64_t>& ids) const;
  /// The id of the string if it is an added token or a vocabulary entry.
  std::optional<int64_t> find_id(const std::string& token) const;
  /// Throws DataError when the id is outside the vocabulary or has no token.
  void check_id(int64_t id) const;
  void resolve_bos_eos(const std::optional<std::string>& bos_token, const std::optional<std::string>& eos_token);

  PipelineParts parts_;
  AddedTokenMatcher raw_matcher_;         // added tokens with normalized=false
  AddedTokenMatcher normalized_matcher_;  // the others, by their normalized content
  std::vector<std::string> id_to_token_;  // what decode gives the decoder for each id
  std::vector<bool> has_token_;           // false for ids no entry uses
  std::vector<bool> special_;
  std::map<std::string, int64_t> added_by_content_;
  std::map<std::string, int64_t> special_by_content_;
  std::optional<int64_t> bos_id_;
  std::optional<int64_t> eos_id_;
};

}  // namespace graphed::tokenizer
