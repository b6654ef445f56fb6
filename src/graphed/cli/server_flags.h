// cli/server_flags.h — `graphed serve`'s own flags: where it listens, the API key, the name clients use
// for the model, the chat template, the queue and the shutdown grace. The engine's flags are
// serving_flags.h's; the model's (--load, --hf, --tokenizer, --dtype) are generate's.
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

namespace graphed::cli {

struct ServerFlags {
  std::string host = "127.0.0.1";  ///< --host
  int port = 8000;                 ///< --port (0: any free port; the ready line says which)
  std::string api_key;             ///< --api-key (also GRAPHED_API_KEY); empty = none
  std::string served_model_name;   ///< --served-model-name; default: the model folder's name
  std::string chat_template;       ///< --chat-template FILE: overrides the model's own
  int64_t max_queued = 1024;       ///< --max-queued-requests: beyond it a request gets 429
  double shutdown_grace = 30;      ///< --shutdown-grace-seconds: what runs may finish after SIGTERM
  int64_t http_threads = 0;        ///< --http-threads; 0 = the requests the server holds + 64 (ServerOptions::threads)
};

void add_server_flags(CLI::App& serve, ServerFlags& flags);

}  // namespace graphed::cli
