// train/checkpoint.cpp — see train/checkpoint.h.
#include "graphed/train/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "graphed/capture/device.h"
#include "graphed/train/safetensors.h"
#include "graphed/util/build_info.h"
#include "graphed/util/error.h"

namespace graphed::train {
namespace {

namespace fs = std::filesystem;

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

void fsync_path(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

void write_text_atomically(const fs::path& path, const std::string& text) {
  const fs::path temporary = path.string() + ".tmp";
  {
    std::ofstream file(temporary);
    file << text;
    if (!file) throw DataError("cannot write '" + temporary.string() + "'; fix: check that the --save folder is writable");
  }
  fsync_path(temporary);
  fs::rename(temporary, path);
}

std::string flag_of(const std::string& key) {
  std::string flag = "--" + key;
  for (auto& c : flag) c = c == '_' ? '-' : c;
  return flag;
}

}  // namespace

std::string save_checkpoint(const std::string& save_dir, int64_t iteration, model::GptModel& model, AdamW& optimizer,
                            const config::RunConfig& config, const at::Device& device) {
  const fs::path root(save_dir);
  const fs::path final_dir = root / iteration_folder(iteration);
  const fs::path temporary = root / (iteration_folder(iteration) + ".tmp-" + std::to_string(::getpid()));
  try {
    fs::create_directories(temporary);
    std::vector<std::pair<std::string, at::Tensor>> parameters;
    for (const auto& item : model->named_parameters()) parameters.emplace_back(item.key(), item.value());
    write_safetensors((temporary / "model.safetensors").string(), parameters, {{"format", "pt"}});
    auto state = optimizer.state();
    for (auto& [name, tensor] : capture::rng_states(device)) state.emplace_back("rng." + name, tensor);
    write_safetensors((temporary / "optimizer.safetensors").string(), state, {{"format", "pt"}});
    const nlohmann::json trainer{{"iteration", iteration},
                                 {"graphed_version", graphed_version()},
                                 {"config", config::run_config_to_json(config)}};
    write_text_atomically(temporary / "trainer.json", trainer.dump(2) + "\n");
    fsync_path(temporary);
    if (fs::exists(final_dir)) fs::remove_all(final_dir);
    fs::rename(temporary, final_dir);
    fsync_path(root);
    write_text_atomically(root / "latest_checkpointed_iteration.txt", std::to_string(iteration) + "\n");
  } catch (const fs::filesystem_error& error) {
    std::error_code ignored;
    fs::remove_all(temporary, ignored);
    throw DataError("cannot save the checkpoint to '" + save_dir + "': " + error.code().message() +
                    "; fix: check that the --save folder is writable and has space");
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(temporary, ignored);
    throw;
  }
  return final_dir.string();
}

int64_t load_checkpoint(const std::string& load_dir, model::GptModel& model, AdamW& optimizer,
                        const config::RunConfig& config, const at::Device& device) {
  fs::path dir(load_dir);
  if (!fs::exists(dir)) {
    throw DataError("--load folder '" + load_dir + "' does not exist; fix: pass a --save folder of an earlier run");
  }
  if (!fs::exists(dir / "trainer.json")) {
    std::ifstream latest(dir / "latest_checkpointed_iteration.txt");
    int64_t iteration = -1;
    if (!(latest >> iteration) || iteration < 0) {
      throw DataError("--load folder '" + load_dir + "' has neither trainer.json nor a readable "
                      "latest_checkpointed_iteration.txt; fix: pass a --save folder or one of its iter_* folders");
    }
    dir /= iteration_folder(iteration);
  }
  nlohmann::json trainer;
  try {
    std::ifstream file(dir / "trainer.json");
    if (!file) throw DataError("");
    trainer = nlohmann::json::parse(file);
  } catch (const std::exception&) {
    throw DataError("checkpoint '" + dir.string() + "' has a missing or corrupt trainer.json; fix: load an "
                    "earlier checkpoint, or start without --load");
  }
  const nlohmann::json here = config::run_config_to_json(config);
  std::vector<std::string> mismatches;
  for (const char* key : kArchitectureKeys) {
    const nlohmann::json saved = trainer["config"].value(key, nlohmann::json());
    if (saved != here[key]) mismatches.push_back(flag_of(key) + " is " + saved.dump() + " there, " + here[key].dump() + " here");
  }
  if (!mismatches.empty()) {
    std::string message = "checkpoint '" + dir.string() + "' was saved by a different model: ";
    for (std::size_t i = 0; i < mismatches.size(); ++i) message += (i ? "; " : "") + mismatches[i];
    throw DataError(message + "; fix: pass the model flags of the run that saved it (its trainer.json lists them)");
  }
  const auto parameters = read_safetensors((dir / "model.safetensors").string());
  const auto state = read_safetensors((dir / "optimizer.safetensors").string());
  const auto copy_into = [&](const std::string& file, const std::map<std::string, at::Tensor>& saved,
                             const std::string& name, const at::Tensor& target) {
    const auto found = saved.find(name);
    if (found == saved.end()) {
      throw DataError("checkpoint file '" + (dir / file).string() + "' has no tensor '" + name +
                      "'; fix: load a checkpoint saved by this model");
    }
    if (found->second.sizes() != target.sizes()) {
      std::ostringstream message;
      message << "tensor '" << name << "' in '" << (dir / file).string() << "' has shape " << found->second.sizes()
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
