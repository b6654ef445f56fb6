// cli/serve_command.cpp — see cli/serve_command.h.
#include "graphed/cli/serve_command.h"

#include <sys/resource.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <limits>
#include <thread>

#include <nlohmann/json.hpp>

#include "graphed/cli/draft_model.h"
#include "graphed/cli/engine_report.h"
#include "graphed/cli/generate_setup.h"
#include "graphed/cli/quantization.h"
#include "graphed/cli/run_setup.h"
#include "graphed/cli/serve_tensor_parallel.h"
#include "graphed/cli/serving_flags.h"
#include "graphed/serve/chat_prompt.h"
#include "graphed/serve/engine_loop.h"
#include "graphed/serve/http_server.h"
#include "graphed/util/error.h"
#include "graphed/util/logging.h"
#include "graphed/util/stop_signals.h"
#include "graphed/util/text.h"

namespace graphed::cli {
namespace {

void check_flags(const ServerFlags& flags) {
  std::vector<std::string> problems;
  if (flags.port < 0 || flags.port > 65535) {
    problems.push_back("--port is " + std::to_string(flags.port) +
                       "; fix: give a port from 1 to 65535, or 0 for any free one");
  }
  if (flags.max_queued < 1) {
    problems.push_back("--max-queued-requests is " + std::to_string(flags.max_queued) + "; fix: give 1 or more");
  }
  if (!(flags.shutdown_grace >= 0)) {
    problems.push_back("--shutdown-grace-seconds is " + format_number(flags.shutdown_grace) + "; fix: give 0 or more");
  }
  if (flags.http_threads < 0) {
    problems.push_back("--http-threads is " + std::to_string(flags.http_threads) +
                       "; fix: give 1 or more, or 0 for the default");
  }
  if (!problems.empty()) fail_with(problems);
}

/// The last part of a folder's path: what clients call the model unless --served-model-name says.
std::string folder_name(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::optional<serve::ChatPrompt> chat_prompt(const CommandLine& command_line) {
  const std::string& folder = command_line.generate.hf_folder;
  if (!command_line.server.chat_template.empty())
    return serve::ChatPrompt::from_file(command_line.server.chat_template, folder);
  if (!folder.empty()) return serve::ChatPrompt::from_folder(folder);
  return std::nullopt;
}

infer::ServingOptions engine_options(const CommandLine& command_line, const config::CudaGraphConfig& graphs,
                                     const GenerationModel& model) {
  infer::ServingOptions options = serving_options(command_line.serving, graphs, /*default_max_requests=*/64);
  if (!command_line.serving.max_sequence) options.max_sequence = model.context;
  options.vocabulary = model.tokenizer->vocab_size();
  return options;
}

serve::ServerOptions server_options(const ServerFlags& flags) {
  serve::ServerOptions options;
  options.host = flags.host;
  options.port = flags.port;
  options.api_key = flags.api_key;
  if (options.api_key.empty()) {
    if (const char* key = std::getenv("GRAPHED_API_KEY")) options.api_key = key;
  }
  options.threads = static_cast<int>(std::min<int64_t>(flags.http_threads, std::numeric_limits<int>::max()));
  return options;
}

/// Every connection is a file descriptor: the soft limit on open files (often 1,024) goes up to the hard one, so
/// that a burst of connections is not held at accept (httplib waits and retries there while the process has none
/// left). Where the hard limit is below what the server may hold, the log says so.
void raise_open_file_limit(int max_threads) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  }
  const auto wanted = static_cast<rlim_t>(max_threads) + 256;  // the model's files, the log, LibTorch's own
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < wanted) {
    log_warn("this process may open " + std::to_string(limit.rlim_cur) + " files, fewer than the " +
             std::to_string(max_threads) + " connections the server may hold at once; connections past it wait to " +
             "be accepted; fix: raise the limit (ulimit -n " + std::to_string(wanted) + ") or lower --http-threads");
  }
}

void print_ready(const CommandLine& command_line, const serve::ServedModel& served, const GenerationModel& model,
                 const infer::ServingEngine& engine, int port, bool chat, std::ostream& out) {
  const std::string address = "http://" + command_line.server.host + ":" + std::to_string(port) + "/v1";
  if (command_line.json_output) {
    out << nlohmann::json{{"event", "ready"},
                          {"address", address},
                          {"host", command_line.server.host},
                          {"port", port},
                          {"model", served.id},
                          {"description", model.description},
                          {"chat", chat},
                          {"context", served.context},
                          {"engine", engine_json(engine, engine.stats())}}
               .dump()
        << std::endl;
    return;
  }
  out << "model: " << model.description << "; tokenizer: " << model.tokenizer->description() << "\n";
  print_engine_line(engine, engine.stats(), out);
  out << "serving '" << served.id << "' at " << address << " (completions" << (chat ? ", chat completions" : "")
      << ", models; /health, /metrics); SIGTERM or Ctrl-C stops it" << std::endl;
}

/// The first rank (or the only process): the engine loop behind the HTTP server, until a signal or an engine
/// failure; 0, or 1 after a failure.
int serve_http(const CommandLine& command_line, GenerationModel& model, const std::optional<serve::ChatPrompt>& chat,
               infer::ServingEngine& engine, serve::EngineCalls& calls, ServingProcesses& processes,
               std::ostream& out) {
  serve::EngineLoop loop(engine, calls, command_line.server.max_queued);

  serve::ServedModel served;
  served.id = !command_line.server.served_model_name.empty() ? command_line.server.served_model_name
              : !command_line.generate.hf_folder.empty()     ? folder_name(command_line.generate.hf_folder)
                                                             : folder_name(*command_line.settings.train.load);
  served.tokenizer = model.tokenizer.get();
  served.chat = chat ? &*chat : nullptr;
  served.end_tokens = model.end_tokens;
  served.context = engine.max_sequence();
  served.max_requests = engine.options().max_requests;
  served.blocks_total = engine.blocks_total();
  served.created = static_cast<int64_t>(std::time(nullptr));

  serve::HttpServer server(loop, served, server_options(command_line.server));
  raise_open_file_limit(server.max_threads());
  server.bind();
  std::signal(SIGPIPE, SIG_IGN);  // a client that hung up must not end the server
  const auto grace = std::chrono::milliseconds(static_cast<int64_t>(command_line.server.shutdown_grace * 1000));
  StopSignals signals(true, "stopping: no new requests; running ones may finish within " +
                                format_number(command_line.server.shutdown_grace) +
                                " s (a second signal stops at once)");
  print_ready(command_line, served, model, engine, server.bound_port(), chat.has_value(), out);
  std::thread http([&server] { server.run(); });
  while (!signals.requested() && loop.snapshot().failure.empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const bool failed = !loop.snapshot().failure.empty();
  // Drain: new requests get 503 while the running ones finish (or are cancelled after the grace) and
  // their last events are written; only then does the listening socket close (httplib's stop() also cuts
  // the streams still open).
  server.refuse_new_requests();
  loop.shutdown(grace);
  for (int waited = 0; server.open_requests() > 0 && waited < 100; ++waited) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  server.stop();
  http.join();
  if (!failed) {
    calls.finish();  // the other ranks of a tensor-parallel group stop following
    processes.finish();
  } else {
    calls.abort();
  }
  const infer::EngineStats& stats = engine.stats();
  std::cerr << "stopped: " << counted(static_cast<std::size_t>(stats.output_tokens), "token") << " served in "
            << counted(static_cast<std::size_t>(stats.steps), "step") << std::endl;
  if (!failed) return 0;
  std::cerr << "error: the engine stopped after an internal error (above); fix: please report it with the command line "
               "and the request that caused it"
            << std::endl;
  return 1;
}

}  // namespace

int run_serve(const CommandLine& command_line, std::ostream& out) {
  const dist::LaunchEnvironment environment = launch_environment();
  const int64_t tensor_size = command_line.settings.train.tensor_model_parallel_size;
  require_serving_launch(environment, tensor_size);
  if (tensor_size > 1 && !command_line.serving.speculative_config.empty()) {  // before any model loads
    throw ConfigError(
        "speculative decoding is not built for tensor-parallel serving yet; fix: serve with one process, or without "
        "--speculative-config");
  }
  check_flags(command_line.server);
  const at::Device device =
      device_for_rank(choose_device(command_line.settings.train.device, "serving eagerly in fp32"), environment);
  std::ostream& notes = environment.rank == 0 ? std::cerr : null_stream();  // the first rank speaks for all
  check_quantization(command_line.serving.quantization);
  const config::CudaGraphConfig graphs = resolve_decode_graphs(command_line, device, notes);
  // A tensor-parallel rank loads the whole model into host memory and moves only its part to the GPU.
  GenerationModel model = load_generation_model(command_line, device, notes, /*on_host=*/tensor_size > 1);
  if (!model.tokenizer) {
    throw ConfigError(
        "the model has no tokenizer, and a server takes text; fix: give one with --tokenizer (tokenizer.json "
        "or 'bytes')");
  }
  const std::optional<serve::ChatPrompt> chat = chat_prompt(command_line);
  // One process, or a tensor-parallel group: each rank its part, the same engine everywhere (the first rank's
  // schedules; the others follow its steps).
  const std::unique_ptr<ServingProcesses> processes =
      serving_processes(environment, tensor_size, device, model.model, !command_line.disable_custom_all_reduce);
  infer::ServingOptions options = engine_options(command_line, graphs, model);
  processes->move_to_device(model.model);
  {  // before the cache takes what memory is left
    const at::NoGradGuard no_grad;
    apply_quantization(command_line.serving.quantization, model.model, device, notes);
  }
  attach_draft_model(options, command_line, device, model.tokenizer.get(), model.model->config().vocab_size, notes);
  processes->agree_on(options, model.model);
  infer::ServingEngine engine(model.model, device, options, processes->step_relay());
  // OpenAI's default is temperature 1: most requests sample, so their graphs are ready before the first one.
  engine.capture_graphs({infer::SamplingMode::kGreedy, infer::SamplingMode::kTemperature});
  return processes->run(engine, [&](serve::EngineCalls& calls) {
    return serve_http(command_line, model, chat, engine, calls, *processes, out);
  });
}

}  // namespace graphed::cli
