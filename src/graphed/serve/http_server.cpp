// serve/http_server.cpp — see serve/http_server.h. Every handler runs inside guarded(), the one place
// that turns an exception into an answer: an ApiError as itself, another graphed error as a 400 with its
// message, anything else as a 500 whose message says only that (the log gets the first line).
#include "graphed/serve/http_server.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <limits>
#include <utility>

#include <httplib.h>

#include "graphed/serve/api_error.h"
#include "graphed/serve/completion_handlers.h"
#include "graphed/serve/connection_threads.h"
#include "graphed/util/error.h"
#include "graphed/util/logging.h"
#include "graphed/util/text.h"

namespace graphed::serve {
namespace {

using json = nlohmann::ordered_json;
using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

void send_error(httplib::Response& response, const ApiError& error) {
  response.status = error.status();
  if (error.status() == 429) response.set_header("Retry-After", "1");
  response.set_content(error.body().dump(), "application/json");
}

httplib::Server::Handler guarded(ServerMetrics& metrics, Handler handler) {
  return [&metrics, handler = std::move(handler)](const httplib::Request& request, httplib::Response& response) {
    try {
      handler(request, response);
    } catch (const ApiError& error) {
      metrics.count(outcome_of_status(error.status()));
      send_error(response, error);
    } catch (const Error& error) {  // the tokenizer refusing a text, say: the message is for the user
      metrics.count(Outcome::kInvalid);
      send_error(response, invalid_request(error.what()));
    } catch (const std::exception& error) {
      const std::string cause = without_library_tag(error.what());
      log_warn("internal error on " + request.method + " " + request.path + ": " + cause.substr(0, cause.find('\n')));
      metrics.count(Outcome::kFailed);
      send_error(response,
                 ApiError(500, "server_error", "an internal error ended the request; the server's log says more"));
    }
  };
}

const char* kRoutes = "POST /v1/completions, POST /v1/chat/completions, GET /v1/models, GET /health, GET /metrics";

/// The body of an error httplib answered itself (no route, a body too large, unreadable HTTP).
ApiError library_error(const httplib::Request& request, int status, std::size_t max_body_bytes) {
  if (status == 404) {
    return ApiError(404, "not_found_error",
                    "there is no " + request.method + " " + request.path + " here; the server answers " + kRoutes);
  }
  if (status == 413) {
    return ApiError(413, "invalid_request_error",
                    "the request body is larger than the server's limit of " + std::to_string(max_body_bytes) +
                        " bytes; send a smaller one");
  }
  if (status == 400) return invalid_request("the request could not be read as HTTP/1.1; send a well-formed request");
  return ApiError(status, status < 500 ? "invalid_request_error" : "server_error",
                  "the request failed with HTTP status " + std::to_string(status) +
                      "; send a well-formed request of normal size to one of " + kRoutes);
}

json model_card(const ServedModel& model) {
  return {{"id", model.id},        {"object", "model"}, {"created", model.created},
          {"owned_by", "graphed"}, {"root", model.id},  {"max_model_len", model.context}};
}

}  // namespace

HttpServer::HttpServer(EngineLoop& loop, const ServedModel& model, ServerOptions options)
    : loop_(loop), model_(model), options_(std::move(options)), server_(std::make_unique<httplib::Server>()) {
  max_threads_ =
      options_.threads > 0
          ? options_.threads
          : static_cast<int>(std::min<int64_t>(loop_.capacity() + kSpareThreads, std::numeric_limits<int>::max()));
  const auto threads = static_cast<std::size_t>(max_threads_);
  server_->new_task_queue = [threads] { return new ConnectionThreads(threads); };
  server_->set_payload_max_length(options_.max_body_bytes);
  server_->set_keep_alive_max_count(1000);
  server_->set_read_timeout(5, 0);
  server_->set_keep_alive_timeout(2);  // an idle connection holds a thread, and stop() waits for it
  server_->set_write_timeout(30, 0);
  // Set on the listening socket; Linux's accepted sockets inherit it, so a token's chunk leaves at once instead
  // of waiting (Nagle) for the client to acknowledge the one before.
  server_->set_tcp_nodelay(true);
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, with which a second server on a port already
  // in use binds too, and the kernel deals the connections between them. httplib calls this for each address
  // it tries, closing those that do not bind: the last socket it is given is the listening one.
  server_->set_socket_options([this](socket_t socket) {
    int yes = 1;
    ::setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listening_socket_ = socket;
  });
  add_routes();
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::add_routes() {
  auto handlers = std::make_shared<CompletionHandlers>(loop_, metrics_, model_, options_.heartbeat);
  handlers_ = handlers.get();
  server_->set_pre_routing_handler([this](const httplib::Request& request, httplib::Response& response) {
    const bool api = request.path.rfind("/v1/", 0) == 0;
    if (api && !options_.api_key.empty() && request.get_header_value("Authorization") != "Bearer " + options_.api_key) {
      metrics_.count(Outcome::kInvalid);
      send_error(response, ApiError(401, "authentication_error",
                                    "the API key is missing or wrong; send the header "
                                    "'Authorization: Bearer <key>' with the server's --api-key"));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (api && request.method == "POST" && draining_) {
      metrics_.count(Outcome::kRefused);
      send_error(response,
                 ApiError(503, "server_error",
                          "the server is shutting down and takes no new requests; send it to another server"));
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  server_->set_error_handler([this](const httplib::Request& request, httplib::Response& response) {
    if (!response.body.empty()) return;
    if (response.status == 413 || response.status == 400) metrics_.count(Outcome::kInvalid);
    const ApiError error = library_error(request, response.status, options_.max_body_bytes);
    response.set_content(error.body().dump(), "application/json");
  });
  server_->Post("/v1/completions", guarded(metrics_, [handlers](const auto& request, auto& response) {
                  handlers->completions(request, response);
                }));
  server_->Post("/v1/chat/completions", guarded(metrics_, [handlers](const auto& request, auto& response) {
                  handlers->chat(request, response);
                }));
  server_->Get("/v1/models", guarded(metrics_, [this](const auto&, auto& response) {
                 response.set_content(json{{"object", "list"}, {"data", json::array({model_card(model_)})}}.dump(),
                                      "application/json");
               }));
  server_->Get(R"(/v1/models/(.+))", guarded(metrics_, [this](const httplib::Request& request, auto& response) {
                 if (request.matches[1] != model_.id) {
                   throw ApiError(404, "not_found_error",
                                  "the model '" + std::string(request.matches[1]) +
                                      "' is not served here; GET /v1/models lists '" + model_.id + "'");
                 }
                 response.set_content(model_card(model_).dump(), "application/json");
               }));
  server_->Get(
      "/health", guarded(metrics_, [this](const auto&, auto& response) {
        const LoopSnapshot snapshot = loop_.snapshot();
        const bool up = snapshot.accepting && !draining_;
        response.status = up ? 200 : 503;
        response.set_content(
            json{{"status", up ? "ok" : (snapshot.failure.empty() ? "shutting down" : "engine stopped")}}.dump(),
            "application/json");
      }));
  server_->Get("/metrics", guarded(metrics_, [this](const auto&, auto& response) {
                 response.set_content(metrics_.render(loop_.snapshot(), model_.blocks_total, model_.max_requests),
                                      "text/plain; version=0.0.4; charset=utf-8");
               }));
  // The right path with the wrong method: 405, saying which method it takes.
  const auto wrong_method = [this](const std::string& allowed) {
    return guarded(metrics_, [allowed](const httplib::Request& request, auto& response) {
      response.set_header("Allow", allowed);
      throw ApiError(405, "invalid_request_error",
                     request.method + " is not allowed on " + request.path + "; use " + allowed);
    });
  };
  for (const char* path : {"/v1/completions", "/v1/chat/completions"}) {
    server_->Get(path, wrong_method("POST"));
    server_->Put(path, wrong_method("POST"));
    server_->Delete(path, wrong_method("POST"));
  }
  for (const char* path : {"/v1/models", "/health", "/metrics"}) {
    server_->Post(path, wrong_method("GET"));
  }
}

void HttpServer::bind() {
  bool bound = false;
  if (options_.port == 0) {
    bound_port_ = server_->bind_to_any_port(options_.host);
    bound = bound_port_ > 0;
  } else {
    bound = server_->bind_to_port(options_.host, options_.port);
    bound_port_ = options_.port;
  }
  if (!bound) {
    throw Error("cannot listen on " + options_.host + ":" + std::to_string(options_.port) +
                " (the port is taken, or the address is not one of this machine's); fix: choose another --port, "
                "stop whatever holds it, or give a --host of this machine");
  }
  // httplib listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG, compiled into Debian's shared library):
  // connects beyond it while the accepting thread is busy are dropped or reset (87 to 239 of 600 clients at once
  // were). Listening again on the bound socket sets its backlog; the kernel caps SOMAXCONN at net.core.somaxconn.
  if (listening_socket_ < 0 || ::listen(listening_socket_, SOMAXCONN) != 0) {
    log_warn("cannot raise the listening socket's backlog above httplib's 5 (" +
             std::string(listening_socket_ < 0 ? "no socket" : std::strerror(errno)) +
             "): a burst of connections at once may be refused");
  }
}

void HttpServer::run() { server_->listen_after_bind(); }

int HttpServer::open_requests() const { return handlers_->open_requests(); }

void HttpServer::stop() {
  if (server_) server_->stop();
}

}  // namespace graphed::serve
