// train/checkpoint.cpp — see train/checkpoint.h.
#include "graphed/train/checkpoint.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "graphed/capture/device.h"
#include "graphed/train/safetensors.h"
#include "graphed/util/build_info.h"
#include "graphed/util/error.h"
#include "graphed/util/file_system.h"

namespace graphed::train {
namespace {

/// Settings that change the model's parameters: a checkpoint must agree on all of them.
const char* const kArchitectureKeys[] = {
    "num_layers", "hidden_size", "num_attention_heads", "num_query_groups", "ffn_hidden_size", "vocab_size",
    "normalization", "swiglu", "position_embedding_type", "max_position_embeddings", "add_bias_linear",
    "untie_embeddings_and_output_weights", "num_experts", "moe_ffn_hidden_size",
    "moe_shared_expert_intermediate_size", "moe_layers"};

std::string iteration_folder(int64_t iteration) {
  std::ostringstream name;
  name << "iter_" << std::setw(7) << std::setfill('0') << iteration;
  return name.str();
}

/// Thrown inside save_checkpoint when a file-system call fails; becomes one DataError.
struct SaveFailure {
  std::string what;
  int error;
};

void check(int error, const std::string& what) {
  if (error != 0) throw SaveFailure{what, error};
}

void write_text_atomically(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary);
    file << text;
    if (!file) throw SaveFailure{"writing " + temporary, errno != 0 ? errno : EIO};
  }
  check(fsync_path(temporary), "syncing " + temporary);
  check(rename_path(temporary, path), "renaming " + temporary);
}

std::string flag_of(const std::string& key) {
  std::string flag = "--" + key;
  for (auto& c : flag) c = c == '_' ? '-' : c;
  return flag;
}

}  // namespace

std::string save_checkpoint(const std::string& save_dir, int64_t iteration, model::GptModel& model, AdamW& optimizer,
                            const config::RunConfig& config, const at::Device& device) {
  const std::string root = save_dir;
  const std::string final_dir = join_path(root, iteration_folder(iteration));
  const std::string temporary = join_path(root, iteration_folder(iteration) + ".tmp-" + std::to_string(::getpid()));
  try {
    check(create_directories(temporary), "creating " + temporary);
    std::vector<std::pair<std::string, at::Tensor>> parameters;
    for (const auto& item : model->named_parameters()) parameters.emplace_back(item.key(), item.value());
    write_safetensors(join_path(temporary, "model.safetensors"), parameters, {{"format", "pt"}});
    auto state = optimizer.state();
    for (auto& [name, tensor] : capture::rng_states(device)) state.emplace_back("rng." + name, tensor);
    write_safetensors(join_path(temporary, "optimizer.safetensors"), state, {{"format", "pt"}});
    const nlohmann::json trainer{{"iteration", iteration},
                                 {"graphed_version", graphed_version()},
                                 {"config", config::run_config_to_json(config)}};
    write_text_atomically(join_path(temporary, "trainer.json"), trainer.dump(2) + "\n");
    check(fsync_path(temporary), "syncing " + temporary);
    check(remove_all(final_dir), "replacing " + final_dir);
    check(rename_path(temporary, final_dir), "renaming " + temporary);
    fsync_path(root);
    write_text_atomically(join_path(root, "latest_checkpointed_iteration.txt"), std::to_string(iteration) + "\n");
  } catch (const SaveFailure& failure) {
    remove_all(temporary);
    throw DataError("cannot save the checkpoint to '" + save_dir + "': " + failure.what + ": " +
                    std::strerror(failure.error) + "; fix: check that the --save folder is writable and has space");
  } catch (...) {
    remove_all(temporary);
    throw;
  }
  return final_dir;
}

int64_t load_checkpoint(const std::string& load_dir, model::GptModel& model, AdamW& optimizer,
                        const config::RunConfig& config, const at::Device& device) {
  std::string dir = load_dir;
  if (!path_exists(dir)) {
    throw DataError("--load folder '" + load_dir + "' does not exist; fix: pass a --save folder of an earlier run");
  }
  if (!path_exists(join_path(dir, "trainer.json"))) {
    std::ifstream latest(join_path(dir, "latest_checkpointed_iteration.txt"));
    int64_t iteration = -1;
    if (!(latest >> iteration) || iteration < 0) {
      throw DataError("--load folder '" + load_dir + "' has neither trainer.json nor a readable "
                      "latest_checkpointed_iteration.txt; fix: pass a --save folder or one of its iter_* folders");
    }
    dir = join_path(dir, iteration_folder(iteration));
  }
  nlohmann::json trainer;
  try {
    std::ifstream file(join_path(dir, "trainer.json"));
    if (!file) throw DataError("");
    trainer = nlohmann::json::parse(file);
  } catch (const std::exception&) {
    throw DataError("checkpoint '" + dir + "' has a missing or corrupt trainer.json; fix: load an "
                    "earlier checkpoint, or start without --load");
  }
  const nlohmann::json here = config::run_config_to_json(config);
  std::vector<std::string> mismatches;
  for (const char* key : kArchitectureKeys) {
    const nlohmann::json saved = trainer["config"].value(key, nlohmann::json());
    if (saved != here[key]) mismatches.push_back(flag_of(key) + " is " + saved.dump() + " there, " + here[key].dump() + " here");
  }
  if (!mismatches.empty()) {
    std::string message = "checkpoint '" + dir + "' was saved by a different model: ";
    for (std::size_t i = 0; i < mismatches.size(); ++i) message += (i ? "; " : "") + mismatches[i];
    throw DataError(message + "; fix: pass the model flags of the run that saved it (its trainer.json lists them)");
  }
  const auto parameters = read_safetensors(join_path(dir, "model.safetensors"));
  const auto state = read_safetensors(join_path(dir, "optimizer.safetensors"));
  const auto copy_into = [&](const std::string& file, const std::map<std::string, at::Tensor>& saved,
                             const std::string& name, const at::Tensor& target) {
    const auto found = saved.find(name);
    if (found == saved.end()) {
      throw DataError("checkpoint file '" + join_path(dir, file) + "' has no tensor '" + name +
                      "'; fix: load a checkpoint saved by this model");
    }
    if (found->second.sizes() != target.sizes()) {
      std::ostringstream message;
      message << "tensor '" << name << "' in '" << join_path(dir, file) << "' has shape " << found->second.sizes()
              << ", the model expects " << target.sizes() << "; fix: load a checkpoint saved by this model";
      throw DataError(message.str());
    }
    at::NoGradGuard no_grad;
    target.copy_(found->second);
  };
  for (const auto& item : model->named_parameters()) copy_into("model.safetensors", parameters, item.key(), item.value());
  for (const auto& [name, tensor] : optimizer.state()) copy_into("optimizer.safetensors", state, name, tensor);
  std::map<std::string, at::Tensor> rng;
  for (const auto& [name, tensor] : state) {
    if (name.rfind("rng.", 0) == 0) rng.emplace(name.substr(4), tensor);
  }
  capture::restore_rng_states(device, rng);
  return trainer.at("iteration").get<int64_t>();
}

}  // namespace graphed::train
