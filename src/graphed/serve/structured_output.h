// serve/structured_output.h — structured output on the server's side: a request's grammar compiled once
// (CompiledGrammar: from response_format, or from the tools a call must be made to), shared by the constraints of its
// choices, and GrammarConstraint, the infer::TokenConstraint the engine asks before each draw of one choice: the ids
// whose bytes that choice's own grammar::Matcher accepts next, over the server's vocabulary trie
// (serve/vocabulary_table.h), plus the request's end tokens once the document may end. Compiling a schema is
// grammar/'s (grammar/json_schema.h); which request field asks for it is serve/response_format.h's and
// serve/tool_call_grammar.h's.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "graphed/grammar/grammar.h"
#include "graphed/grammar/matcher.h"
#include "graphed/grammar/token_mask.h"
#include "graphed/grammar/token_mask_cache.h"
#include "graphed/infer/token_constraint.h"
#include "graphed/serve/vocabulary_table.h"

namespace graphed::serve {

/// What a request's output must follow, compiled once and shared by every request that asks for the same thing
/// (shared_compiled_grammar) and by their choices' constraints (each with its own matcher), which may run on
/// different threads at once; with the masks of its states, cached (grammar/token_mask_cache.h).
struct CompiledGrammar {
  CompiledGrammar(grammar::Grammar compiled, std::string origin)
      : grammar(std::move(compiled)), source(std::move(origin)) {}

  grammar::Grammar grammar;
  std::string
      source;  ///< what asked for it: "json_schema", "json_object", "regex", "choice" or "tool_calls" (a metrics label)
  std::once_flag masks_made;
  std::unique_ptr<grammar::TokenMaskCache> masks;  ///< made with the first mask, over the server's trie
};

/// The compiled grammar of `key` (the field it came from and the request's text of it), compiled by `compile` the
/// first time and kept for the next requests that send the same (the 32 latest kept), so that their masks come from
/// one cache.
std::shared_ptr<CompiledGrammar> shared_compiled_grammar(const std::string& key, const std::string& source,
                                                         const std::function<grammar::Grammar()>& compile);

/// Sets `bitmask` (resized to bitmask_words(trie.vocabulary_size())) to the ids whose whole bytes `matcher` accepts
/// from its state, and returns how many. The one place a constraint computes a mask, so that a faster computation
/// (states cached per grammar, kept in `compiled`, shared by its choices) replaces this alone.
std::int32_t compute_allowed_tokens(CompiledGrammar& compiled, grammar::Matcher& matcher,
                                    const grammar::TokenTrie& trie, std::vector<std::uint32_t>& bitmask);

class GrammarConstraint final : public infer::TokenConstraint {
 public:
  /// `end_tokens`: the request's stop ids (its end tokens unless ignore_eos, and stop_token_ids), allowed once the
  /// document may end. `table` and `trie` are the server's (ServerVocabulary), shared read-only.
  GrammarConstraint(std::shared_ptr<CompiledGrammar> compiled, std::shared_ptr<const VocabularyTable> table,
                    std::shared_ptr<const grammar::TokenTrie> trie, std::vector<int64_t> end_tokens);

  /// The ids the grammar allows next, and the end tokens where the document may end. Never sets no bit: where
  /// nothing could follow (a vocabulary without the bytes the grammar needs; never with a byte-level one), the end
  /// tokens (else id 0) are allowed and the constraint is finished after the draw.
  void allowed(std::uint32_t* words, std::int64_t word_count) override;
  /// Moves the matcher on by the token's bytes; an end token moves nothing (the request ends with it).
  void accept(std::int64_t token) override;
  /// The document is complete and nothing may follow it, or the constraint lost its way (a token the grammar
  /// refuses was drawn: never expected, since the engine draws only what allowed() allows).
  bool finished() const override;

 private:
  bool is_end_token(std::int64_t token) const;
  /// Sets the end tokens' bits that fall inside `word_count` words; returns how many it set.
  std::int32_t allow_end_tokens(std::uint32_t* words, std::int64_t word_count) const;

  std::shared_ptr<CompiledGrammar> compiled_;
  std::shared_ptr<const VocabularyTable> table_;
  std::shared_ptr<const grammar::TokenTrie> trie_;
  std::vector<int64_t> end_tokens_;
  grammar::Matcher matcher_;            // over compiled_->grammar, which outlives it (held above)
  std::vector<std::uint32_t> bitmask_;  // the last mask, reused from step to step
  bool lost_ = false;                   // a refused token came, or nothing could follow: end the request
};

}  // namespace graphed::serve
