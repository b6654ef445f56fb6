// serve/served_model.h — what the HTTP side knows of the model it serves: the id clients name it by, its
// tokenizer and chat template, its end tokens and its sizes. Owned by the serve command; read-only here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graphed/serve/chat_prompt.h"
#include "graphed/tokenizer/tokenizer.h"

namespace graphed::serve {

struct ServedModel {
  std::string id;                                   ///< what /v1/models lists and requests send as "model"
  const tokenizer::Tokenizer* tokenizer = nullptr;  ///< never null
  const ChatPrompt* chat = nullptr;                 ///< null when the model has no chat template
  std::vector<int64_t> end_tokens;                  ///< stop ids unless a request sets ignore_eos
  int64_t context = 0;                              ///< the most positions one request may hold
  int64_t max_requests = 0;                         ///< requests the engine runs at once
  int64_t blocks_total = 0;                         ///< KV cache blocks
  int64_t created = 0;                              ///< Unix seconds the server started
};

}  // namespace graphed::serve
