// infer/step_inputs.cpp — see infer/step_inputs.h.
#include "graphed/infer/step_inputs.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "graphed/kernels/prefill_tiles.h"
#include "graphed/runtime/device.h"
#include "graphed/util/error.h"

namespace graphed::infer {
namespace {

int64_t double_bits(double value) {
  int64_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

/// How far below its row's largest logit a token may be under min-p: p / p_max >= min_p where p ~ exp(logit / T).
double min_p_gap(const SamplingOptions& sampling) {
  if (sampling.min_p <= 0.0 || sampling.is_greedy()) return -std::numeric_limits<double>::infinity();
  return sampling.temperature * std::log(sampling.min_p);
}

}  // namespace

StepInputs::StepInputs(int64_t max_tokens, int64_t max_requests, int64_t table_width, int64_t hidden_size,
                       const at::TensorOptions& hidden_options, int64_t vocabulary)
    : max_tokens_(max_tokens), max_requests_(max_requests), table_width_(table_width), vocabulary_(vocabulary) {
  const auto device = hidden_options.device();
  const int64_t total = offset(kSectionCount, max_tokens, max_requests);
  for (at::Tensor& host : host_) {
    host = runtime::pinned_host_tensor({total}, at::kLong, device);
    host.zero_();
  }
  device_ = at::zeros({total}, hidden_options.dtype(at::kLong));
  hidden_ = at::zeros({1, max_tokens, hidden_size}, hidden_options);
  next_tokens_ = at::zeros({max_requests}, hidden_options.dtype(at::kLong));
  const int64_t top = std::min<int64_t>(kMaxTopLogprobs, vocabulary);
  logprobs_ = at::zeros({max_requests, 1 + top}, hidden_options.dtype(at::kFloat));
  top_ids_ = at::zeros({max_requests, top}, hidden_options.dtype(at::kLong));
  const int64_t words = (vocabulary + 31) / 32;
  mask_ = at::full({max_requests, words}, -1, hidden_options.dtype(at::kInt));  // every token allowed
  for (at::Tensor& host : host_masks_) host = runtime::pinned_host_tensor({max_requests, words}, at::kInt, device);
}

at::Tensor StepInputs::host_masks(int64_t requests) { return host_masks_[mask_loads_++ % 2].narrow(0, 0, requests); }

void StepInputs::copy_masks(const at::Tensor& host_masks) {
  mask_.narrow(0, 0, host_masks.size(0)).copy_(host_masks, /*non_blocking=*/true);
}

const LogitTables& StepInputs::logit_tables() {
  if (!tables_.defined()) tables_ = LogitTables::zeros(max_requests_ + 2, vocabulary_, device_.device());
  return tables_;
}

int64_t StepInputs::section_size(Section section, int64_t tokens, int64_t requests) const {
  if (section <= kTokenSource) return tokens;
  if (section < kBlockTables) return requests;
  if (section == kBlockTables) return requests * table_width_;
  if (section == kSplitCount) return 1;
  return kernels::kPrefillTileFields * kernels::max_prefill_tiles(tokens, requests);  // kTiles
}

int64_t StepInputs::offset(Section section, int64_t tokens, int64_t requests) const {
  int64_t start = 0;
  for (int s = 0; s < section; ++s) start += section_size(static_cast<Section>(s), tokens, requests);
  return start;
}

at::Tensor StepInputs::device_section(Section section, int64_t tokens, int64_t requests, int64_t count) const {
  return device_.narrow(0, offset(section, tokens, requests), count);
}

namespace {

/// The step's prompt chunks and padding tokens as the tile kernel's chunks: everything after the decode
/// tokens, which the split kernel takes. Padding tokens go by the padding request that owns them.
std::vector<kernels::PrefillChunk> prompt_chunks(const Schedule& schedule, const int64_t* token_request,
                                                 int64_t tokens) {
  std::vector<kernels::PrefillChunk> chunks;
  int64_t token = 0;
  for (std::size_t index = 0; index < schedule.chunks.size(); ++index) {
    const ScheduledChunk& chunk = schedule.chunks[index];
    if (!chunk.decode) chunks.push_back({token, static_cast<int64_t>(index), chunk.first, chunk.length, false});
    token += chunk.length;
  }
  for (; token < tokens; ++token) {
    if (!chunks.empty() && chunks.back().is_padding && chunks.back().request == token_request[token]) {
      ++chunks.back().length;
    } else {
      chunks.push_back({token, token_request[token], 0, 1, true});
    }
  }
  return chunks;
}

}  // namespace

void StepInputs::load(const Schedule& schedule, int64_t tokens, int64_t requests, int64_t block_size) {
  const int64_t real_requests = static_cast<int64_t>(schedule.chunks.size());
  const int64_t real_tokens = schedule.token_count();
  GRAPHED_INTERNAL_ASSERT(
      tokens <= max_tokens_ && requests <= max_requests_ && real_requests <= requests && real_tokens <= tokens,
      "a step of ", tokens, " tokens and ", requests, " requests");
  const at::Tensor& host = host_[loads_++ % 2];
  int64_t* at[kSectionCount];  // where each section starts in the host buffer
  int64_t start = 0;
  for (int s = 0; s < kSectionCount; ++s) {
    at[s] = host.data_ptr<int64_t>() + start;
    start += section_size(static_cast<Section>(s), tokens, requests);
  }
  int64_t token = 0;
  for (int64_t index = 0; index < real_requests; ++index) {
    const ScheduledChunk& chunk = schedule.chunks[static_cast<std::size_t>(index)];
    const Request& request = *chunk.request;
    const auto known = static_cast<int64_t>(request.tokens.size());
    for (int64_t i = 0; i < chunk.length; ++i, ++token) {
      const int64_t position = chunk.first + i;
      const bool drafted = chunk.draft >= 0;  // a proposed token (speculative decoding), not yet the request's
      GRAPHED_INTERNAL_ASSERT(drafted || position < known || (position == known && request.in_flight > 0),
                              "only the latest token of a request may be in flight");
      at[kTokens][token] = drafted            ? chunk.draft
                           : position < known ? request.tokens[static_cast<std::size_t>(position)]
                                              : 0;
      at[kTokenSource][token] = drafted || position < known ? -1 : request.in_flight_row;
      at[kPositions][token] = position;
      at[kTokenRequest][token] = index;
      at[kSlots][token] =
          request.blocks[static_cast<std::size_t>(position / block_size)] * block_size + position % block_size;
    }
    at[kLastToken][index] = token - 1;
    at[kStateSlots][index] = request.state_slot;
    const SamplingOptions& sampling = request.options.sampling;
    at[kTopK][index] = sampling.top_k;
    at[kSeedState][index] = static_cast<int64_t>(seed_state(sampling.seed));
    at[kDraw][index] = request.generated() + request.in_flight + chunk.draft_index;
    at[kTemperature][index] = double_bits(sampling.is_greedy() ? 0.0 : sampling.temperature);
    at[kTopP][index] = double_bits(sampling.top_p);
    const LogitControls& controls = request.options.controls;
    at[kControlSlot][index] = request.control_slot;
    at[kCountSlot][index] = chunk.samples && request.control_slot > 0 ? request.control_slot : max_requests_ + 1;
    at[kPresence][index] = double_bits(controls.presence_penalty);
    at[kFrequency][index] = double_bits(controls.frequency_penalty);
    at[kRepetition][index] = double_bits(controls.repetition_penalty);
    at[kMinPGap][index] = double_bits(min_p_gap(sampling));
    int64_t* table = at[kBlockTables] + index * table_width_;
    std::fill(table, table + table_width_, 0);
    std::copy(request.blocks.begin(), request.blocks.end(), table);
  }
  for (; token < tokens; ++token) {  // padding tokens: the padding block, position 0
    at[kTokens][token] = 0;
    at[kTokenSource][token] = -1;
    at[kPositions][token] = 0;
    at[kTokenRequest][token] = std::min(requests - 1, real_requests + (token - real_tokens));
    at[kSlots][token] = 0;
  }
  for (int64_t index = real_requests; index < requests; ++index) {  // padding requests: greedy, no blocks
    at[kLastToken][index] = std::min(tokens - 1, real_tokens + (index - real_requests));
    at[kStateSlots][index] = 0;
    at[kTopK][index] = 0;
    at[kSeedState][index] = 0;
    at[kDraw][index] = 0;
    at[kTemperature][index] = double_bits(0.0);
    at[kTopP][index] = double_bits(1.0);
    at[kControlSlot][index] = 0;
    at[kCountSlot][index] = max_requests_ + 1;
    at[kPresence][index] = double_bits(0.0);
    at[kFrequency][index] = double_bits(0.0);
    at[kRepetition][index] = double_bits(1.0);
    at[kMinPGap][index] = double_bits(-std::numeric_limits<double>::infinity());
    int64_t* table = at[kBlockTables] + index * table_width_;
    std::fill(table, table + table_width_, 0);
  }
  at[kSplitCount][0] = schedule.decode_count();
  kernels::fill_prefill_tiles(prompt_chunks(schedule, at[kTokenRequest], tokens),
                              kernels::max_prefill_tiles(tokens, requests), at[kTiles]);
  device_.narrow(0, 0, start).copy_(host.narrow(0, 0, start), /*non_blocking=*/true);
  block_size_ = block_size;
}

StepViews StepInputs::make_views(int64_t tokens, int64_t requests) const {
  StepViews views;
  model::PagedBatch& batch = views.batch;
  const auto section = [&](Section s, int64_t count) { return device_section(s, tokens, requests, count); };
  batch.context.positions = section(kPositions, tokens);
  batch.context.token_request = section(kTokenRequest, tokens);
  batch.context.block_tables = section(kBlockTables, requests * table_width_).view({requests, table_width_});
  batch.slots = section(kSlots, tokens);
  batch.state_slots = section(kStateSlots, requests);
  views.token_ids = section(kTokens, tokens).view({1, tokens});
  views.token_source = section(kTokenSource, tokens);
  views.previous_tokens = next_tokens_;
  views.last_token = section(kLastToken, requests);
  views.sampling.top_k = section(kTopK, requests);
  views.sampling.seed_state = section(kSeedState, requests);
  views.sampling.draw = section(kDraw, requests);
  views.sampling.temperature = section(kTemperature, requests).view(at::kDouble);
  views.sampling.top_p = section(kTopP, requests).view(at::kDouble);
  views.controls.slot = section(kControlSlot, requests);
  views.controls.count_slot = section(kCountSlot, requests);
  views.controls.presence = section(kPresence, requests).view(at::kDouble);
  views.controls.frequency = section(kFrequency, requests).view(at::kDouble);
  views.controls.repetition = section(kRepetition, requests).view(at::kDouble);
  views.controls.min_p_gap = section(kMinPGap, requests).view(at::kDouble);
  views.mask = mask_.narrow(0, 0, requests);
  views.logprobs = logprobs_.narrow(0, 0, requests);
  views.top_ids = top_ids_.narrow(0, 0, requests);
  views.hidden = hidden_.narrow(1, 0, tokens);
  if (tokens > requests) {  // a shape with prompt tokens: the decode tokens by the split kernel, the rest tiled
    batch.context.split_count = section(kSplitCount, 1);
    batch.context.split_bound = requests;
    batch.context.tiles =
        section(kTiles, section_size(kTiles, tokens, requests)).view({-1, kernels::kPrefillTileFields});
  }
  views.next_tokens = next_tokens_.narrow(0, 0, requests);
  return views;
}

ViewPlan plan_views(const Schedule& schedule, int64_t tokens, int64_t requests, bool paged_only, int64_t max_context) {
  ViewPlan plan;
  int64_t decode = 0;
  for (const auto& chunk : schedule.chunks) decode += chunk.decode ? 1 : 0;
  if (paged_only) {
    plan.max_context = max_context;
    plan.decode_tokens = tokens == requests ? tokens : decode;  // a decode-only shape: every token (padding too)
    return plan;
  }
  plan.decode_tokens = decode;
  int64_t longest = 1;
  int64_t token = 0;
  for (std::size_t index = 0; index < schedule.chunks.size(); ++index) {
    const ScheduledChunk& chunk = schedule.chunks[index];
    longest = std::max(longest, chunk.first + chunk.length);
    if (!chunk.decode) plan.segments.push_back({static_cast<int64_t>(index), token, chunk.length, chunk.first});
    token += chunk.length;
  }
  plan.max_context = longest;
  return plan;
}

StepViews StepInputs::views(const ViewPlan& plan, int64_t tokens, int64_t requests, bool paged_only) {
  // A graphed shape's views are kept (the buckets are few); an eager step's are made for it.
  StepViews views;
  if (paged_only) {
    auto found = shapes_.find({tokens, requests});
    if (found == shapes_.end())
      found = shapes_.emplace(std::make_pair(tokens, requests), make_views(tokens, requests)).first;
    views = found->second;
  } else {
    views = make_views(tokens, requests);
    views.batch.context.tiles = at::Tensor();  // the prompt chunks go to dense attention
    views.batch.segments = plan.segments;
  }
  views.tables = tables_;  // made after a shape's views may have been
  model::PagedBatch& batch = views.batch;
  batch.block_size = block_size_;
  batch.decode_tokens = plan.decode_tokens;
  batch.context.max_context = plan.max_context;
  return views;
}

at::Tensor StepInputs::packed_inputs(int64_t tokens, int64_t requests) const {
  GRAPHED_INTERNAL_ASSERT(tokens <= max_tokens_ && requests <= max_requests_, "a step of ", tokens, " tokens and ",
                          requests, " requests");
  return device_.narrow(0, 0, offset(kSectionCount, tokens, requests));
}

}  // namespace graphed::infer
