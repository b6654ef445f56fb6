// cli/main.cpp — the graphed executable: parses the command line, runs the command, and is the one
// place that catches every error, printing it (with every detail line) and exiting non-zero.
#include <iostream>
#include <new>

#include <c10/util/Exception.h>

#include "graphed/cli/bench_command.h"
#include "graphed/cli/check_config_command.h"
#include "graphed/cli/command_line.h"
#include "graphed/cli/generate_command.h"
#include "graphed/cli/report_command.h"
#include "graphed/cli/serve_command.h"
#include "graphed/cli/tokenize_command.h"
#include "graphed/cli/train_command.h"
#include "graphed/util/compat.h"
#include "graphed/util/error.h"
#include "graphed/util/logging.h"
#include "graphed/util/text.h"

namespace {

std::string first_line(const char* text) {
  const std::string message = graphed::without_library_tag(text);
  return message.substr(0, message.find('\n'));
}

/// "rank 1: " on ranks other than 0 of a launch, so that each rank's error says whose it is.
std::string rank_prefix() {
  const int rank = graphed::log_rank();
  return rank == 0 ? std::string() : "rank " + std::to_string(rank) + ": ";
}

}  // namespace

int main(int argc, char** argv) {
  // LibTorch's own warnings (c10d's notes on lazy communicators, say) are for developers: `--debug torch`.
  graphed::compat::route_library_warnings([](const std::string& message) { graphed::log_debug("torch", message); });
  try {
    const graphed::cli::CommandLine command_line =
        graphed::cli::parse_command_line(std::vector<std::string>(argv + 1, argv + argc));
    if (command_line.early_output) {
      (command_line.exit_code == 0 ? std::cout : std::cerr) << *command_line.early_output;
      return command_line.exit_code;
    }
    for (const auto& channel : command_line.debug_channels) graphed::enable_debug_channel(channel);
    if (command_line.command == "check-config") return graphed::cli::run_check_config(command_line, std::cout);
    if (command_line.command == "train") return graphed::cli::run_train(command_line, std::cout);
    if (command_line.command == "bench") return graphed::cli::run_bench(command_line, std::cout);
    if (command_line.command == "generate") return graphed::cli::run_generate(command_line, std::cout);
    if (command_line.command == "serve") return graphed::cli::run_serve(command_line, std::cout);
    if (command_line.command == "report") return graphed::cli::run_report(command_line, std::cout);
    if (command_line.command == "tokenize") return graphed::cli::run_tokenize(command_line, std::cout);
    std::cerr << "error: command '" << command_line.command << "' is not implemented\n";
    return 1;
  } catch (const graphed::ConfigError& error) {
    if (graphed::log_rank() != 0) return 1;  // every rank of a launch finds the same configuration error
    if (error.details().size() > 1) {
      std::cerr << "error: " << error.what() << '\n';
      for (const auto& line : error.details()) std::cerr << "  " << line << '\n';
    } else {
      std::cerr << "error: " << error.what() << '\n';
    }
    return 1;
  } catch (const graphed::DistributedError& error) {  // its message names the rank
    std::cerr << "error: " << error.what() << '\n';
    return 1;
  } catch (const graphed::CaptureError& error) {  // capture speaks of graphs; the ways out by their flags
    std::cerr << "error: " << rank_prefix() << error.what() << '\n'
              << "  without CUDA graphs: --cuda-graph-impl none (training), --inference-cuda-graph-scope none "
                 "(generate, serve); --debug capture logs every capture\n";
    return 1;
  } catch (const graphed::Error& error) {
    std::cerr << "error: " << rank_prefix() << error.what() << '\n';
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "error: out of host memory; fix: lower --micro-batch-size or --seq-length, or use a smaller model\n";
    return 2;
  } catch (const c10::OutOfMemoryError&) {
    std::cerr << "error: out of GPU memory; fix: lower --micro-batch-size (raise --global-batch-size to keep the "
                 "tokens per iteration) or "
                 "--seq-length, or use a smaller model\n";
    return 1;
  } catch (const c10::Error& error) {  // a LibTorch failure no check caught: its first line, no backtrace
    std::cerr << "error: internal error in LibTorch (a bug in graphed: an input should have been refused earlier): "
              << first_line(error.what_without_backtrace())
              << "; fix: please report it with the command line that caused it\n";
    return 2;
  } catch (const std::exception& error) {
    std::cerr << "error: internal error (a bug in graphed): " << first_line(error.what())
              << "; fix: please report it with the command line that caused it\n";
    return 2;
  }
}
