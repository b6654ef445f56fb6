// tests/util/safetensors_test.cpp — the safetensors reader and writer: a round trip, every malformed
// header the reader refuses before allocating, with the exact messages (in a checkpoint's wording, as
// training uses them), and the wording each user gives.
#include "graphed/util/safetensors.h"

#include <unistd.h>

#include <cstdint>
#include <fstream>

#include <gtest/gtest.h>

#include "error_text.h"

#include "graphed/util/error.h"
#include "graphed/util/file_system.h"

namespace graphed {
namespace {

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = make_temporary_directory("safetensors_test");
    ASSERT_FALSE(dir_.empty());
    path_ = join_path(dir_, "t.safetensors");
  }
  void TearDown() override { remove_all(dir_); }

  /// Writes an 8-byte header length, the header text and `data_bytes` zero bytes.
  void write_raw(const std::string& header, std::size_t data_bytes, uint64_t length) {
    std::ofstream file(path_, std::ios::binary);
    file.write(reinterpret_cast<const char*>(&length), 8);
    file << header << std::string(data_bytes, '\0');
  }
  void write_raw(const std::string& header, std::size_t data_bytes) { write_raw(header, data_bytes, header.size()); }
  /// The wording train/checkpoint.cpp passes.
  static SafetensorsWording checkpoint_wording() {
    SafetensorsWording wording;
    wording.file = "checkpoint file";
    wording.unreadable_fix = "pass the folder of a complete checkpoint to --load";
    wording.corrupt_fix = "load an earlier checkpoint, or start without --load";
    return wording;
  }
  /// The message read_safetensors throws (a CheckpointError).
  std::string error_of_read() {
    return graphed::testing::error_text<CheckpointError>([&] { read_safetensors(path_, checkpoint_wording()); });
  }
  /// The whole message for a corrupt file.
  std::string corrupt(const std::string& what) const {
    return "checkpoint file '" + path_ + "' is corrupt: " + what +
           "; fix: load an earlier checkpoint, or start "
           "without --load";
  }

  std::string dir_;
  std::string path_;
};

TEST_F(SafetensorsTest, RoundTrip) {
  const at::Tensor a = at::randn({3, 4});
  const at::Tensor b = at::arange(5, at::kLong);
  const at::Tensor c = at::randn({2}).to(at::kBFloat16);
  const at::Tensor empty = at::empty({0, 3});
  write_safetensors(path_, {{"a", a}, {"b", b}, {"c", c}, {"empty", empty}}, {{"format", "pt"}});
  const auto read = read_safetensors(path_);
  EXPECT_TRUE(at::equal(read.at("a"), a));
  EXPECT_TRUE(at::equal(read.at("b"), b));
  EXPECT_TRUE(at::equal(read.at("c"), c));
  EXPECT_EQ(read.at("empty").sizes(), empty.sizes());
  std::ifstream file(path_, std::ios::binary);
  uint64_t header_length = 0;
  file.read(reinterpret_cast<char*>(&header_length), 8);
  EXPECT_EQ(header_length % 8, 0u);
  EXPECT_EQ(safetensors_dtype_name(at::kFloat), "F32");
  EXPECT_EQ(safetensors_dtype_name(at::kInt), "I32");
}

TEST_F(SafetensorsTest, TruncatedFileIsCorrupt) {
  write_safetensors(path_, {{"a", at::randn({64})}});
  ASSERT_EQ(::truncate(path_.c_str(), file_size(path_) - 10), 0);
  EXPECT_EQ(error_of_read(), corrupt("tensor 'a' has data_offsets [0,256], beyond the data section of 246 bytes "
                                     "(truncated?)"));
  std::ofstream(path_, std::ios::binary) << "xy";
  EXPECT_EQ(error_of_read(), corrupt("shorter than its 8-byte header length"));
  EXPECT_EQ(graphed::testing::error_text<CheckpointError>(
                [&] { read_safetensors(join_path(dir_, "none"), checkpoint_wording()); }),
            "cannot read checkpoint file '" + join_path(dir_, "none") +
                "': No such file or directory; fix: pass "
                "the folder of a complete checkpoint to --load");
}

TEST_F(SafetensorsTest, HeaderLengthBeyondTheFileIsRefusedWithoutAllocating) {
  write_raw("{}", 0, 1000);
  EXPECT_EQ(error_of_read(), corrupt("header length 1000 exceeds the 2 bytes after it"));
  write_raw("{}", 0, UINT64_MAX);
  EXPECT_EQ(error_of_read(), corrupt("header length 18446744073709551615 exceeds the 2 bytes after it"));
}

TEST_F(SafetensorsTest, HeaderMustBeAJsonObject) {
  write_raw("{\"a\": ", 0);
  EXPECT_EQ(error_of_read(), corrupt("header is not JSON (syntax error at byte 7)"));
  write_raw("[1, 2]", 0);
  EXPECT_EQ(error_of_read(), corrupt("header is a JSON array, expected an object"));
  write_raw(R"({"a": 5})", 0);
  EXPECT_EQ(error_of_read(), corrupt("tensor 'a' has entry 5, expected an object"));
  write_raw(R"({"a": {"dtype": "F32", "shape": [1]}})", 4);
  EXPECT_EQ(error_of_read(), corrupt("tensor 'a' has no field 'data_offsets'"));
}

TEST_F(SafetensorsTest, UnknownDtypeIsNamed) {
  write_raw(R"({"a": {"dtype": "F33", "shape": [1], "data_offsets": [0, 4]}})", 4);
  EXPECT_EQ(error_of_read(), corrupt("tensor 'a' has dtype \"F33\", expected one of F64, F32, F16, BF16, I64, I32, "
                                     "I16, I8, U8, BOOL"));
}

TEST_F(SafetensorsTest, NegativeOrFractionalShapeIsRefused) {
  write_raw(R"({"a": {"dtype": "F32", "shape": [-1, 4], "data_offsets": [0, 16]}})", 16);
  EXPECT_EQ(error_of_read(), corrupt("tensor 'a' has shape [-1,4], expected an array of integers >= 0"));
  write_raw(R"({"a": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", 4);
  EXPECT_EQ(error_of_read(), corrupt("tensor 'a' has shape [1.5], expected an array of integers >= 0"));
  write_raw(R"({"a": {"dtype": "F32", "shape": 4, "data_offsets": [0, 16]}})", 16);
  EXPECT_EQ(error_of_read(), corrupt("tensor 'a' has shape 4, expected an array of integers >= 0"));
}

TEST_F(SafetensorsTest, EnormousShapeIsRefusedWithoutAllocating) {
  write_raw(R"({"a": {"dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 16]}})", 16);
  EXPECT_EQ(error_of_read(), corrupt("tensor 'a' has shape [4611686018427387904,4], whose element count overflows "
                                     "int64"));
  write_raw(R"({"a": {"dtype": "F64", "shape": [4611686018427387904], "data_offsets": [0, 16]}})", 16);
  EXPECT_EQ(error_of_read(), corrupt("tensor 'a' has shape [4611686018427387904], whose byte count overflows uint64"));
  write_raw(R"({"a": {"dtype": "F32", "shape": [1099511627776], "data_offsets": [0, 16]}})", 16);
  EXPECT_EQ(error_of_read(), corrupt("tensor 'a' has data_offsets [0,16] (16 bytes), but dtype F32 and shape "
                                     "[1099511627776] need 4398046511104 bytes"));
}

TEST_F(SafetensorsTest, DataOffsetsMustLieInTheDataSection) {
  write_raw(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [984, 1000]}})", 16);
  EXPECT_EQ(error_of_read(), corrupt("tensor 'a' has data_offsets [984,1000], beyond the data section of 16 bytes "
                                     "(truncated?)"));
  write_raw(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}})", 16);
  EXPECT_EQ(error_of_read(),
            corrupt("tensor 'a' has data_offsets [8,4], expected [begin, end] with 0 <= begin <= end"));
  write_raw(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})", 16);
  EXPECT_EQ(error_of_read(),
            corrupt("tensor 'a' has data_offsets [-4,0], expected [begin, end] with 0 <= begin <= end"));
  write_raw(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}})", 16);
  EXPECT_EQ(error_of_read(), corrupt("tensor 'a' has data_offsets [0,4] (4 bytes), but dtype F32 and shape [2] need "
                                     "8 bytes"));
}

TEST_F(SafetensorsTest, OverlappingTensorsAreRefused) {
  write_raw(R"({"b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]},)"
            R"( "a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})",
            24);
  EXPECT_EQ(error_of_read(), corrupt("tensors 'a' [0, 16) and 'b' [8, 24) overlap in the data section"));
  write_raw(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
            R"( "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]},)"
            R"( "c": {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]}})",
            16);
  EXPECT_EQ(read_safetensors(path_).size(), 3u) << "adjacent tensors and an empty one inside another are fine";
}

TEST_F(SafetensorsTest, MetadataMustMapStringsToStrings) {
  write_raw(R"({"__metadata__": {"format": 5}})", 0);
  EXPECT_EQ(error_of_read(), corrupt("__metadata__ is {\"format\":5}, expected an object of strings"));
  write_raw(R"({"__metadata__": ["pt"]})", 0);
  EXPECT_EQ(error_of_read(), corrupt("__metadata__ is [\"pt\"], expected an object of strings"));
  write_raw(R"({"__metadata__": {"format": "pt"}})", 0);
  EXPECT_TRUE(read_safetensors(path_).empty());
}

TEST_F(SafetensorsTest, WordingNamesTheFileAndTheFix) {
  SafetensorsWording hf;
  hf.file = "model weights file";
  hf.corrupt_fix = "download the model folder again";
  std::ofstream(path_, std::ios::binary) << "xy";
  EXPECT_EQ(graphed::testing::error_text<CheckpointError>([&] { read_safetensors(path_, hf); }),
            "model weights file '" + path_ +
                "' is corrupt: shorter than its 8-byte header length; fix: download "
                "the model folder again");
  EXPECT_EQ(graphed::testing::error_text<CheckpointError>([&] { read_safetensors(path_); }),
            "safetensors file '" + path_ +
                "' is corrupt: shorter than its 8-byte header length; fix: write the "
                "file again");
  const std::string missing = join_path(dir_, "none");
  EXPECT_EQ(graphed::testing::error_text<CheckpointError>([&] { read_safetensors(missing); }),
            "cannot read safetensors file '" + missing +
                "': No such file or directory; fix: check that the file "
                "exists and can be read");
  const std::string unwritable = join_path(join_path(dir_, "no-folder"), "t.safetensors");
  EXPECT_EQ(graphed::testing::error_text<DataError>([&] {
              write_safetensors(unwritable, {{"a", at::ones({1})}});
            }),
            "cannot write safetensors file '" + unwritable +
                "': No such file or directory; fix: check that the "
                "folder is writable and has space");
  EXPECT_EQ(graphed::testing::error_text<DataError>([&] {
              write_safetensors(unwritable, {{"a", at::ones({1})}}, {}, checkpoint_wording());
            }),
            "cannot write checkpoint file '" + unwritable +
                "': No such file or directory; fix: check that the "
                "folder is writable and has space");
}

}  // namespace
}  // namespace graphed
