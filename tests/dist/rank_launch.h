// tests/dist/rank_launch.h — launching `graphed train` as several ranks on the CPU the way torchrun does
// (WORLD_SIZE, RANK, LOCAL_RANK, MASTER_ADDR, MASTER_PORT; rank 0 hosts the store, Gloo), and reading what
// the ranks wrote: the multi-process tests' shared helpers.
#pragma once

#include <unistd.h>

#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "child_processes.h"
#include "graphed/util/file_system.h"
#include "graphed/util/safetensors.h"

namespace graphed::testing {

/// `graphed train` of tiny on the CPU without dropout or evaluation, 8 samples an iteration in microbatches of 4,
/// every iteration logged to metrics.jsonl (in the process's folder).
inline const std::vector<std::string> kTinyCpuTrain = {"train",
                                                       "--preset",
                                                       "tiny",
                                                       "--mock-data",
                                                       "--device",
                                                       "cpu",
                                                       "--eval-iters",
                                                       "0",
                                                       "--sample-tokens",
                                                       "0",
                                                       "--hidden-dropout",
                                                       "0",
                                                       "--attention-dropout",
                                                       "0",
                                                       "--global-batch-size",
                                                       "8",
                                                       "--micro-batch-size",
                                                       "4",
                                                       "--log-interval",
                                                       "1",
                                                       "--metrics-file",
                                                       "metrics.jsonl"};

/// A port of its own for each test (index) and each test process (ctest runs them apart, maybe at once), below
/// Linux's ephemeral range (32768 on), where an outgoing connection of another test may hold any port.
inline int pick_port(int index) { return 29600 + static_cast<int>(::getpid() % 195) * 16 + index; }

/// The environment torchrun gives rank `rank` of `world` on this machine.
inline std::vector<std::string> rank_environment(int world, int rank, int port) {
  return {"WORLD_SIZE=" + std::to_string(world), "RANK=" + std::to_string(rank), "LOCAL_RANK=" + std::to_string(rank),
          "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port)};
}

/// `world` ranks of `graphed train arguments`, rank r working in folder/rank<r>.
inline std::vector<ProcessResult> launch(int world, int port, const std::vector<std::string>& arguments,
                                         const std::string& folder, const std::vector<std::string>& unset = {}) {
  std::vector<ProcessSpec> specs;
  for (int rank = 0; rank < world; ++rank) {
    specs.push_back(
        {arguments, rank_environment(world, rank, port), unset, join_path(folder, "rank" + std::to_string(rank))});
  }
  return run_processes(specs);
}

inline std::string describe(const std::vector<ProcessResult>& results) {
  std::ostringstream text;
  for (size_t i = 0; i < results.size(); ++i) {
    text << "--- process " << i << " exited " << results[i].exit_code << "\nstdout:\n"
         << results[i].out << "stderr:\n"
         << results[i].err;
  }
  return text.str();
}

/// The training losses of a --metrics-file, by iteration.
inline std::map<int64_t, double> losses_of(const std::string& metrics_file) {
  std::map<int64_t, double> losses;
  std::istringstream lines(read_text(metrics_file));
  for (std::string line; std::getline(lines, line);) {
    const auto record = nlohmann::json::parse(line);
    if (record.contains("loss")) losses[record.at("iteration").get<int64_t>()] = record.at("loss").get<double>();
  }
  return losses;
}

/// Every loss of `got` within `tolerance` (relative) of `expected`'s, at the same iterations.
inline void expect_losses_near(const std::map<int64_t, double>& got, const std::map<int64_t, double>& expected,
                               std::size_t count, double tolerance, const std::string& what) {
  ASSERT_EQ(expected.size(), count) << what;
  ASSERT_EQ(got.size(), count) << what;
  for (const auto& [iteration, loss] : expected) {
    ASSERT_TRUE(got.count(iteration)) << what << " iteration " << iteration;
    EXPECT_NEAR(got.at(iteration), loss, tolerance * std::abs(loss)) << what << " iteration " << iteration;
  }
}

/// A test whose processes work in a new temporary folder, removed when the test passes (kept to look into
/// when it fails). Base: ::testing::Test or a ::testing::TestWithParam.
template <typename Base>
class InTemporaryFolder : public Base {
 protected:
  explicit InTemporaryFolder(const std::string& prefix) : folder_(make_temporary_directory(prefix)) {}
  void SetUp() override { ASSERT_FALSE(folder_.empty()) << "cannot create a temporary folder"; }
  void TearDown() override {
    if (!this->HasFailure()) remove_all(folder_);
  }
  std::string folder_;
};

/// `trained` holds the same tensors as `reference` (names and shapes), each within `max_difference` of it in every
/// value.
inline void expect_tensors_near(const std::map<std::string, at::Tensor>& reference,
                                const std::map<std::string, at::Tensor>& trained, double max_difference,
                                const std::string& what) {
  ASSERT_EQ(trained.size(), reference.size()) << what;
  for (const auto& [name, tensor] : reference) {
    ASSERT_TRUE(trained.count(name)) << what << ": " << name;
    ASSERT_EQ(trained.at(name).sizes(), tensor.sizes()) << what << ": " << name;
    EXPECT_LE((trained.at(name).to(at::kDouble) - tensor.to(at::kDouble)).abs().max().item<double>(), max_difference)
        << what << ": " << name;
  }
}

/// The checkpoint file `trained` holds the same tensors as `reference_file`, each within `max_difference`.
inline void expect_checkpoint_near(const std::string& reference_file, const std::string& trained_file,
                                   double max_difference, const std::string& what) {
  expect_tensors_near(read_safetensors(reference_file), read_safetensors(trained_file), max_difference, what);
}

/// A checkpoint folder's optimizer state by name: optimizer.safetensors, with the Adam moments that the ranks stored
/// as runs of elements (optimizer_shards/rank<r>.safetensors, "<moment>@<first element>") put together whole, in the
/// shapes of the model file's parameters.
inline std::map<std::string, at::Tensor> read_optimizer_state(const std::string& checkpoint) {
  auto state = read_safetensors(join_path(checkpoint, "optimizer.safetensors"));
  const std::string runs = join_path(checkpoint, "optimizer_shards");
  if (!is_directory(runs)) return state;
  const auto model = read_safetensors(join_path(checkpoint, "model.safetensors"));
  std::map<std::string, int64_t> stored_elements;  // every element once: no run missing, none written twice
  for (const std::string& file : list_files(runs)) {
    for (const auto& [stored, values] : read_safetensors(join_path(runs, file))) {
      const std::string moment = stored.substr(0, stored.rfind('@'));
      const std::string parameter = moment.substr(0, moment.rfind('.'));
      at::Tensor& whole = state[moment];
      if (!whole.defined()) whole = at::zeros(model.at(parameter).sizes(), at::kFloat);
      whole.view({-1}).narrow(0, std::stoll(stored.substr(stored.rfind('@') + 1)), values.numel()).copy_(values);
      stored_elements[moment] += values.numel();
    }
  }
  for (const auto& [moment, elements] : stored_elements) EXPECT_EQ(elements, state.at(moment).numel()) << moment;
  return state;
}

inline std::vector<std::string> plus(std::vector<std::string> arguments, const std::vector<std::string>& more) {
  arguments.insert(arguments.end(), more.begin(), more.end());
  return arguments;
}

/// A checkpoint crosses layouts both ways: one process trains 20 iterations (saving at 10) while `world` ranks with
/// `layout_flags` train 10 and save; then one process resumes the ranks' checkpoint and the ranks resume one
/// process's, and both follow the uninterrupted run's iterations 11 to 20 within 1e-5. `arguments` decay the
/// learning rate over 20 iterations; `layout`: how the ranks are named in a failure.
inline void expect_checkpoint_crosses_layouts(const std::vector<std::string>& arguments,
                                              const std::vector<std::string>& layout_flags, const std::string& folder,
                                              int first_port, int second_port, const std::string& layout,
                                              int world = 2) {
  const std::string one_saves = join_path(folder, "one-saves");
  const std::string layout_saves = join_path(folder, "layout-saves");
  const std::vector<std::string> saving =
      plus(plus(arguments, layout_flags), {"--train-iters", "10", "--save", layout_saves});
  std::vector<ProcessSpec> first_specs = {
      {plus(arguments, {"--train-iters", "20", "--save", one_saves, "--save-interval", "10"}),
       {},
       {},
       join_path(folder, "one")}};
  for (int rank = 0; rank < world; ++rank) {
    first_specs.push_back(
        {saving, rank_environment(world, rank, first_port), {}, join_path(folder, "saved" + std::to_string(rank))});
  }
  const auto first = run_processes(first_specs);
  for (const auto& result : first) ASSERT_EQ(result.exit_code, 0) << describe(first);
  const std::vector<std::string> resuming =
      plus(plus(arguments, layout_flags), {"--train-iters", "20", "--load", join_path(one_saves, "iter_0000010")});
  std::vector<ProcessSpec> second_specs = {
      {plus(arguments, {"--train-iters", "20", "--load", layout_saves}), {}, {}, join_path(folder, "resumed-one")}};
  for (int rank = 0; rank < world; ++rank) {
    second_specs.push_back({resuming,
                            rank_environment(world, rank, second_port),
                            {},
                            join_path(folder, "resumed" + std::to_string(rank))});
  }
  const auto second = run_processes(second_specs);
  for (const auto& result : second) ASSERT_EQ(result.exit_code, 0) << describe(second);
  std::map<int64_t, double> later;
  for (const auto& [iteration, loss] : losses_of(join_path(folder, "one/metrics.jsonl"))) {
    if (iteration > 10) later[iteration] = loss;
  }
  expect_losses_near(losses_of(join_path(folder, "resumed-one/metrics.jsonl")), later, 10, 1e-5,
                     "one process from the checkpoint of the " + layout);
  expect_losses_near(losses_of(join_path(folder, "resumed0/metrics.jsonl")), later, 10, 1e-5,
                     layout + " from one process's checkpoint");
}

}  // namespace graphed::testing
