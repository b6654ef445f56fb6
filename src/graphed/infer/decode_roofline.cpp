// infer/decode_roofline.cpp — see infer/decode_roofline.h.
#include "graphed/infer/decode_roofline.h"

namespace graphed::infer {

double decode_bytes_per_step(model::GptModel& model, int64_t batch, int64_t context, double weight_bytes_saved) {
  const config::ModelConfig& config = model->config();
  double bytes = -weight_bytes_saved;
  for (const auto& item : model->named_parameters()) {
    const at::Tensor& parameter = item.value();
    const double size = static_cast<double>(parameter.numel() * parameter.element_size());
    const bool lookup_only = item.key() == "word_embeddings" && config.untie_embeddings_and_output_weights;
    bytes += lookup_only ? size * static_cast<double>(batch) / static_cast<double>(config.vocab_size) : size;
  }
  // One row's cache of each layer, up to the context (one block of `context` positions, one state slot),
  // sized on the CPU: keys and values are read once, the Mamba states read and written back.
  const auto options = at::TensorOptions().dtype(model->parameters().at(0).scalar_type());
  for (auto& layer : model->layers()) {
    const model::LayerCache row = layer->allocate_paged_cache(1, context, 1, options);
    const auto size = [](const at::Tensor& tensor) {
      return tensor.defined() ? static_cast<double>(tensor.nbytes()) : 0.0;
    };
    bytes += static_cast<double>(batch) *
             (size(row.key) + size(row.value) + 2.0 * (size(row.conv_state) + size(row.ssm_state)));
  }
  return bytes;
}

}  // namespace graphed::infer
