// tests/util/utf8_test.cpp — strict decoding refuses invalid UTF-8 naming the byte and offset; lossy
// decoding replaces each maximal invalid subsequence with one U+FFFD (as Rust and WHATWG do).
#include "graphed/util/utf8.h"

#include <gtest/gtest.h>

#include "error_text.h"

namespace graphed {
namespace {

using graphed::testing::error_text;
const std::string kFffd = "\xEF\xBF\xBD";

TEST(Utf8Test, DecodesCodePointsWithByteOffsets) {
  const CodePoints decoded = decode_utf8("a\xC3\xA9\xE6\x97\xA5\xF0\x9F\x98\x80", "the text");
  EXPECT_EQ(decoded.code_points, (std::vector<char32_t>{'a', 0xE9, 0x65E5, 0x1F600}));
  EXPECT_EQ(decoded.byte_offsets, (std::vector<std::size_t>{0, 1, 3, 6, 10}));
}

TEST(Utf8Test, InvalidInputNamesTheByteAndItsOffset) {
  EXPECT_EQ(error_text<DataError>([] { decode_utf8("abc\xFFxyz", "the text"); }),
            "the text is not valid UTF-8: byte 0xFF at byte offset 3; fix: convert the input to UTF-8 (e.g. iconv -f "
            "latin1 -t utf-8)");
  EXPECT_EQ(error_text<DataError>([] { check_utf8("ok \xC3", "--file 'x'"); }),
            "--file 'x' is not valid UTF-8: byte 0xC3 at byte offset 3; fix: convert the input to UTF-8 (e.g. iconv -f "
            "latin1 -t utf-8)");
  EXPECT_EQ(find_invalid_utf8("\xC0\xAF"), 0u);          // overlong
  EXPECT_EQ(find_invalid_utf8("ab\xED\xA0\x80"), 2u);    // surrogate
  EXPECT_EQ(find_invalid_utf8("\xF4\x90\x80\x80"), 0u);  // past U+10FFFF
  EXPECT_EQ(find_invalid_utf8("valid \xE2\x82\xAC"), 9u);
}

TEST(Utf8Test, LossyDecodingReplacesMaximalSubparts) {
  EXPECT_EQ(to_valid_utf8_lossy("a\xF0\x9F\x98"), "a" + kFffd);           // truncated 4-byte sequence: one
  EXPECT_EQ(to_valid_utf8_lossy("\xE2\x28\xA1"), kFffd + "(" + kFffd);    // bad second byte
  EXPECT_EQ(to_valid_utf8_lossy("\xC0\xAF"), kFffd + kFffd);              // overlong: each byte
  EXPECT_EQ(to_valid_utf8_lossy("\xED\xA0\x80"), kFffd + kFffd + kFffd);  // surrogate: each byte
  EXPECT_EQ(to_valid_utf8_lossy("ok \xC3\xA9"), "ok \xC3\xA9");
  EXPECT_EQ(to_code_points("a\xFF"), (std::u32string{'a', 0xFFFD}));
}

TEST(Utf8Test, EncodesCodePoints) {
  EXPECT_EQ(utf8_of(0x24), "$");
  EXPECT_EQ(utf8_of(0x20AC), "\xE2\x82\xAC");
  EXPECT_EQ(utf8_of(0x1F600), "\xF0\x9F\x98\x80");
  EXPECT_EQ(utf8_of(0xD800), kFffd);
  EXPECT_EQ(to_utf8(std::u32string{'h', 0xE9}), "h\xC3\xA9");
}

}  // namespace
}  // namespace graphed
