// tests/tokenizer/byte_level_test.cpp — GPT-2's byte map (every byte to one printable code point) round-trips
// every byte.
#include "graphed/tokenizer/byte_level.h"

#include <gtest/gtest.h>

namespace graphed::tokenizer {
namespace {

TEST(ByteLevelTest, MapsEveryByteToOnePrintableCodePointAndBack) {
  EXPECT_EQ(byte_to_unicode(' '), 0x120u);   // "Ġ"
  EXPECT_EQ(byte_to_unicode('\n'), 0x10Au);  // "Ċ"
  EXPECT_EQ(byte_to_unicode('A'), static_cast<char32_t>('A'));
  std::string all_bytes;
  for (int byte = 0; byte < 256; ++byte) {
    all_bytes += static_cast<char>(byte);
    EXPECT_EQ(unicode_to_byte(byte_to_unicode(static_cast<unsigned char>(byte))), static_cast<unsigned char>(byte));
  }
  EXPECT_EQ(from_byte_level(to_byte_level(all_bytes)), all_bytes);
  EXPECT_EQ(to_byte_level("hi there"), "hi\xC4\xA0there");
  EXPECT_EQ(from_byte_level("<|\xC3\xA9|>"), std::string("<|\xE9|>"));  // é is byte 0xE9's own code point
  EXPECT_EQ(from_byte_level("\xE2\x82\xAC"), std::nullopt);             // € is not in the map
}

}  // namespace
}  // namespace graphed::tokenizer
