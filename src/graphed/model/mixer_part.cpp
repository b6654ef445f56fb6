// model/mixer_part.cpp — see model/mixer_part.h: the attention mixer, the Mamba mixer and the absent one.
#include "graphed/model/mixer_part.h"

#include <vector>

#include "graphed/model/attention.h"
#include "graphed/model/layer_shapes.h"
#include "graphed/model/mamba_mixer.h"
#include "graphed/model/normed_part.h"
#include "graphed/util/error.h"

namespace graphed::model {
namespace {

/// A unit function of one hidden input and one hidden output.
capture::GraphableUnit::Function hidden_to_hidden(MixerPart& mixer) {
  return [&mixer](const std::vector<at::Tensor>& in) { return std::vector<at::Tensor>{mixer.forward(in.at(0))}; };
}

// Each mixer adds its update to the stream its norm hands back (Norm::forward_stream, or with the mixer's first
// linear Norm::stream_then_linear), so the fused path sums the stream's two gradients inside the norm's backward.

class AttentionMixer final : public NormedPart<MixerPart, Attention> {
 public:
  AttentionMixer(const config::ModelConfig& config, torch::nn::Module& layer, const Residual& residual)
      : NormedPart(layer, residual, "input_norm", layer_norm(config), "attention", Attention(attention_shape(config))) {
  }

  std::vector<LayerUnit> units() const override { return {LayerUnit::kAttention}; }
  capture::GraphableUnit::Function unit_forward(LayerUnit /*unit*/) override { return hidden_to_hidden(*this); }

  at::Tensor forward(const at::Tensor& hidden) override {
    const NormedLinear branch = module_->forward_from_stream(hidden, *norm_);
    return residual_.add(branch.stream, branch.output);
  }
  at::Tensor run(const at::Tensor& hidden, int64_t microbatch, const UnitRunners& runners) override {
    return runners[LayerUnit::kAttention]->run({hidden}, microbatch)[0];
  }
  at::Tensor forward_paged(const at::Tensor& hidden, const PagedBatch& batch, const LayerCache& cache) override {
    return module_->forward_paged(hidden, *norm_, batch, cache);
  }
  LayerCache allocate_paged_cache(int64_t blocks, int64_t block_size, int64_t /*state_slots*/,
                                  const at::TensorOptions& options) const override {
    return module_->allocate_paged_cache(blocks, block_size, options);
  }
};

/// The Mamba mixer over a paged step: the decode tokens together over their requests' state slots,
/// then each prefill run over its request's slot (states gathered, advanced and written back).
at::Tensor mamba_paged(const MambaMixer& mamba, const at::Tensor& normed, const PagedBatch& batch,
                       const LayerCache& cache) {
  // A request's first tokens start from zero states (its slot may hold an earlier request's).
  const auto run_over = [&](const at::Tensor& input, const at::Tensor& slots, const at::Tensor& valid, bool start) {
    LayerCache states;
    states.conv_state = cache.conv_state.index_select(0, slots);
    states.ssm_state = cache.ssm_state.index_select(0, slots);
    if (start) states.reset_recurrent_state();
    const at::Tensor output = mamba->forward_with_states(input, valid, states);
    cache.conv_state.index_copy_(0, slots, states.conv_state);
    cache.ssm_state.index_copy_(0, slots, states.ssm_state);
    return output;
  };
  const int64_t decode = batch.decode_tokens;
  GRAPHED_INTERNAL_ASSERT(!batch.segments.empty() || decode == batch.token_count(),
                          "a Mamba layer in a step of only paged tokens must have only decode tokens");
  std::vector<at::Tensor> parts;
  if (decode > 0) {  // [decode, 1, h]: one recurrence step each
    const at::Tensor input = normed[0].narrow(0, 0, decode).unsqueeze(1);
    parts.push_back(run_over(input, batch.state_slots.narrow(0, 0, decode), at::Tensor(), false).view({1, decode, -1}));
  }
  for (const PrefillSegment& segment : batch.segments) {
    const at::Tensor input = normed.narrow(1, segment.first_token, segment.length);
    const at::Tensor valid = at::ones({1, segment.length}, batch.slots.options().dtype(at::kBool));
    parts.push_back(
        run_over(input, batch.state_slots.narrow(0, segment.request, 1), valid, segment.first_position == 0));
  }
  return parts.size() == 1 ? parts[0] : at::cat(parts, 1);
}

class MambaPart final : public NormedPart<MixerPart, MambaMixer> {
 public:
  MambaPart(const config::ModelConfig& config, torch::nn::Module& layer, const Residual& residual)
      : NormedPart(layer, residual, "input_norm", layer_norm(config), "mamba", MambaMixer(mamba_shape(config))) {}

  std::vector<LayerUnit> units() const override { return {LayerUnit::kMamba}; }
  capture::GraphableUnit::Function unit_forward(LayerUnit /*unit*/) override { return hidden_to_hidden(*this); }

  at::Tensor forward(const at::Tensor& hidden) override {
    const kernels::NormedStream input = norm_->forward_stream(hidden);
    return residual_.add(input.stream, module_->forward(input.normed));
  }
  at::Tensor run(const at::Tensor& hidden, int64_t microbatch, const UnitRunners& runners) override {
    return runners[LayerUnit::kMamba]->run({hidden}, microbatch)[0];
  }
  /// The decode tokens as one batch over their state slots, each prefill run from its request's slot,
  /// continuing the state it left.
  at::Tensor forward_paged(const at::Tensor& hidden, const PagedBatch& batch, const LayerCache& cache) override {
    return hidden + mamba_paged(module_, norm_->forward_inference(hidden), batch, cache);
  }
  LayerCache allocate_paged_cache(int64_t /*blocks*/, int64_t /*block_size*/, int64_t state_slots,
                                  const at::TensorOptions& options) const override {
    return module_->allocate_states(state_slots, options);
  }
};

/// A layer without a mixer (hybrid '-' and 'E'): the hidden states pass on as they are.
class NoMixer final : public AbsentPart<MixerPart> {
 public:
  NoMixer() : AbsentPart("a mixer") {}

  at::Tensor forward(const at::Tensor& hidden) override { return hidden; }
  at::Tensor run(const at::Tensor& hidden, int64_t /*microbatch*/, const UnitRunners& /*runners*/) override {
    return hidden;
  }
  at::Tensor forward_paged(const at::Tensor& hidden, const PagedBatch& /*batch*/,
                           const LayerCache& /*cache*/) override {
    return hidden;
  }
  LayerCache allocate_paged_cache(int64_t /*blocks*/, int64_t /*block_size*/, int64_t /*state_slots*/,
                                  const at::TensorOptions& /*options*/) const override {
    return {};
  }
};

}  // namespace

std::unique_ptr<MixerPart> make_mixer_part(Mixer kind, const config::ModelConfig& config, torch::nn::Module& layer,
                                           const Residual& residual) {
  switch (kind) {
    case Mixer::kAttention: return std::make_unique<AttentionMixer>(config, layer, residual);
    case Mixer::kMamba: return std::make_unique<MambaPart>(config, layer, residual);
    case Mixer::kNone: return std::make_unique<NoMixer>();
  }
  GRAPHED_INTERNAL_ASSERT(false, "mixer kind ", static_cast<int>(kind));
  return nullptr;
}

}  // namespace graphed::model
