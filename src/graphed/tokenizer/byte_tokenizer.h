// tokenizer/byte_tokenizer.h — graphed's byte tokenizer ("bytes"): id = byte value, 256 ids, no added or
// special tokens, no BOS/EOS; the tokenizer `graphed train` applies to text. Any bytes encode (text
// need not be UTF-8, as in training); decode replaces invalid UTF-8 with U+FFFD.
#pragma once

#include "graphed/tokenizer/tokenizer.h"

namespace graphed::tokenizer {

class ByteTokenizer final : public Tokenizer {
 public:
  std::vector<int64_t> encode(std::string_view text, bool add_special_tokens = true) const override;
  std::string decode(const std::vector<int64_t>& ids, bool skip_special_tokens = false) const override;
  int64_t vocab_size() const override { return 256; }
  /// Printable ASCII as itself, any other byte as "<0xXX>".
  std::string token_text(int64_t id) const override;
  const std::map<std::string, int64_t>& added_tokens() const override { return no_tokens_; }
  const std::map<std::string, int64_t>& special_tokens() const override { return no_tokens_; }
  bool is_special(int64_t) const override { return false; }
  std::optional<int64_t> bos_id() const override { return std::nullopt; }
  std::optional<int64_t> eos_id() const override { return std::nullopt; }
  std::string description() const override;

 private:
  std::map<std::string, int64_t> no_tokens_;
};

}  // namespace graphed::tokenizer
