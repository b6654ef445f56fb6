// tests/tokenizer/nfc_test.cpp — NFC from the generated tables agrees with Python's unicodedata on every
// case of tests/tokenizer/data/nfc_cases.txt (each decomposable character, Hangul, random mark orders),
// plus hand-checked composition, Hangul, exclusion and singleton cases.
#include "graphed/tokenizer/nfc.h"

#include <sstream>

#include <gtest/gtest.h>

#include "graphed/tokenizer/unicode_properties.h"
#include "graphed/util/file_system.h"
#include "graphed/util/utf8.h"

namespace graphed::tokenizer {
namespace {

std::u32string parse_hex_code_points(const std::string& text) {
  std::u32string result;
  std::istringstream in(text);
  std::string word;
  while (in >> word) result.push_back(static_cast<char32_t>(std::stoul(word, nullptr, 16)));
  return result;
}

TEST(NfcTest, AgreesWithPythonUnicodedataOnEveryGeneratedCase) {
  std::string text;
  ASSERT_EQ(read_file(std::string(GRAPHED_SOURCE_DIR) + "/tests/tokenizer/data/nfc_cases.txt", text), 0);
  std::istringstream lines(text);
  std::string line;
  int cases = 0;
  int failures = 0;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    const std::size_t separator = line.find(';');
    const std::u32string input = parse_hex_code_points(line.substr(0, separator));
    const std::u32string expected = parse_hex_code_points(line.substr(separator + 1));
    ++cases;
    if (normalize_nfc(input) != expected && ++failures <= 5)
      ADD_FAILURE() << "NFC of " << line.substr(0, separator) << " should be " << line.substr(separator + 1);
  }
  EXPECT_GT(cases, 2500);
  EXPECT_EQ(failures, 0);
}

TEST(NfcTest, ComposesReordersAndKeepsExclusions) {
  EXPECT_EQ(normalize_nfc("e\xCC\x81"), "\xC3\xA9");                                 // e + acute -> é
  EXPECT_EQ(normalize_nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "\xEA\xB0\x81");  // Hangul L V T -> 각
  EXPECT_EQ(normalize_nfc("a\xCC\x82\xCC\xA3"), "\xE1\xBA\xAD");         // a + circumflex + dot below -> ậ
  EXPECT_EQ(normalize_nfc("a\xCC\xA3\xCC\x82"), "\xE1\xBA\xAD");         // either order
  EXPECT_EQ(normalize_nfc("\xE0\xA5\x98"), "\xE0\xA4\x95\xE0\xA4\xBC");  // U+0958 is excluded: stays decomposed
  EXPECT_EQ(normalize_nfc("\xE2\x84\xAB"), "\xC3\x85");                  // Angstrom sign -> Å (singleton)
  EXPECT_EQ(normalize_nfc("plain ASCII stays"), "plain ASCII stays");
  EXPECT_EQ(normalize_nfc("\xCC\x81"
                          "e"),
            "\xCC\x81"
            "e");  // a leading mark composes with nothing
}

TEST(UnicodePropertiesTest, ClassesAndCombiningClasses) {
  EXPECT_TRUE(is_letter(U'\u00E9'));
  EXPECT_TRUE(is_letter(U'\u65E5'));
  EXPECT_FALSE(is_letter(U'5'));
  EXPECT_TRUE(is_number(U'\u0663'));
  EXPECT_TRUE(is_number(U'\u00BD'));
  EXPECT_TRUE(is_whitespace(U'\u3000'));
  EXPECT_TRUE(is_whitespace(U'\u0085'));
  EXPECT_FALSE(is_whitespace(U'\u200B'));  // zero width space is not White_Space
  EXPECT_FALSE(is_whitespace(U'\uFEFF'));
  EXPECT_EQ(combining_class(0x0301), 230);
  EXPECT_EQ(combining_class(0x0323), 220);
  EXPECT_EQ(combining_class('a'), 0);
  EXPECT_FALSE(unicode_version().empty());
}

}  // namespace
}  // namespace graphed::tokenizer
