// infer/decode_step.cpp — see infer/decode_step.h.
#include "graphed/infer/decode_step.h"

#include <algorithm>

#include "graphed/util/error.h"

namespace graphed::infer {
namespace {

/// Cache slots past each position: slots [L] against positions [rows, s] -> [rows, 1, s, L].
at::Tensor blocked_slots(const at::Tensor& positions, int64_t max_sequence) {
  const at::Tensor slots = at::arange(max_sequence, positions.options());
  return slots.view({1, 1, 1, max_sequence}) > positions.unsqueeze(1).unsqueeze(-1);
}

/// Prompt tokens per chunk, so that a chunk's scores [rows, heads, chunk, L] stay near 2^26 floats.
int64_t prefill_chunk(int64_t rows, int64_t heads, int64_t max_sequence) {
  const int64_t budget = (int64_t{1} << 26) / std::max<int64_t>(1, rows * heads * max_sequence);
  return std::clamp<int64_t>(budget, 16, 1024);
}

}  // namespace

DecodeState DecodeState::create(int64_t rows, const KvCache& cache, int64_t max_new_tokens, int64_t hidden_size,
                                const at::TensorOptions& hidden_options) {
  const auto device = hidden_options.device();
  const auto longs = at::TensorOptions().dtype(at::kLong).device(device);
  DecodeState state;
  state.rows = rows;
  state.tokens = at::zeros({rows, 1}, longs);
  state.positions = at::zeros({rows, 1}, longs);
  state.step = at::zeros({1}, longs);
  state.generated = at::zeros({rows, std::max<int64_t>(1, max_new_tokens)}, longs);
  state.hidden = at::zeros({rows, 1, hidden_size}, hidden_options);
  state.blocked = at::zeros({rows, 1, 1, cache.max_sequence()}, longs.dtype(at::kBool));
  state.cache = cache.rows(rows);
  return state;
}

void DecodeState::reset() {
  tokens.zero_();
  positions.zero_();
  step.zero_();
}

DecodeStep::DecodeStep(model::GptModel model, SamplingOptions sampling)
    : model_(std::move(model)),
      config_(model_->config()),
      layer_count_(static_cast<int64_t>(model_->layers().size())),
      sampling_(sampling) {}

void DecodeStep::begin(DecodeState& state) {
  state.hidden.copy_(model_->embed_at(state.tokens, state.positions));
  state.blocked.copy_(blocked_slots(state.positions, state.blocked.size(-1)));
}

at::Tensor DecodeStep::layer(int64_t index, const at::Tensor& hidden, DecodeState& state) {
  auto& layer = model_->layers()[static_cast<std::size_t>(index)];
  return layer->forward_cached(hidden, state.positions, state.blocked, state.cache[static_cast<std::size_t>(index)]);
}

void DecodeStep::finish(const at::Tensor& hidden, DecodeState& state) {
  const at::Tensor logits = model_->decode_logits(hidden).view({state.rows, -1});
  const at::Tensor next = sample_tokens(logits, sampling_, state.step);
  state.generated.index_copy_(1, state.step, next.view({state.rows, 1}));
  state.tokens.copy_(next.view({state.rows, 1}));
  state.positions.add_(1);
  state.step.add_(1);
}

void DecodeStep::run(DecodeState& state) {
  begin(state);
  at::Tensor hidden = state.hidden;
  for (int64_t i = 0; i < layer_count(); ++i) hidden = layer(i, hidden, state);
  finish(hidden, state);
}

void DecodeStep::prefill(DecodeState& state, const std::vector<std::vector<int64_t>>& prompts) {
  GRAPHED_INTERNAL_ASSERT(static_cast<int64_t>(prompts.size()) == state.rows, "one prompt per row");
  const int64_t max_sequence = state.blocked.size(-1);
  int64_t longest = 0;
  std::vector<int64_t> last_index;
  for (const auto& prompt : prompts) {
    GRAPHED_INTERNAL_ASSERT(!prompt.empty() && static_cast<int64_t>(prompt.size()) <= max_sequence, "prompt length");
    longest = std::max<int64_t>(longest, static_cast<int64_t>(prompt.size()));
    last_index.push_back(static_cast<int64_t>(prompt.size()) - 1);
  }
  at::Tensor host_tokens = at::zeros({state.rows, longest}, at::kLong);
  for (int64_t row = 0; row < state.rows; ++row) {
    const auto& prompt = prompts[static_cast<std::size_t>(row)];
    std::copy(prompt.begin(), prompt.end(), host_tokens[row].data_ptr<int64_t>());
  }
  const auto device = state.tokens.device();
  const at::Tensor tokens = host_tokens.to(device);
  const at::Tensor last = at::tensor(last_index, at::kLong).to(device);
  const at::Tensor positions = at::arange(longest, state.tokens.options()).unsqueeze(0).expand({state.rows, longest});
  const int64_t chunk = prefill_chunk(state.rows, config_.num_attention_heads, max_sequence);
  for (const auto& layer_cache : state.cache) layer_cache.reset_recurrent_state();  // Mamba starts from zero
  std::vector<at::Tensor> outputs;
  for (int64_t start = 0; start < longest; start += chunk) {
    const int64_t length = std::min(chunk, longest - start);
    const at::Tensor chunk_positions = positions.narrow(1, start, length).contiguous();
    const at::Tensor blocked = blocked_slots(chunk_positions, max_sequence);
    const at::Tensor valid = chunk_positions <= last.view({state.rows, 1});  // prompt tokens, not padding
    at::Tensor hidden = model_->embed_at(tokens.narrow(1, start, length), chunk_positions);
    for (int64_t i = 0; i < layer_count(); ++i) {
      auto& layer = model_->layers()[static_cast<std::size_t>(i)];
      hidden = layer->forward_cached(hidden, chunk_positions, blocked, state.cache[static_cast<std::size_t>(i)], valid);
    }
    outputs.push_back(hidden);
  }
  const at::Tensor all = outputs.size() == 1 ? outputs[0] : at::cat(outputs, 1);  // [rows, longest, h]
  const at::Tensor final_hidden = all.gather(1, last.view({state.rows, 1, 1}).expand({state.rows, 1, all.size(2)}));
  state.step.zero_();
  state.positions.copy_(last.view({state.rows, 1}));
  finish(final_hidden, state);
}

}  // namespace graphed::infer
