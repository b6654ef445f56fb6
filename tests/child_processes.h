// tests/child_processes.h — starts the graphed binary (GRAPHED_BINARY) as child processes, the way a
// user or torchrun would, with stdout and stderr in files, and waits for them under a time limit; a
// test may act while they run (send them a signal, say). For tests that need a real process: several
// ranks, signals.
#pragma once

#include <fcntl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "graphed/util/file_system.h"

extern char** environ;

namespace graphed::testing {

using Clock = std::chrono::steady_clock;

/// One process to start: the graphed binary's arguments, its extra environment ("NAME=value"), the
/// variables to drop from the inherited one, and its working folder.
struct ProcessSpec {
  std::vector<std::string> arguments;
  std::vector<std::string> environment;
  std::vector<std::string> unset;
  std::string folder;
};

struct ProcessResult {
  int exit_code = -1;  ///< -1 when it was killed (timeout) or died of a signal (then signal says which)
  int signal = 0;
  std::string out, err;
};

inline std::string read_text(const std::string& path) {
  std::string text;
  read_file(path, text);
  return text;
}

/// The inherited environment without the launch variables (a test run under torchrun must not leak
/// them), without `unset`, plus `extra`. One thread per rank on a 2-core machine: three processes at once.
inline std::vector<std::string> child_environment(const std::vector<std::string>& extra,
                                                  const std::vector<std::string>& unset) {
  static const std::vector<std::string> launch = {"WORLD_SIZE",  "RANK",        "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                                                  "MASTER_ADDR", "MASTER_PORT", "GROUP_RANK", "OMP_NUM_THREADS"};
  std::vector<std::string> result;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text = *entry;
    const std::string name = text.substr(0, text.find('='));
    const auto listed = [&](const std::vector<std::string>& names) {
      return std::find(names.begin(), names.end(), name) != names.end();
    };
    if (listed(launch) || listed(unset) || name.rfind("TORCHELASTIC_", 0) == 0) continue;
    result.push_back(text);
  }
  result.push_back("OMP_NUM_THREADS=1");
  for (const auto& entry : extra) {
    const std::string name = entry.substr(0, entry.find('='));
    if (std::find(unset.begin(), unset.end(), name) == unset.end()) result.push_back(entry);
  }
  return result;
}

/// What a test may do while the processes run, every 50 ms: their pids and the paths of their stdout.
using WhileRunning = std::function<void(const std::vector<pid_t>& pids, const std::vector<std::string>& out_paths)>;

/// Starts every process (fork, then execve at once), waits for all of them, and kills the rest after
/// `timeout` (a rank waiting for a peer that died would otherwise hang the test). stdout and stderr
/// go to files in each process's folder; their text comes back.
inline std::vector<ProcessResult> run_processes(const std::vector<ProcessSpec>& specs,
                                                std::chrono::seconds timeout = std::chrono::seconds(120),
                                                const WhileRunning& while_running = {}) {
  std::vector<pid_t> pids;
  std::vector<std::string> out_paths, err_paths;
  for (size_t i = 0; i < specs.size(); ++i) {
    const ProcessSpec& spec = specs[i];
    EXPECT_EQ(create_directories(spec.folder), 0) << spec.folder;
    out_paths.push_back(join_path(spec.folder, "stdout-" + std::to_string(i) + ".txt"));
    err_paths.push_back(join_path(spec.folder, "stderr-" + std::to_string(i) + ".txt"));
    // Everything execve needs is built before fork: the child only opens, dup2s and execs.
    std::vector<std::string> arguments = spec.arguments;
    arguments.insert(arguments.begin(), GRAPHED_BINARY);
    const std::vector<std::string> environment = child_environment(spec.environment, spec.unset);
    std::vector<char*> argv, envp;
    for (const auto& a : arguments) argv.push_back(const_cast<char*>(a.c_str()));
    for (const auto& e : environment) envp.push_back(const_cast<char*>(e.c_str()));
    argv.push_back(nullptr);
    envp.push_back(nullptr);
    const char* out_path = out_paths.back().c_str();
    const char* err_path = err_paths.back().c_str();
    const char* folder = spec.folder.c_str();
    const pid_t pid = fork();
    if (pid == 0) {
      const int out = ::open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int err = ::open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (out < 0 || err < 0 || ::dup2(out, 1) < 0 || ::dup2(err, 2) < 0 || ::chdir(folder) != 0) _exit(126);
      ::execve(argv[0], argv.data(), envp.data());
      _exit(127);
    }
    EXPECT_GT(pid, 0) << "fork failed: " << std::strerror(errno);
    pids.push_back(pid);
  }
  std::vector<ProcessResult> results(specs.size());
  std::vector<bool> done(specs.size(), false);
  size_t remaining = 0;
  for (size_t i = 0; i < pids.size(); ++i) {
    done[i] = pids[i] <= 0;  // fork failed: reported above
    if (!done[i]) ++remaining;
  }
  const auto deadline = Clock::now() + timeout;
  while (remaining > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (done[i]) continue;
      int status = 0;
      if (::waitpid(pids[i], &status, WNOHANG) == pids[i]) {
        results[i].exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        results[i].signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        done[i] = true;
        --remaining;
      }
    }
    if (remaining > 0 && Clock::now() > deadline) {
      ADD_FAILURE() << "the processes ran longer than " << timeout.count() << " s: killed";
      for (size_t i = 0; i < pids.size(); ++i) {
        if (done[i]) continue;
        ::kill(pids[i], SIGKILL);
        ::waitpid(pids[i], nullptr, 0);
        done[i] = true;
      }
      break;
    }
    if (remaining > 0 && while_running) while_running(pids, out_paths);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    results[i].out = read_text(out_paths[i]);
    results[i].err = read_text(err_paths[i]);
  }
  return results;
}

}  // namespace graphed::testing
