// cli/speculative_config.cpp — see cli/speculative_config.h.
#include "graphed/cli/speculative_config.h"

#include <nlohmann/json.hpp>

#include "graphed/util/error.h"

namespace graphed::cli {
namespace {

constexpr const char* kFlag = "--speculative-config";
constexpr int64_t kLongestLookup = 64;
constexpr const char* kExample = R"({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4})";
constexpr const char* kDraftExample = R"({"method": "draft_model", "model": "DIR", "num_speculative_tokens": 4})";

[[noreturn]] void refuse(const std::string& problem, const std::string& fix) {
  throw ConfigError(std::string(kFlag) + ": " + problem + "; fix: " + fix);
}

/// An integer field in [least, most], or `fallback` when absent.
int64_t integer_field(const nlohmann::json& config, const char* name, int64_t least, int64_t most, int64_t fallback) {
  if (!config.contains(name)) return fallback;
  const nlohmann::json& value = config.at(name);
  if (!value.is_number_integer() || value.get<int64_t>() < least || value.get<int64_t>() > most) {
    refuse(std::string(name) + " is " + value.dump(),
           "give an integer from " + std::to_string(least) + " to " + std::to_string(most));
  }
  return value.get<int64_t>();
}

/// num_speculative_tokens, which every method needs.
int64_t proposed_tokens(const nlohmann::json& config, const char* example) {
  if (!config.contains("num_speculative_tokens")) {
    refuse("num_speculative_tokens is missing", std::string("give the tokens proposed a step, like ") + example);
  }
  return integer_field(config, "num_speculative_tokens", 1, infer::kMaxSpeculativeTokens, 0);
}

void read_ngram(const nlohmann::json& config, infer::SpeculativeDecoding& speculation) {
  if (config.contains("model")) refuse("the ngram method takes no model", "drop the field 'model'");
  speculation.method = infer::SpeculativeDecoding::Method::kNgram;
  speculation.num_tokens = proposed_tokens(config, kExample);
  infer::NgramLookup& lookup = speculation.lookup;
  lookup.tokens = speculation.num_tokens;
  // vLLM's defaults: 5 and 5 when neither is given, else the one given for both.
  const bool has_max = config.contains("prompt_lookup_max");
  const bool has_min = config.contains("prompt_lookup_min");
  lookup.longest = integer_field(config, "prompt_lookup_max", 1, kLongestLookup, 5);
  lookup.shortest = integer_field(config, "prompt_lookup_min", 1, kLongestLookup, 5);
  if (has_max && !has_min) lookup.shortest = lookup.longest;
  if (has_min && !has_max) lookup.longest = lookup.shortest;
  if (lookup.shortest > lookup.longest) {
    refuse("prompt_lookup_min " + std::to_string(lookup.shortest) + " is above prompt_lookup_max " +
               std::to_string(lookup.longest),
           "give a minimum no larger than the maximum");
  }
}

void read_draft_model(const nlohmann::json& config, infer::SpeculativeDecoding& speculation) {
  for (const char* field : {"prompt_lookup_max", "prompt_lookup_min"}) {
    if (config.contains(field)) refuse(std::string(field) + " belongs to the ngram method", "drop it");
  }
  if (!config.contains("model") || !config.at("model").is_string() || config.at("model").get<std::string>().empty()) {
    refuse(
        config.contains("model") ? "model is " + config.at("model").dump() : "the draft_model method needs a model",
        std::string("give the draft's folder (a graphed checkpoint or a Hugging Face folder), like ") + kDraftExample);
  }
  speculation.method = infer::SpeculativeDecoding::Method::kDraftModel;
  speculation.num_tokens = proposed_tokens(config, kDraftExample);
  speculation.draft_model = config.at("model").get<std::string>();
}

}  // namespace

infer::SpeculativeDecoding parse_speculative_config(const std::string& text) {
  infer::SpeculativeDecoding speculation;
  if (text.empty()) return speculation;
  const nlohmann::json config = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!config.is_object()) refuse("'" + text + "' is not a JSON object", std::string("give one, like ") + kExample);
  for (const auto& [name, value] : config.items()) {
    if (name != "method" && name != "num_speculative_tokens" && name != "prompt_lookup_max" &&
        name != "prompt_lookup_min" && name != "model") {
      refuse("graphed does not know the field '" + name + "'",
             "give method, num_speculative_tokens, and prompt_lookup_max and prompt_lookup_min (ngram) or model "
             "(draft_model)");
    }
  }
  if (config.contains("method") && !config.at("method").is_string()) {
    refuse("method is " + config.at("method").dump(), "give \"ngram\" or \"draft_model\"");
  }
  // vLLM's rule: a model without a method is a draft model.
  const std::string method = config.value("method", std::string(config.contains("model") ? "draft_model" : ""));
  if (method == "ngram" || method == "[ngram]") {
    read_ngram(config, speculation);
  } else if (method == "draft_model") {
    read_draft_model(config, speculation);
  } else {
    const std::string what = method.empty() ? "no method is given" : "the method '" + method + "' is not built yet";
    refuse(what +
               " (graphed speculates by prompt lookup, 'ngram', and with a draft model, 'draft_model'; EAGLE and "
               "MTP heads are not built)",
           std::string("give ") + kExample + " or " + kDraftExample);
  }
  return speculation;
}

}  // namespace graphed::cli
