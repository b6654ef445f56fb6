// train/checkpoint.cpp — see train/checkpoint.h.
#include "graphed/train/checkpoint.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <set>
#include <sstream>

#include "graphed/capture/random_states.h"
#include "graphed/capture/random_stream.h"
#include "graphed/util/build_info.h"
#include "graphed/util/error.h"
#include "graphed/util/file_system.h"
#include "graphed/util/logging.h"
#include "graphed/util/safetensors.h"
#include "graphed/util/text.h"

namespace graphed::train {

SafetensorsWording checkpoint_wording() {
  SafetensorsWording wording;
  wording.file = "checkpoint file";
  wording.unreadable_fix = "pass the folder of a complete checkpoint to --load";
  wording.corrupt_fix = "pass another checkpoint to --load (an earlier iter_* folder of the same --save folder, say)";
  wording.unwritable_fix = "check that the --save folder is writable and has space";
  wording.write_failed_fix = "check the space left in the --save folder";
  return wording;
}

namespace {

/// Settings that change the model's parameters: a checkpoint must agree on all of them. A key missing
/// from an older trainer.json (kv_channels, add_qkv_bias, qk_layernorm, the hybrid keys came later) reads as
/// its default.
const char* const kArchitectureKeys[] = {"num_layers",
                                         "hidden_size",
                                         "num_attention_heads",
                                         "num_query_groups",
                                         "kv_channels",
                                         "ffn_hidden_size",
                                         "vocab_size",
                                         "normalization",
                                         "qk_layernorm",
                                         "qk_layernorm_across_heads",
                                         "swiglu",
                                         "position_embedding_type",
                                         "max_position_embeddings",
                                         "add_bias_linear",
                                         "add_qkv_bias",
                                         "untie_embeddings_and_output_weights",
                                         "num_experts",
                                         "moe_ffn_hidden_size",
                                         "moe_shared_expert_intermediate_size",
                                         "moe_shared_expert_gate",
                                         "moe_layers",
                                         "is_hybrid_model",
                                         "hybrid_override_pattern",
                                         "mamba_state_dim",
                                         "mamba_head_dim",
                                         "mamba_num_groups",
                                         "mamba_num_heads",
                                         "mamba_conv_width"};

std::string iteration_folder(int64_t iteration) {
  std::ostringstream name;
  name << "iter_" << std::setw(7) << std::setfill('0') << iteration;
  return name.str();
}

/// After ".tmp-" in the name of the folder the ranks write their moment runs into (then rank 0's process id).
const char* const kShardsMarker = "optimizer-shards-";

/// Thrown inside save_checkpoint when a file-system call fails; becomes one DataError.
struct SaveFailure {
  std::string what;
  int error;
};

void check(int error, const std::string& what) {
  if (error != 0) throw SaveFailure{what, error};
}

void write_text_atomically(const std::string& path, const std::string& text) {
  std::string step;
  if (const int error = write_file_atomically(path, text, &step)) throw SaveFailure{step, error};
}

std::string flag_of(const std::string& key) {
  std::string flag = "--" + key;
  for (auto& c : flag) c = c == '_' ? '-' : c;
  return flag;
}

/// Removes the iter_*.tmp-PID (and iter_*.tmp-optimizer-shards-PID) folders in root of saves that cannot be running:
/// their process is gone (kill(pid, 0) fails with ESRCH), or it is this process, whose saves run one at a time. Folders
/// of other live processes are kept, as another run may be saving into the same folder right now; so is `kept` (the
/// ranks' moment runs this save moves in).
void remove_leftover_temporaries(const std::string& root, const std::string& kept) {
  for (const auto& name : list_directories(root)) {
    const auto marker = name.find(".tmp-");
    if (name.rfind("iter_", 0) != 0 || marker == std::string::npos || join_path(root, name) == kept) continue;
    std::string digits = name.substr(marker + 5);
    if (digits.rfind(kShardsMarker, 0) == 0) digits = digits.substr(std::string(kShardsMarker).size());
    if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const auto pid = static_cast<pid_t>(std::stol(digits));
    const bool is_own = pid == ::getpid();
    if (!is_own && (::kill(pid, 0) == 0 || errno != ESRCH)) continue;
    const std::string path = join_path(root, name);
    if (const int error = remove_all(path)) {
      log_warn("cannot remove '" + path + "', left by an interrupted save: " + std::strerror(error));
    } else {
      log_info("removed '" + path + "', left by an interrupted save (process " + digits +
               (is_own ? " is this one)" : " is gone)"));
    }
  }
}

/// "rng.<stream>.offset": where each model-parallel random stream stood (capture/random_stream.h). Only the
/// offset: each tensor rank's stream has its own seed, and all of them advance alike.
bool is_stream_offset(const std::string& name) {
  const std::string suffix = ".offset";
  return name.rfind("rng.", 0) == 0 && name.size() > suffix.size() + 4 &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<std::pair<std::string, at::Tensor>> stream_offsets(const at::Device& device) {
  std::vector<std::pair<std::string, at::Tensor>> offsets;
  for (const capture::RandomStream* stream : capture::random_streams(device)) {
    offsets.emplace_back("rng." + stream->name() + ".offset",
                         at::tensor(std::vector<int64_t>{static_cast<int64_t>(stream->offset())}, at::kLong));
  }
  return offsets;
}

}  // namespace

std::string checkpoint_folder(const std::string& save_dir, int64_t iteration) {
  return join_path(save_dir, iteration_folder(iteration));
}

std::string optimizer_shards_staging(const std::string& save_dir, int64_t iteration, int64_t writer_pid) {
  return join_path(save_dir, iteration_folder(iteration) + ".tmp-" + kShardsMarker + std::to_string(writer_pid));
}

std::string save_checkpoint(const std::string& save_dir, int64_t iteration, model::GptModel& model, AdamW& optimizer,
                            const config::RunConfig& config, const at::Device& device) {
  std::vector<std::pair<std::string, at::Tensor>> parameters;
  for (const auto& item : model->named_parameters()) parameters.emplace_back(item.key(), item.value());
  return save_checkpoint_tensors(save_dir, iteration, parameters, optimizer.state(), config, device);
}

std::string save_checkpoint_tensors(const std::string& save_dir, int64_t iteration,
                                    const std::vector<std::pair<std::string, at::Tensor>>& parameters,
                                    std::vector<std::pair<std::string, at::Tensor>> optimizer_state,
                                    const config::RunConfig& config, const at::Device& device,
                                    const std::string& optimizer_shards) {
  const std::string root = save_dir;
  const std::string final_dir = checkpoint_folder(root, iteration);
  const std::string temporary = join_path(root, iteration_folder(iteration) + ".tmp-" + std::to_string(::getpid()));
  try {
    remove_leftover_temporaries(root, optimizer_shards);
    check(create_directories(temporary), "creating " + temporary);
    write_safetensors(join_path(temporary, "model.safetensors"), parameters, {{"format", "pt"}}, checkpoint_wording());
    auto state = std::move(optimizer_state);
    for (auto& [name, tensor] : capture::rng_states(device)) state.emplace_back("rng." + name, tensor);
    for (auto& [name, offset] : stream_offsets(device)) state.emplace_back(name, offset);
    write_safetensors(join_path(temporary, "optimizer.safetensors"), state, {{"format", "pt"}}, checkpoint_wording());
    if (!optimizer_shards.empty()) {
      check(rename_path(optimizer_shards, join_path(temporary, kOptimizerShardsFolder)), "moving " + optimizer_shards);
    }
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
    if (!optimizer_shards.empty()) remove_all(optimizer_shards);
    throw DataError("cannot save the checkpoint to '" + save_dir + "': " + failure.what + ": " +
                    std::strerror(failure.error) + "; fix: check that the --save folder is writable and has space");
  } catch (...) {
    remove_all(temporary);
    if (!optimizer_shards.empty()) remove_all(optimizer_shards);
    throw;
  }
  return final_dir;
}

// Loading: every check runs before anything is copied into the model or optimizer.
namespace {

const char* const kLoadFix =
    "; fix: pass another checkpoint to --load (an earlier iter_* folder of the same --save folder, say)";
const char* const kModelFix = "; fix: load a checkpoint saved by this model";
const char* const kDeviceFix = "; fix: resume on the kind of device that saved it, or start without --load";

std::string shown(const nlohmann::json& value) { return json_excerpt(value); }
[[noreturn]] void corrupt(const std::string& path, const std::string& what) {
  throw_corrupt_safetensors(path, what, checkpoint_wording());  // the same words for trainer.json
}

/// The iteration written in a --save folder's latest_checkpointed_iteration.txt.
int64_t read_latest_iteration(const std::string& load_dir) {
  const std::string path = join_path(load_dir, "latest_checkpointed_iteration.txt");
  std::string text;
  if (read_file(path, text) != 0) {
    throw CheckpointError("--load folder '" + load_dir +
                          "' has neither trainer.json nor a readable "
                          "latest_checkpointed_iteration.txt; fix: pass a --save folder or one of its iter_* folders");
  }
  const auto first = text.find_first_not_of(" \t\r\n");
  const std::string digits =
      first == std::string::npos ? "" : text.substr(first, text.find_last_not_of(" \t\r\n") + 1 - first);
  if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) {
    throw CheckpointError("'" + path + "' holds " + shown(nlohmann::json(text)) +
                          ", expected an iteration number >= 0; fix: write the iteration of one of the iter_* "
                          "folders there, or pass that folder to --load");
  }
  return std::stoll(digits);
}

}  // namespace

std::optional<int64_t> latest_saved_iteration(const std::string& save_dir) {
  if (!path_exists(join_path(save_dir, "latest_checkpointed_iteration.txt"))) return std::nullopt;
  try {
    return read_latest_iteration(save_dir);
  } catch (const CheckpointError&) {
    return std::nullopt;
  }
}

namespace {

/// The folder holding trainer.json that load_dir names.
std::string find_checkpoint_folder(const std::string& load_dir) {
  if (!path_exists(load_dir)) {
    throw CheckpointError("--load folder '" + load_dir +
                          "' does not exist; fix: pass a --save folder of an earlier run");
  }
  if (path_exists(join_path(load_dir, "trainer.json"))) return load_dir;
  const int64_t iteration = read_latest_iteration(load_dir);
  const std::string folder = join_path(load_dir, iteration_folder(iteration));
  if (!is_directory(folder)) {
    throw CheckpointError("'" + join_path(load_dir, "latest_checkpointed_iteration.txt") + "' names iteration " +
                          std::to_string(iteration) + ", but '" + folder +
                          "' does not exist; fix: pass one of the "
                          "iter_* folders of '" +
                          load_dir + "' to --load, or write its iteration there");
  }
  return folder;
}

/// trainer.json's fields, each checked for its type and range.
CheckpointInfo parse_trainer_json(const std::string& folder, const std::string& path, const nlohmann::json& trainer) {
  if (!trainer.is_object()) {
    corrupt(path,
            "it is a JSON " + std::string(trainer.type_name()) + ", expected an object with 'iteration' and 'config'");
  }
  const auto field = [&](const char* name, const char* expected) -> const nlohmann::json& {
    const auto found = trainer.find(name);
    if (found == trainer.end()) corrupt(path, std::string("field '") + name + "' is missing, expected " + expected);
    return *found;
  };
  CheckpointInfo info;
  info.folder = folder;
  const nlohmann::json& iteration = field("iteration", "an integer >= 0");
  if (!iteration.is_number_unsigned() || iteration.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    corrupt(path, "field 'iteration' is " + shown(iteration) + ", expected an integer >= 0");
  }
  info.iteration = iteration.get<int64_t>();
  const char* const config_expected = "an object (the settings of the run that saved it)";
  info.config = field("config", config_expected);
  if (!info.config.is_object()) {
    corrupt(path, "field 'config' is " + shown(info.config) + ", expected " + config_expected);
  }
  if (const auto version = trainer.find("graphed_version"); version != trainer.end()) {
    if (!version->is_string()) corrupt(path, "field 'graphed_version' is " + shown(*version) + ", expected a string");
    info.graphed_version = version->get<std::string>();
  }
  return info;
}

void check_architecture(const CheckpointInfo& info, const config::RunConfig& config) {
  const nlohmann::json here = config::run_config_to_json(config);
  const nlohmann::json defaults = config::settings_to_json(config::Settings{});
  std::vector<std::string> mismatches;
  // With RoPE the positions shape no tensor: a checkpoint whose context is not this run's (saved before rule MC-20
  // raised a RoPE model's context to its --seq-length, or resumed at a longer --seq-length) loads.
  const bool learned_positions = config.model.position_embedding_type == config::PositionEmbedding::kLearnedAbsolute;
  for (const char* key : kArchitectureKeys) {
    if (!learned_positions && std::string(key) == "max_position_embeddings") continue;
    const nlohmann::json saved = info.config.value(key, defaults.value(key, nlohmann::json()));
    if (saved != here[key]) {
      mismatches.push_back(flag_of(key) + " is " + saved.dump() + " there, " + here[key].dump() + " here");
    }
  }
  if (mismatches.empty()) return;
  std::string message = "checkpoint '" + info.folder + "' was saved by a different model: ";
  for (std::size_t i = 0; i < mismatches.size(); ++i) message += (i ? "; " : "") + mismatches[i];
  throw CheckpointError(message + "; fix: pass the model flags of the run that saved it (its trainer.json lists them)");
}

using SavedTensors = std::map<std::string, at::Tensor>;
/// Names with the tensors whose dtype and shape the saved ones must have (and that they are copied into).
using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

/// Every expected tensor is in the file with the exact dtype and shape; `owner` names who expects it.
void check_expected(const std::string& file, const SavedTensors& saved, const NamedTensors& expected,
                    const std::string& owner) {
  std::vector<std::string> missing;
  for (const auto& [name, target] : expected) {
    if (saved.count(name) == 0) missing.push_back(name);
  }
  if (!missing.empty()) {
    throw CheckpointError("checkpoint file '" + file + "' lacks " + counted(missing.size(), "tensor") + " that " +
                          owner + " has: " + quoted_list(missing) + kModelFix);
  }
  for (const auto& [name, target] : expected) {
    const at::Tensor& found = saved.at(name);
    if (found.scalar_type() != target.scalar_type()) {
      throw CheckpointError("tensor '" + name + "' in '" + file + "' has dtype " +
                            safetensors_dtype_name(found.scalar_type()) + ", " + owner + " expects " +
                            safetensors_dtype_name(target.scalar_type()) + kModelFix);
    }
    if (found.sizes() != target.sizes()) {
      std::ostringstream message;
      message << "tensor '" << name << "' in '" << file << "' has shape " << found.sizes() << ", " << owner
              << " expects " << target.sizes() << kModelFix;
      throw CheckpointError(message.str());
    }
  }
}

/// Nothing in the file but the expected tensors (`known` names).
void check_no_extra(const std::string& file, const SavedTensors& saved, const std::set<std::string>& known,
                    const std::string& owner) {
  std::vector<std::string> extra;
  for (const auto& [name, tensor] : saved) {
    if (known.count(name) == 0) extra.push_back(name);
  }
  if (!extra.empty()) {
    throw CheckpointError("checkpoint file '" + file + "' has " + counted(extra.size(), "tensor") + " that " + owner +
                          " does not: " + quoted_list(extra) + kModelFix);
  }
}

/// A stream the checkpoint has no offset for (it was saved without one) starts from its seed.
void restore_stream_offsets(const SavedTensors& state, const at::Device& device) {
  for (capture::RandomStream* stream : capture::random_streams(device)) {
    const auto found = state.find("rng." + stream->name() + ".offset");
    if (found != state.end()) stream->set_offset(static_cast<uint64_t>(found->second.item<int64_t>()));
  }
}

/// The file holds the RNG state of every generator of this device (rng.<name>), with its dtype and
/// shape, and no other: a resumed run repeats the uninterrupted one only with all of them.
void check_rng_states(const std::string& file, const SavedTensors& saved, const NamedTensors& expected,
                      const at::Device& device) {
  std::set<std::string> known;
  for (const auto& [name, state] : expected) {
    known.insert(name);
    const auto found = saved.find(name);
    if (found == saved.end()) {
      throw CheckpointError("checkpoint file '" + file + "' has no RNG state '" + name + "' (device " + device.str() +
                            "), so the resumed run could not repeat the uninterrupted one" + kDeviceFix);
    }
    if (found->second.scalar_type() != state.scalar_type() || found->second.sizes() != state.sizes()) {
      std::ostringstream message;
      message << "RNG state '" << name << "' in '" << file << "' has dtype "
              << safetensors_dtype_name(found->second.scalar_type()) << " and shape " << found->second.sizes()
              << ", this device's generator has " << safetensors_dtype_name(state.scalar_type()) << " and "
              << state.sizes() << kDeviceFix;
      throw CheckpointError(message.str());
    }
  }
  for (const auto& [name, state] : saved) {
    if (name.rfind("rng.", 0) == 0 && known.count(name) == 0 && !is_stream_offset(name)) {
      throw CheckpointError("checkpoint file '" + file + "' has RNG state '" + name + "', which device " +
                            device.str() + " does not have, so the resumed run could not repeat the uninterrupted one" +
                            kDeviceFix);
    }
  }
}

std::set<std::string> names_of(const NamedTensors& a, const NamedTensors& b = {}) {
  std::set<std::string> names;
  for (const auto& item : a) names.insert(item.first);
  for (const auto& item : b) names.insert(item.first);
  return names;
}

void copy_into(const SavedTensors& saved, const NamedTensors& targets) {
  at::NoGradGuard no_grad;
  for (const auto& [name, target] : targets) target.copy_(saved.at(name));
}

/// The optional state's names (OptionalState): FP8 delayed scaling's.
bool is_optional_state(const std::string& name) { return name.rfind("fp8.", 0) == 0; }

/// Copies each optional tensor the checkpoint has with its dtype and shape; lists the others as missing.
void copy_optional(const SavedTensors& saved, OptionalState& optional) {
  at::NoGradGuard no_grad;
  optional.missing.clear();
  for (const auto& [name, target] : optional.tensors) {
    GRAPHED_INTERNAL_ASSERT(is_optional_state(name), "optional checkpoint state named '", name, "'");
    const auto found = saved.find(name);
    if (found == saved.end() || found->second.scalar_type() != target.scalar_type() ||
        found->second.sizes() != target.sizes()) {
      optional.missing.push_back(name);
      continue;
    }
    target.copy_(found->second);
  }
}

}  // namespace

CheckpointInfo read_checkpoint_info(const std::string& load_dir) {
  const std::string folder = find_checkpoint_folder(load_dir);
  const std::string path = join_path(folder, "trainer.json");
  std::string text;
  if (const int error = read_file(path, text)) {
    throw CheckpointError("cannot read checkpoint file '" + path + "': " + std::strerror(error) + kLoadFix);
  }
  nlohmann::json trainer;
  try {
    trainer = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& error) {
    corrupt(path, "it is not JSON (syntax error at byte " + std::to_string(error.byte) + ")");
  } catch (const nlohmann::json::exception& error) {  // a number beyond a double (1e999)
    corrupt(path, "it is not JSON (" + without_library_tag(error.what()) + ")");
  }
  return parse_trainer_json(folder, path, trainer);
}

int64_t load_checkpoint(const std::string& load_dir, model::GptModel& model, AdamW& optimizer,
                        const config::RunConfig& config, const at::Device& device, bool own_stage,
                        OptionalState* optional) {
  NamedTensors model_parameters;
  for (const auto& item : model->named_parameters()) model_parameters.emplace_back(item.key(), item.value());
  return load_checkpoint_tensors(load_dir, model_parameters, optimizer.state(), config, device, own_stage, optional);
}

int64_t load_checkpoint_tensors(const std::string& load_dir, const NamedTensors& model_parameters,
                                const NamedTensors& optimizer_state, const config::RunConfig& config,
                                const at::Device& device, bool own_stage, OptionalState* optional,
                                const std::function<void(const std::string& folder)>& after_checks) {
  const CheckpointInfo info = read_checkpoint_info(load_dir);
  check_architecture(info, config);
  const std::string model_file = join_path(info.folder, "model.safetensors");
  const std::string optimizer_file = join_path(info.folder, "optimizer.safetensors");
  const SavedTensors parameters = read_safetensors(model_file, checkpoint_wording());
  const SavedTensors state = read_safetensors(optimizer_file, checkpoint_wording());

  NamedTensors rng_states;
  for (auto& [name, tensor] : capture::rng_states(device)) rng_states.emplace_back("rng." + name, tensor);

  // Check everything first, so that a refused checkpoint leaves the model and optimizer as they were.
  check_expected(model_file, parameters, model_parameters, "the model");
  check_no_extra(model_file, parameters, names_of(model_parameters), "the model");
  // The device's RNG states before the optimizer's tensors: a checkpoint of another kind of device (its
  // optimizer keeps the learning rate in another dtype) is named as such, not as another model's.
  check_rng_states(optimizer_file, state, rng_states, device);
  check_expected(optimizer_file, state, optimizer_state, "the optimizer");
  std::set<std::string> known = names_of(optimizer_state, rng_states);
  if (own_stage) {  // the other pipeline stages' optimizer state: the model's parameters, not this optimizer's
    for (const auto& [name, tensor] : model_parameters) {
      for (const char* part : {".exp_avg", ".exp_avg_sq", ".step"}) known.insert(name + part);
    }
  }
  for (const auto& [name, tensor] : state) {  // another layout's model-parallel stream: kept only where one runs
    if (is_stream_offset(name) || is_optional_state(name)) known.insert(name);
  }
  check_no_extra(optimizer_file, state, known, "the optimizer");
  if (after_checks) after_checks(info.folder);

  copy_into(parameters, model_parameters);
  copy_into(state, optimizer_state);
  if (optional != nullptr) copy_optional(state, *optional);
  std::map<std::string, at::Tensor> rng;
  for (const auto& [name, tensor] : rng_states) rng.emplace(name.substr(4), state.at(name));
  capture::restore_rng_states(device, rng);
  restore_stream_offsets(state, device);
  return info.iteration;
}

int64_t load_model_weights(const std::string& load_dir, model::GptModel& model, const config::RunConfig& config) {
  const CheckpointInfo info = read_checkpoint_info(load_dir);
  check_architecture(info, config);
  const std::string model_file = join_path(info.folder, "model.safetensors");
  const SavedTensors parameters =
      read_safetensors(model_file, checkpoint_wording());  // train's words, for generate too
  NamedTensors model_parameters;
  for (const auto& item : model->named_parameters()) model_parameters.emplace_back(item.key(), item.value());
  check_expected(model_file, parameters, model_parameters, "the model");
  check_no_extra(model_file, parameters, names_of(model_parameters), "the model");
  copy_into(parameters, model_parameters);
  return info.iteration;
}

}  // namespace graphed::train
