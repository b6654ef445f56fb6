// serve/logprobs_output.cpp — see serve/logprobs_output.h. JSON has no -infinity: a log probability that is not
// finite (a token the model gives no chance) is written as -9999, as OpenAI writes it.
#include "graphed/serve/logprobs_output.h"

#include <cmath>
#include <string>

namespace graphed::serve {
namespace {

using json = nlohmann::ordered_json;

double finite(double logprob) { return std::isfinite(logprob) ? logprob : -9999.0; }

int64_t code_points(const std::string& text) {
  int64_t count = 0;
  for (char byte : text) count += (static_cast<unsigned char>(byte) & 0xC0) != 0x80;
  return count;
}

json byte_values(const std::string& bytes) {
  json values = json::array();
  for (char byte : bytes) values.push_back(static_cast<int>(static_cast<unsigned char>(byte)));
  return values;
}

/// {"token", "logprob", "bytes"} of one id.
json chat_entry(int64_t id, double logprob, const VocabularyTable& table) {
  return {{"token", table.text(id)}, {"logprob", finite(logprob)}, {"bytes", byte_values(table.bytes(id))}};
}

}  // namespace

json completion_logprobs(const std::vector<TokenLogprob>& tokens, const VocabularyTable& table, int64_t& text_offset) {
  json texts = json::array(), logprobs = json::array(), tops = json::array(), offsets = json::array();
  for (const TokenLogprob& token : tokens) {
    const std::string& text = table.text(token.token);
    texts.push_back(text);
    logprobs.push_back(finite(token.logprob));
    json top = json::object();
    for (const auto& [id, logprob] : token.top) {
      if (!top.contains(table.text(id))) top[table.text(id)] = finite(logprob);
    }
    if (!top.contains(text)) top[text] = finite(token.logprob);
    tops.push_back(std::move(top));
    offsets.push_back(text_offset);
    text_offset += code_points(text);
  }
  return {{"tokens", texts}, {"token_logprobs", logprobs}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

json chat_logprobs(const std::vector<TokenLogprob>& tokens, const VocabularyTable& table) {
  json content = json::array();
  for (const TokenLogprob& token : tokens) {
    json entry = chat_entry(token.token, token.logprob, table);
    json top = json::array();
    for (const auto& [id, logprob] : token.top) top.push_back(chat_entry(id, logprob, table));
    entry["top_logprobs"] = std::move(top);
    content.push_back(std::move(entry));
  }
  return {{"content", content}};
}

}  // namespace graphed::serve
