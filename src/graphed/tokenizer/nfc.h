// tokenizer/nfc.h — Unicode Normalization Form C (canonical decomposition, canonical ordering, canonical
// composition, Hangul by arithmetic) from the generated tables in tokenizer/unicode_tables.cpp; what the
// NFC normalizer of a tokenizer.json (Qwen2) applies. Checked against Python's unicodedata by
// tests/tokenizer/nfc_test.cpp. No NFKC/NFD/NFKD.
#pragma once

#include <string>
#include <string_view>

namespace graphed::tokenizer {

/// The NFC form of valid UTF-8 text (invalid bytes, which callers have refused already, would become
/// U+FFFD). ASCII text is returned unchanged without decoding.
std::string normalize_nfc(std::string_view text);

/// The NFC form of a code-point sequence.
std::u32string normalize_nfc(const std::u32string& code_points);

}  // namespace graphed::tokenizer
