// tokenizer/byte_level.h — GPT-2's byte-to-unicode map (bytes_to_unicode in openai/gpt-2's encoder.py):
// every byte becomes one printable code point, so a byte-level BPE vocabulary is plain text (a space
// is "Ġ", U+0120). Used by the ByteLevel pre-tokenizer (encode) and the ByteLevel decoder.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace graphed::tokenizer {

/// The code point GPT-2 maps a byte to: printable Latin-1 bytes map to themselves, the other 68 to
/// U+0100.. in byte order.
char32_t byte_to_unicode(unsigned char byte);

/// The byte a code point stands for, or nullopt when it is not one of the 256 mapped code points.
std::optional<unsigned char> unicode_to_byte(char32_t code_point);

/// The byte-level form of UTF-8 text: each byte replaced by the UTF-8 of its mapped code point.
std::string to_byte_level(std::string_view bytes);

/// The bytes a byte-level token stands for, or nullopt when one of its code points is not mapped
/// (HF's ByteLevel decoder then keeps the token's own UTF-8, e.g. for added tokens).
std::optional<std::string> from_byte_level(std::string_view token);

}  // namespace graphed::tokenizer
