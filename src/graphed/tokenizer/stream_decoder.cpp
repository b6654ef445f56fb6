// tokenizer/stream_decoder.cpp — see tokenizer/stream_decoder.h. The window keeps the ids already emitted
// since the last step as context, because some decoders depend on the neighbour (Llama-2's leading
// space is dropped only for the first token of a text).
#include "graphed/tokenizer/stream_decoder.h"

#include "graphed/util/utf8.h"

namespace graphed::tokenizer {
namespace {

bool ends_with_replacement(const std::string& text) {
  return text.size() >= kReplacementCharacter.size() &&
         text.compare(text.size() - kReplacementCharacter.size(), kReplacementCharacter.size(),
                      kReplacementCharacter) == 0;
}

/// Bytes shared by the start of both strings, cut back to a character boundary.
std::size_t common_prefix_length(const std::string& a, const std::string& b) {
  std::size_t length = 0;
  while (length < a.size() && length < b.size() && a[length] == b[length]) ++length;
  while (length > 0 && length < b.size() && (static_cast<unsigned char>(b[length]) & 0xC0) == 0x80) --length;
  return length;
}

}  // namespace

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(&tokenizer), skip_special_tokens_(skip_special_tokens) {}

std::string StreamDecoder::push(int64_t id) {
  tokenizer_->token_text(id);  // throws for a bad id before anything changes
  if (prefix_.empty() && !ids_.empty()) {
    const std::string text = tokenizer_->decode(ids_, skip_special_tokens_);
    if (!ends_with_replacement(text)) {
      prefix_ = text;
      prefix_index_ = ids_.size();
    }
  }
  ids_.push_back(id);
  const std::string text = tokenizer_->decode(ids_, skip_special_tokens_);
  if (text.size() <= prefix_.size() || ends_with_replacement(text)) return "";
  // Decoders only append to a text as ids arrive; should one not, emit from where the texts differ.
  const std::string added = text.substr(common_prefix_length(prefix_, text));
  const std::size_t emitted = ids_.size() - prefix_index_;
  ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(prefix_index_));
  prefix_ = tokenizer_->decode(ids_, skip_special_tokens_);
  prefix_index_ = emitted;
  return added;
}

std::string StreamDecoder::finish() {
  std::string rest;
  if (!ids_.empty()) {
    // prefix_ is the text of ids_[0, prefix_index_), all emitted; what the text has beyond it was held back.
    const std::string text = tokenizer_->decode(ids_, skip_special_tokens_);
    rest = text.substr(common_prefix_length(prefix_, text));
  }
  ids_.clear();
  prefix_.clear();
  prefix_index_ = 0;
  return rest;
}

}  // namespace graphed::tokenizer
