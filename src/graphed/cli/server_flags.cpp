// cli/server_flags.cpp — see cli/server_flags.h.
#include "graphed/cli/server_flags.h"

namespace graphed::cli {

void add_server_flags(CLI::App& serve, ServerFlags& flags) {
  const std::string group = "Server";
  serve
      .add_option("--host", flags.host,
                  "the address to listen on (default 127.0.0.1: this machine only; 0.0.0.0: every "
                  "interface)")
      ->group(group);
  serve.add_option("--port", flags.port, "the TCP port (default 8000; 0: any free port, named in the ready line)")
      ->group(group);
  serve
      .add_option("--api-key", flags.api_key,
                  "ask every /v1 request for 'Authorization: Bearer KEY' (default: the "
                  "GRAPHED_API_KEY environment variable, else no key)")
      ->group(group);
  serve
      .add_option("--served-model-name", flags.served_model_name,
                  "the model id clients send and /v1/models lists "
                  "(default: the model folder's name)")
      ->group(group);
  serve
      .add_option("--chat-template", flags.chat_template,
                  "a Jinja chat template file to use instead of the model's own")
      ->group(group);
  serve
      .add_option("--max-queued-requests", flags.max_queued,
                  "requests waiting for the engine beyond which a request is "
                  "answered 429 (default 1024)")
      ->group(group);
  serve
      .add_option("--shutdown-grace-seconds", flags.shutdown_grace,
                  "after SIGTERM or SIGINT, how long running requests "
                  "may finish before they are cancelled (default 30)")
      ->group(group);
  serve
      .add_option("--http-threads", flags.http_threads,
                  "the most HTTP worker threads, started as connections need them, one per open "
                  "connection (default: --inference-max-requests + --max-queued-requests + 64)")
      ->group(group);
}

}  // namespace graphed::cli
