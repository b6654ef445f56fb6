// tokenizer/post_processor.h — PostProcessor: what tokenizer.json's "post_processor" adds around the ids
// when add_special_tokens is true. Supported: TemplateProcessing's single-sequence template (e.g.
// Llama-3's "<|begin_of_text|> $A"), ByteLevel (which changes no ids, only offsets), a Sequence of
// these, or null. The pair template is ignored (graphed encodes one sequence at a time); Bert and
// Roberta processors are refused.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace graphed::tokenizer {

namespace detail {
struct JsonPlace;
}

/// One piece of the single template: the encoded sequence, or the ids of a special token.
struct TemplatePiece {
  bool is_sequence = false;
  std::string special_token;  ///< the name used in the template ("<|begin_of_text|>")
  std::vector<int64_t> ids;   ///< its ids (usually one)
};

class PostProcessor {
 public:
  PostProcessor() = default;
  explicit PostProcessor(std::vector<TemplatePiece> single) : single_(std::move(single)) {}

  /// Reads tokenizer.json's "post_processor" value. Throws DataError naming the field.
  static PostProcessor from_json(const nlohmann::json& value, const detail::JsonPlace& place);

  /// The ids with the template applied (unchanged when there is no template).
  std::vector<int64_t> apply(std::vector<int64_t> ids) const;

  /// The ids the template puts before the sequence (Llama-3: the BOS id).
  std::vector<int64_t> prefix_ids() const;
  /// "template <|begin_of_text|> $A", or "none".
  std::string describe() const;

 private:
  std::vector<TemplatePiece> single_;  // empty: no template
};

}  // namespace graphed::tokenizer
