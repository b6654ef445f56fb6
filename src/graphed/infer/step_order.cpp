// infer/step_order.cpp — see infer/step_order.h. The header: the fields below in this order, then four values per
// segment (request, first token, length, first position), max requests of them, the unused ones zero.
#include "graphed/infer/step_order.h"

#include <algorithm>

#include "graphed/util/error.h"

namespace graphed::infer {
namespace {

enum Field : int64_t {
  kKind,
  kTokens,
  kPrefills,
  kDecodes,
  kMode,
  kFeatures,
  kMatched,
  kGraphed,
  kDecodeTokens,
  kMaxContext,
  kSegmentCount,
  kFieldCount
};
constexpr int64_t kSegmentFields = 4;

void check_header(const at::Tensor& header, int64_t max_requests) {
  GRAPHED_INTERNAL_ASSERT(max_requests >= 1, "a step order for engines of ", max_requests, " requests");
  GRAPHED_INTERNAL_ASSERT(header.device().is_cpu() && header.scalar_type() == at::kLong && header.is_contiguous() &&
                              header.dim() == 1 && header.numel() == step_order_length(max_requests),
                          "a step order header of ", header.numel(), " values (", header.toString(),
                          "), and engines of ", max_requests, " requests take ", step_order_length(max_requests));
}

bool is_flag(int64_t value) { return value == 0 || value == 1; }

/// The step's shape and mode, checked against what an engine of `max_requests` can launch.
StepKey decode_key(const int64_t* values, int64_t max_requests) {
  StepKey key;
  key.dimensions = {values[kTokens], values[kPrefills], values[kDecodes]};
  const BatchDimensions& shape = key.dimensions;
  GRAPHED_INTERNAL_ASSERT(shape.prefill_count >= 0 && shape.decode_count >= 0 && shape.request_count() >= 1 &&
                              shape.request_count() <= max_requests && shape.token_count >= shape.request_count(),
                          "a step order of shape ", shape.describe(), " for engines of ", max_requests, " requests");
  const int64_t mode = values[kMode];
  GRAPHED_INTERNAL_ASSERT(
      mode >= static_cast<int64_t>(SamplingMode::kGreedy) && mode <= static_cast<int64_t>(SamplingMode::kFiltered),
      "a step order of sampling mode ", mode);
  key.mode = static_cast<SamplingMode>(mode);
  const int64_t features = values[kFeatures];
  // A follower never masks: structured output is refused under tensor parallelism (the masks stay on one rank).
  GRAPHED_INTERNAL_ASSERT(features >= 0 && features < 4, "a step order of sampling features ", features);
  key.features = SamplingFeatures::from_code(static_cast<int>(features));
  return key;
}

/// The plan's segments, each within the step's tokens and requests; the unused fields zero.
std::vector<model::PrefillSegment> decode_segments(const int64_t* values, int64_t max_requests, const StepKey& key) {
  const int64_t count = values[kSegmentCount];
  const int64_t tokens = key.dimensions.token_count;
  const int64_t requests = key.dimensions.request_count();
  GRAPHED_INTERNAL_ASSERT(count >= 0 && count <= requests, "a step order of ", count, " segments and ", requests,
                          " requests");
  std::vector<model::PrefillSegment> segments;
  for (int64_t index = 0; index < max_requests; ++index) {
    const int64_t* field = values + kFieldCount + index * kSegmentFields;
    if (index >= count) {
      GRAPHED_INTERNAL_ASSERT(std::all_of(field, field + kSegmentFields, [](int64_t value) { return value == 0; }),
                              "a step order with values past its ", count, " segments");
      continue;
    }
    const model::PrefillSegment segment{field[0], field[1], field[2], field[3]};
    GRAPHED_INTERNAL_ASSERT(segment.request >= 0 && segment.request < requests && segment.first_token >= 0 &&
                                segment.length >= 1 && segment.first_token + segment.length <= tokens &&
                                segment.first_position >= 0,
                            "a step order's segment ", index, " (request ", segment.request, ", tokens ",
                            segment.first_token, " + ", segment.length, ") in a step of ", tokens, " tokens");
    segments.push_back(segment);
  }
  return segments;
}

}  // namespace

int64_t step_order_length(int64_t max_requests) { return kFieldCount + kSegmentFields * max_requests; }

void encode_step_order(const StepOrder& order, int64_t max_requests, at::Tensor& header) {
  check_header(header, max_requests);
  const auto count = static_cast<int64_t>(order.plan.segments.size());
  GRAPHED_INTERNAL_ASSERT(count <= max_requests, "a step order of ", count, " segments for engines of ", max_requests,
                          " requests");
  int64_t* values = header.data_ptr<int64_t>();
  std::fill(values, values + header.numel(), 0);
  values[kKind] = static_cast<int64_t>(order.kind);
  if (order.kind != StepOrder::Kind::kStep) return;
  values[kTokens] = order.key.dimensions.token_count;
  values[kPrefills] = order.key.dimensions.prefill_count;
  values[kDecodes] = order.key.dimensions.decode_count;
  values[kMode] = static_cast<int64_t>(order.key.mode);
  values[kFeatures] = order.key.features.code();
  values[kMatched] = order.matched ? 1 : 0;
  values[kGraphed] = order.graphed ? 1 : 0;
  values[kDecodeTokens] = order.plan.decode_tokens;
  values[kMaxContext] = order.plan.max_context;
  values[kSegmentCount] = count;
  for (int64_t index = 0; index < count; ++index) {
    const model::PrefillSegment& segment = order.plan.segments[static_cast<std::size_t>(index)];
    int64_t* field = values + kFieldCount + index * kSegmentFields;
    field[0] = segment.request;
    field[1] = segment.first_token;
    field[2] = segment.length;
    field[3] = segment.first_position;
  }
}

StepOrder decode_step_order(const at::Tensor& header, int64_t max_requests) {
  check_header(header, max_requests);
  const int64_t* values = header.data_ptr<int64_t>();
  StepOrder order;
  const int64_t kind = values[kKind];
  GRAPHED_INTERNAL_ASSERT(
      kind >= static_cast<int64_t>(StepOrder::Kind::kStep) && kind <= static_cast<int64_t>(StepOrder::Kind::kAbort),
      "a step order of kind ", kind);
  order.kind = static_cast<StepOrder::Kind>(kind);
  if (order.kind != StepOrder::Kind::kStep) return order;
  order.key = decode_key(values, max_requests);
  GRAPHED_INTERNAL_ASSERT(
      is_flag(values[kMatched]) && is_flag(values[kGraphed]) && (values[kGraphed] == 0 || values[kMatched] == 1),
      "a step order with matched ", values[kMatched], " and graphed ", values[kGraphed]);
  order.matched = values[kMatched] == 1;
  order.graphed = values[kGraphed] == 1;
  order.plan.decode_tokens = values[kDecodeTokens];
  order.plan.max_context = values[kMaxContext];
  GRAPHED_INTERNAL_ASSERT(
      order.plan.decode_tokens >= 0 && order.plan.decode_tokens <= order.key.dimensions.token_count &&
          order.plan.max_context >= 1,
      "a step order of ", order.plan.decode_tokens, " decode tokens and contexts up to ", order.plan.max_context);
  order.plan.segments = decode_segments(values, max_requests, order.key);
  return order;
}

}  // namespace graphed::infer
