// config/model_config.cpp — see config/model_config.h.
#include "graphed/config/model_config.h"

#include <cstdlib>

#include "graphed/util/text.h"

namespace graphed::config {

const std::vector<std::string>& normalization_names() {
  static const std::vector<std::string> names{"LayerNorm", "RMSNorm"};
  return names;
}

const std::vector<std::string>& position_embedding_names() {
  static const std::vector<std::string> names{"learned_absolute", "rope"};
  return names;
}

std::optional<std::vector<bool>> parse_moe_layer_pattern(const std::string& text, int64_t num_layers) {
  std::string body = text;
  if (body.size() >= 2 && body.front() == '[' && body.back() == ']') body = body.substr(1, body.size() - 2);
  const std::vector<std::string> pieces = split(body, ',');
  if (pieces.empty() || num_layers < 1) return std::nullopt;
  std::vector<bool> pattern;
  if (pieces.size() == 1 && text.find(',') == std::string::npos && text.front() != '[') {
    char* end = nullptr;
    const long long every = std::strtoll(pieces.front().c_str(), &end, 10);
    if (*end != '\0' || every < 1) return std::nullopt;
    for (int64_t layer = 0; layer < num_layers; ++layer) pattern.push_back(layer % every == 0);
    return pattern;
  }
  if (static_cast<int64_t>(pieces.size()) != num_layers) return std::nullopt;
  for (const auto& piece : pieces) {
    if (piece != "0" && piece != "1") return std::nullopt;
    pattern.push_back(piece == "1");
  }
  return pattern;
}

}  // namespace graphed::config
