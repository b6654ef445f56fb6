// tokenizer/byte_tokenizer.cpp — see tokenizer/byte_tokenizer.h.
#include "graphed/tokenizer/byte_tokenizer.h"

#include <cstdio>

#include "graphed/util/error.h"
#include "graphed/util/utf8.h"

namespace graphed::tokenizer {

std::vector<int64_t> ByteTokenizer::encode(std::string_view text, bool /*add_special_tokens*/) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size());
  for (const char byte : text) ids.push_back(static_cast<unsigned char>(byte));
  return ids;
}

std::string ByteTokenizer::decode(const std::vector<int64_t>& ids, bool /*skip_special_tokens*/) const {
  std::string bytes;
  bytes.reserve(ids.size());
  for (const int64_t id : ids) {
    if (id < 0 || id >= vocab_size()) throw DataError(bad_token_id_message(id, vocab_size()));
    bytes += static_cast<char>(static_cast<unsigned char>(id));
  }
  return to_valid_utf8_lossy(bytes);
}

std::string ByteTokenizer::token_text(int64_t id) const {
  if (id < 0 || id >= vocab_size()) throw DataError(bad_token_id_message(id, vocab_size()));
  if (id >= 0x20 && id < 0x7F) return std::string(1, static_cast<char>(id));
  char buffer[8];
  std::snprintf(buffer, sizeof buffer, "<0x%02X>", static_cast<unsigned>(id));
  return buffer;
}

std::string ByteTokenizer::description() const { return "byte tokenizer (id = byte value, 256 ids)"; }

}  // namespace graphed::tokenizer
