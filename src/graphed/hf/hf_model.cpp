// hf/hf_model.cpp — see hf/hf_model.h. Loading is: read the config, find the weight files, read
// the first one, check every tensor name against the weight map (from the index when sharded), build the
// model in the target dtype on the device, then place each file's tensors and zero the biases no
// Hugging Face tensor fills.
#include "graphed/hf/hf_model.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>
#include <nlohmann/json.hpp>

#include "graphed/hf/hf_config.h"
#include "graphed/hf/hf_weight_map.h"
#include "graphed/util/error.h"
#include "graphed/util/file_system.h"
#include "graphed/util/safetensors.h"
#include "graphed/util/text.h"

namespace graphed::hf {
namespace {

using Tensors = std::map<std::string, at::Tensor>;

const char* const kSingleFile = "model.safetensors";
const char* const kIndexFile = "model.safetensors.index.json";
const char* const kMismatchFix =
    "; fix: check that config.json belongs to these weights (download the model folder again, or write it with "
    "save_pretrained)";

/// How the safetensors reader words a damaged file of a model folder.
SafetensorsWording hf_wording() {
  SafetensorsWording wording;
  wording.file = "model weights file";
  wording.unreadable_fix = "check that the model folder is complete and readable";
  wording.corrupt_fix =
      "the model folder's safetensors files are damaged; download them again or write them with "
      "save_pretrained";
  return wording;
}

std::string shape_text(at::IntArrayRef shape) {
  std::ostringstream text;
  text << shape;
  return text.str();
}

/// The weight files of a folder, and for a sharded checkpoint the tensors its index assigns to each.
struct WeightFiles {
  std::vector<std::string> files;                                 ///< paths, in the order they are read
  std::string index_path;                                         ///< empty for a single model.safetensors
  std::map<std::string, std::vector<std::string>> names_by_file;  ///< path -> tensor names (index only)
};

WeightFiles read_index(const std::string& folder) {
  WeightFiles result;
  result.index_path = join_path(folder, kIndexFile);
  std::string text;
  if (const int error = read_file(result.index_path, text)) {
    throw DataError("cannot read '" + result.index_path + "': " + std::strerror(error) +
                    "; fix: check that the model folder is complete and readable");
  }
  nlohmann::json index;
  try {
    index = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& error) {
    throw DataError("'" + result.index_path + "' is not JSON (" + without_library_tag(error.what()) +
                    "); fix: download the model folder again or write it with save_pretrained");
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    throw DataError("'" + result.index_path + "' has no object 'weight_map' (tensor name -> shard file); fix: " +
                    "download the model folder again or write it with save_pretrained");
  }
  for (const auto& [name, file] : index["weight_map"].items()) {
    const std::string shard = file.is_string() ? file.get<std::string>() : std::string();
    if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..") {
      throw DataError("'" + result.index_path + "' maps tensor '" + name + "' to " + file.dump() +
                      ", expected the name of a .safetensors file in the folder; fix: download the model folder again");
    }
    const std::string path = join_path(folder, shard);
    if (result.names_by_file.count(path) == 0) {
      if (!path_exists(path)) {
        throw DataError("'" + result.index_path + "' names shard '" + shard + "', which is missing from '" + folder +
                        "'; fix: download every file of the model folder");
      }
      result.files.push_back(path);
    }
    result.names_by_file[path].push_back(name);
  }
  if (result.files.empty()) {
    throw DataError("'" + result.index_path + "' maps no tensors; fix: download the model folder again");
  }
  std::sort(result.files.begin(), result.files.end());
  return result;
}

WeightFiles find_weight_files(const std::string& folder) {
  if (path_exists(join_path(folder, kIndexFile))) return read_index(folder);
  const std::string single = join_path(folder, kSingleFile);
  if (path_exists(single)) return WeightFiles{{single}, "", {}};
  const bool pickled = path_exists(join_path(folder, "pytorch_model.bin")) ||
                       path_exists(join_path(folder, "pytorch_model.bin.index.json"));
  throw DataError("model folder '" + folder + "' has neither " + kSingleFile + " nor " + kIndexFile +
                  (pickled ? " (only pytorch_model.bin, which graphed does not read)" : "") +
                  "; fix: write the model with save_pretrained(folder) (safetensors is its default), or download "
                  "its safetensors files");
}

/// Maps the names in the files to the weight map's: GPT-2 checkpoints from the hub lack the
/// "transformer." prefix save_pretrained writes (lm_head.weight has none either way).
class NameMapper {
 public:
  NameMapper(const HfConfig& config, const std::vector<std::string>& names) {
    const auto has = [&](const std::string& name) {
      return std::find(names.begin(), names.end(), name) != names.end();
    };
    add_prefix_ = config.architecture == HfArchitecture::kGpt2 && has("wte.weight") && !has("transformer.wte.weight");
  }
  std::string operator()(const std::string& name) const {
    return add_prefix_ && name != "lm_head.weight" ? "transformer." + name : name;
  }

 private:
  bool add_prefix_ = false;
};

/// Every tensor the map needs is there, and nothing else but ignorable buffers. `where` names the file
/// (or the index) the names come from.
void check_names(const HfConfig& config, const HfWeightMap& map, const std::set<std::string>& names,
                 const std::string& where) {
  std::vector<std::string> missing;
  std::set<std::string> expected;
  for (const auto& placement : map.placements) {
    expected.insert(placement.hf_name);
    if (names.count(placement.hf_name) == 0) missing.push_back(placement.hf_name);
  }
  const std::string model = std::string(to_string(config.architecture)) + " with this config.json";
  if (!missing.empty()) {
    throw DataError("'" + where + "' lacks " + counted(missing.size(), "tensor") + " that " + model +
                    " has: " + quoted_list(missing) + kMismatchFix);
  }
  std::vector<std::string> unexpected;
  for (const auto& name : names) {
    if (expected.count(name) == 0 && !is_ignored_hf_tensor(config, name)) unexpected.push_back(name);
  }
  if (!unexpected.empty()) {
    throw DataError("'" + where + "' has " + counted(unexpected.size(), "tensor") + " that " + model +
                    " does not: " + quoted_list(unexpected) + kMismatchFix);
  }
}

at::ScalarType parse_dtype_name(const std::string& name) {
  if (name == "bfloat16") return at::kBFloat16;
  if (name == "float16") return at::kHalf;
  if (name == "float64") return at::kDouble;
  return at::kFloat;  // read_hf_config accepts only these four
}

/// The weights' dtype when neither the caller nor config.json gives one: the embedding's, else the
/// first floating-point tensor's.
at::ScalarType weights_dtype(const Tensors& tensors, const NameMapper& canonical) {
  for (const auto& [name, tensor] : tensors) {
    const std::string hf_name = canonical(name);
    if (hf_name == "model.embed_tokens.weight" || hf_name == "transformer.wte.weight") return tensor.scalar_type();
  }
  for (const auto& [name, tensor] : tensors) {
    if (at::isFloatingType(tensor.scalar_type())) return tensor.scalar_type();
  }
  return at::kFloat;
}

/// The model, randomly initialized by its constructor without disturbing the global CPU generator,
/// then in eval mode without grad, in the dtype on the device.
model::GptModel build_model(const HfConfig& hf, const at::Device& device, at::ScalarType dtype) {
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  at::Tensor state;
  {
    std::lock_guard<std::mutex> lock(generator.mutex());
    state = generator.get_state();
  }
  model::GptModel model(hf.model, hf.moe_layers);
  {
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(state);
  }
  for (auto& parameter : model->parameters()) parameter.requires_grad_(false);
  model->eval();
  model->to(device, dtype);
  return model;
}

/// Copies tensors into the slices of the model's parameters the weight map names.
class WeightPlacer {
 public:
  WeightPlacer(model::GptModel& model, const HfWeightMap& map, const at::Device& device) : device_(device) {
    at::NoGradGuard no_grad;
    for (const auto& item : model->named_parameters()) parameters_.emplace(item.key(), item.value());
    std::map<std::string, int64_t> covered;  // elements each parameter gets from the map
    for (const auto& placement : map.placements) {
      placements_.emplace(placement.hf_name, &placement);
      GRAPHED_INTERNAL_ASSERT(parameters_.count(placement.parameter) == 1, "the weight map names parameter '",
                              placement.parameter, "', which the model lacks");
      int64_t elements = 1;
      for (const int64_t size : placement.hf_shape) elements *= size;
      covered[placement.parameter] += elements;
    }
    for (const auto& name : map.zero_parameters) {
      GRAPHED_INTERNAL_ASSERT(parameters_.count(name) == 1, "the weight map zeroes parameter '", name,
                              "', which the model lacks");
      parameters_.at(name).zero_();
      covered[name] = parameters_.at(name).numel();
    }
    for (const auto& [name, parameter] : parameters_) {
      GRAPHED_INTERNAL_ASSERT(covered[name] == parameter.numel(), "the weight map fills ", covered[name],
                              " elements of '", name, "', which has ", parameter.numel());
    }
  }

  /// Places every tensor of one file (names mapped by `canonical`); ignorable ones are skipped.
  void place(const Tensors& tensors, const std::string& file, const NameMapper& canonical, const HfConfig& config) {
    at::NoGradGuard no_grad;
    for (const auto& [name, tensor] : tensors) {
      const std::string hf_name = canonical(name);
      const auto found = placements_.find(hf_name);
      if (found == placements_.end()) {
        GRAPHED_INTERNAL_ASSERT(is_ignored_hf_tensor(config, hf_name), "tensor '", hf_name, "' passed the name check");
        continue;
      }
      copy(*found->second, tensor, name, file);
    }
  }

 private:
  void copy(const HfTensorPlacement& placement, const at::Tensor& tensor, const std::string& name,
            const std::string& file) const {
    if (!at::isFloatingType(tensor.scalar_type())) {
      throw DataError("tensor '" + name + "' in '" + file + "' has dtype " +
                      safetensors_dtype_name(tensor.scalar_type()) +
                      ", expected a floating-point one (F32, BF16, F16)" + kMismatchFix);
    }
    if (tensor.sizes() != at::IntArrayRef(placement.hf_shape)) {
      throw DataError("tensor '" + name + "' in '" + file + "' has shape " + shape_text(tensor.sizes()) +
                      ", but config.json implies " + shape_text(placement.hf_shape) + kMismatchFix);
    }
    at::Tensor source = placement.transpose ? tensor.t() : tensor;
    at::Tensor target = parameters_.at(placement.parameter);
    if (placement.expert >= 0) target = target.select(0, placement.expert);
    if (placement.transposed_target) target = target.transpose(-2, -1);
    target = target.narrow(0, placement.first_row, source.size(0));
    source = source.contiguous().to(target.scalar_type());
    if (device_.is_cuda()) {
      // Through pinned memory without blocking: the host reads the next tensor while this one copies.
      // The caching host allocator keeps the pinned block until the copy has finished.
      target.copy_(source.pin_memory(), /*non_blocking=*/true);
    } else {
      target.copy_(source);
    }
  }

  at::Device device_;
  std::map<std::string, at::Tensor> parameters_;
  std::map<std::string, const HfTensorPlacement*> placements_;
};

std::vector<std::string> keys_of(const Tensors& tensors) {
  std::vector<std::string> keys;
  for (const auto& item : tensors) keys.push_back(item.first);
  return keys;
}

/// A shard holds exactly the tensors its index assigns to it.
void check_shard(const WeightFiles& files, const std::string& file, const Tensors& tensors) {
  const std::vector<std::string>& listed = files.names_by_file.at(file);
  for (const auto& name : listed) {
    if (tensors.count(name) == 0) {
      throw DataError("'" + files.index_path + "' lists tensor '" + name + "' in '" + file + "', which does not hold " +
                      "it; fix: download the model folder again or write it with save_pretrained");
    }
  }
  if (tensors.size() != listed.size()) {
    const std::set<std::string> known(listed.begin(), listed.end());
    for (const auto& [name, tensor] : tensors) {
      if (known.count(name) == 0) {
        throw DataError("'" + file + "' holds tensor '" + name + "', which '" + files.index_path + "' does not list " +
                        "for it; fix: download the model folder again or write it with save_pretrained");
      }
    }
  }
}

}  // namespace

HfModel load_hf_model(const std::string& folder, const at::Device& device, std::optional<at::ScalarType> dtype) {
  const HfConfig config = read_hf_config(folder);
  const WeightFiles files = find_weight_files(folder);

  // 1. Names: from the index, or from the single file (read now; a sharded model reads its first shard).
  Tensors first = read_safetensors(files.files.front(), hf_wording());
  std::vector<std::string> names;
  if (files.index_path.empty()) {
    names = keys_of(first);
  } else {
    for (const auto& [file, listed] : files.names_by_file) names.insert(names.end(), listed.begin(), listed.end());
    check_shard(files, files.files.front(), first);
  }
  const NameMapper canonical(config, names);
  std::set<std::string> canonical_names;
  for (const auto& name : names) canonical_names.insert(canonical(name));
  const HfWeightMap map = hf_weight_map(config, expert_layout_of(names));
  check_names(config, map, canonical_names, files.index_path.empty() ? files.files.front() : files.index_path);

  // 2. The model, in the dtype asked for, else config.json's, else the weights'.
  const at::ScalarType target = dtype          ? *dtype
                                : config.dtype ? parse_dtype_name(*config.dtype)
                                               : weights_dtype(first, canonical);
  GRAPHED_CHECK(at::isFloatingType(target), DataError, "cannot load '", folder, "' in dtype ", c10::toString(target),
                ": a model's parameters need a floating-point dtype; fix: pass float32, bfloat16 or float16");
  HfModel result;
  result.architecture = to_string(config.architecture);
  result.config = config.model;
  result.model = build_model(config, device, target);
  result.eos_token_ids = config.eos_token_ids;
  result.bos_token_id = config.bos_token_id;
  result.dtype = target;

  // 3. The weights, one file at a time.
  WeightPlacer placer(result.model, map, device);
  placer.place(first, files.files.front(), canonical, config);
  first.clear();
  for (std::size_t i = 1; i < files.files.size(); ++i) {
    const Tensors tensors = read_safetensors(files.files[i], hf_wording());
    check_shard(files, files.files[i], tensors);
    placer.place(tensors, files.files[i], canonical, config);
  }
  return result;
}

}  // namespace graphed::hf
