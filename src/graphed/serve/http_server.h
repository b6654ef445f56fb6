// serve/http_server.h — graphed's OpenAI-compatible HTTP server on cpp-httplib: the routes
// (/v1/completions, /v1/chat/completions, /v1/models, /health, /metrics), the API key, the body size
// limit, and the rule that every error leaves as an OpenAI-style JSON object. HTTP threads only parse,
// queue and read: the engine loop's thread alone touches the GPU. Every connection is accepted: the listening
// socket's backlog is the system's (not httplib's 5), and there is a thread for every request the engine loop
// can hold, so a request past the loop's capacity is answered 429 with Retry-After, never reset.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "graphed/serve/engine_loop.h"
#include "graphed/serve/metrics.h"
#include "graphed/serve/served_model.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace graphed::serve {

class CompletionHandlers;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;      ///< 0: any free port (bound_port() says which)
  std::string api_key;  ///< empty: no key asked
  std::size_t max_body_bytes = 16u << 20;
  /// The most HTTP threads, started as connections need them; each open connection holds one. 0: the engine
  /// loop's capacity (running and queued requests) + kSpareThreads, so that every request the loop can hold has a
  /// thread and the spare ones answer the rest (429), /health and /metrics meanwhile.
  int threads = 0;
  std::chrono::milliseconds heartbeat{1000};
};

class HttpServer {
 public:
  /// Threads beyond the loop's capacity when ServerOptions::threads is 0.
  static constexpr int kSpareThreads = 64;

  HttpServer(EngineLoop& loop, const ServedModel& model, ServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// Binds the address and listens with the system's largest backlog. Throws Error naming the host and port
  /// when it cannot (taken, not allowed).
  void bind();
  int bound_port() const { return bound_port_; }
  /// Serves until stop(); call after bind().
  void run();
  /// Closes the listening socket; run() returns once the open connections are done.
  void stop();
  /// From now on requests are answered 503 (the server drains before it exits).
  void refuse_new_requests() { draining_ = true; }
  /// Requests accepted and not yet fully answered: stop() waits for none (it would cut their streams).
  int open_requests() const;
  /// The most HTTP threads (ServerOptions::threads, or what 0 stands for).
  int max_threads() const { return max_threads_; }

 private:
  void add_routes();
  CompletionHandlers* handlers_ = nullptr;  // owned by the routes' handlers

  EngineLoop& loop_;
  const ServedModel& model_;
  ServerOptions options_;
  ServerMetrics metrics_;
  std::unique_ptr<httplib::Server> server_;
  std::atomic<bool> draining_{false};
  int max_threads_ = 0;
  int listening_socket_ = -1;  // the last socket httplib handed set_socket_options: the one that bound
  int bound_port_ = 0;
};

}  // namespace graphed::serve
