// cli/bench_constraints.h — what `bench --serve --logprobs K --json-schema FILE` adds to each request of the
// workload: log probabilities, and output constrained by a JSON schema, so that their cost is measured against the
// same workload without them. A benchmark model has random weights and often no tokenizer, so the schema's masks run
// over a synthetic vocabulary of the model's size (the 256 bytes, then seeded words, numbers and JSON punctuation):
// the trie a real tokenizer of that size gives is of the same breadth. A request whose document is complete starts
// another, so that it draws its whole output length, as the unconstrained run does.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "graphed/infer/request.h"

namespace graphed::cli {

/// Adds the flags' log probabilities and constraint to one request's options.
using RequestDecoration = std::function<void(infer::RequestOptions&)>;

/// The decoration of `logprobs` (-1: none) and the schema in `schema_file` ("": none) over a synthetic vocabulary of
/// `vocabulary` ids. Throws ConfigError naming --json-schema for a file that cannot be read or a schema outside the
/// supported subset, and --logprobs out of 0..20.
RequestDecoration bench_decoration(int64_t logprobs, const std::string& schema_file, int64_t vocabulary);

/// What the decoration does, for the report ("" when nothing).
std::string decoration_text(int64_t logprobs, const std::string& schema_file);

}  // namespace graphed::cli
