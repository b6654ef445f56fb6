// tokenizer/unicode_tables.h — the Unicode data the tokenizers need, as sorted arrays that
// scripts/generate-unicode-tables writes into unicode_tables.cpp (from Python's unicodedata). Read
// them through tokenizer/unicode_properties.h; nothing else includes this header.
#pragma once

#include <cstddef>
#include <cstdint>

namespace graphed::tokenizer::tables {

/// Inclusive range of code points [first, last].
struct CodePointRange {
  char32_t first;
  char32_t last;
};

/// Inclusive range of code points that share one non-zero canonical combining class.
struct CombiningClassRange {
  char32_t first;
  char32_t last;
  std::uint8_t combining_class;
};

/// A code point's full canonical decomposition: `length` code points from kDecompositionParts[offset].
struct Decomposition {
  char32_t code_point;
  std::uint16_t offset;
  std::uint8_t length;
};

/// A primary composite: first + second compose to composite under NFC.
struct Composition {
  char32_t first;
  char32_t second;
  char32_t composite;
};

extern const char kUnicodeVersion[];
extern const CodePointRange kLetterRanges[];
extern const std::size_t kLetterRangesCount;
extern const CodePointRange kNumberRanges[];
extern const std::size_t kNumberRangesCount;
extern const CodePointRange kWhitespaceRanges[];
extern const std::size_t kWhitespaceRangesCount;
extern const CodePointRange kWordRanges[];
extern const std::size_t kWordRangesCount;
extern const CombiningClassRange kCombiningClassRanges[];
extern const std::size_t kCombiningClassRangesCount;
extern const Decomposition kDecompositions[];
extern const std::size_t kDecompositionsCount;
extern const char32_t kDecompositionParts[];
extern const Composition kCompositions[];
extern const std::size_t kCompositionsCount;

}  // namespace graphed::tokenizer::tables
