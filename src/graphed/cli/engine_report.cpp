// cli/engine_report.cpp — see cli/engine_report.h.
#include "graphed/cli/engine_report.h"

#include <algorithm>
#include <string>
#include <vector>

#include "graphed/util/text.h"

namespace graphed::cli {

nlohmann::json speculation_json(const infer::ServingEngine& engine, const infer::EngineStats& stats) {
  const infer::SpeculativeDecoding& speculation = engine.options().speculation;
  if (!speculation.enabled()) return nullptr;
  const double verifications = static_cast<double>(std::max<int64_t>(stats.verifications, 1));
  const double drafts = static_cast<double>(std::max<int64_t>(stats.draft_tokens, 1));
  nlohmann::json figures = {{"method", infer::to_string(speculation.method)},
                            {"num_speculative_tokens", speculation.num_tokens},
                            {"verifications", stats.verifications},
                            {"draft_tokens", stats.draft_tokens},
                            {"accepted_tokens", stats.accepted_tokens},
                            {"acceptance_rate", static_cast<double>(stats.accepted_tokens) / drafts},
                            {"mean_accepted_length", 1.0 + static_cast<double>(stats.accepted_tokens) / verifications}};
  if (speculation.method == infer::SpeculativeDecoding::Method::kNgram) {
    figures["prompt_lookup_max"] = speculation.lookup.longest;
    figures["prompt_lookup_min"] = speculation.lookup.shortest;
  } else if (speculation.draft) {
    const infer::ProposerWork work = speculation.draft->work();
    figures["model"] = speculation.draft_model;
    figures["draft_rounds"] = work.rounds;  // proposals for a step's speculating requests at once
    figures["draft_steps"] = work.steps;
    figures["draft_eager_steps"] = work.eager_steps;
    figures["draft_seconds"] = work.seconds;
  }
  if (speculation.governed) {  // infer/speculation_governor.h: tokens a second per running request, measured
    const infer::SpeculationGovernor& governor = engine.speculation_governor();
    figures["governor"] = {{"steps", governor.steps()},
                           {"steps_without_speculation", governor.plain_steps()},
                           {"speculative_rate", governor.speculative_rate()},
                           {"plain_rate", governor.plain_rate()}};
  }
  return figures;
}

std::string speculation_line(const infer::ServingEngine& engine, const infer::EngineStats& stats) {
  const infer::SpeculativeDecoding& speculation = engine.options().speculation;
  if (!speculation.enabled()) return "";
  const nlohmann::json figures = speculation_json(engine, stats);
  std::string line = std::string("speculation: ") + infer::to_string(speculation.method) + ", " +
                     std::to_string(stats.verifications) + " verifications, " + std::to_string(stats.accepted_tokens) +
                     " of " + std::to_string(stats.draft_tokens) + " proposed tokens kept (" +
                     fixed_decimals(100.0 * figures["acceptance_rate"].get<double>(), 1) + "%), " +
                     fixed_decimals(figures["mean_accepted_length"].get<double>(), 2) + " tokens per verification";
  if (figures.contains("draft_steps")) {
    line += "; the draft ran " + std::to_string(figures["draft_steps"].get<int64_t>()) + " steps in " +
            fixed_decimals(figures["draft_seconds"].get<double>(), 3) + " s";
  }
  if (figures.contains("governor") && figures["governor"]["steps"].get<int64_t>() > 0) {
    line += "; speculation off for " + std::to_string(figures["governor"]["steps_without_speculation"].get<int64_t>()) +
            " of " + std::to_string(figures["governor"]["steps"].get<int64_t>()) + " decode steps measured";
  }
  return line;
}

nlohmann::json engine_json(const infer::ServingEngine& engine, const infer::EngineStats& stats) {
  std::vector<std::string> buckets;
  for (const auto& bucket : engine.buckets()) buckets.push_back(bucket.describe());
  return {{"scope", config::to_string(engine.options().scope)},
          {"buckets", buckets},
          {"graphs", engine.graph_count()},
          {"capture_seconds", stats.capture_seconds},
          {"steps", stats.steps},
          {"graph_steps", stats.graph_steps},
          {"eager_steps", stats.eager_steps},
          {"unmatched_steps", stats.unmatched_steps},
          {"preemptions", stats.preemptions},
          {"shared_prompt_tokens", stats.shared_prompt_tokens},
          {"masked_steps", stats.masked_steps},
          {"mask_seconds", stats.mask_seconds},
          {"speculative", speculation_json(engine, stats)},
          {"prefix_sharing", engine.options().prefix_sharing},
          {"peak_blocks", stats.peak_blocks},
          {"blocks", engine.blocks_total()},
          {"block_size", engine.options().block_size},
          {"cache_bytes", engine.cache_bytes()},
          {"max_requests", engine.options().max_requests},
          {"max_tokens", engine.options().max_tokens},
          {"step_token_limit", engine.step_token_limit()},
          {"async_scheduling", engine.options().async_scheduling},
          {"step_seconds", stats.step_seconds},
          {"host_seconds", stats.host_seconds},
          {"device_seconds", stats.device_seconds}};
}

void print_engine_line(const infer::ServingEngine& engine, const infer::EngineStats& stats, std::ostream& out) {
  out << "engine: scope " << config::to_string(engine.options().scope) << ", " << stats.graph_steps
      << " steps from graphs, " << stats.eager_steps << " eager (" << stats.unmatched_steps
      << " no graph bucket served), " << counted(static_cast<std::size_t>(engine.graph_count()), "graph")
      << " captured in " << fixed_decimals(stats.capture_seconds, 2) << " s; up to " << engine.options().max_requests
      << " requests and " << engine.step_token_limit() << " tokens a step"
      << (engine.options().async_scheduling ? ", scheduled a step ahead" : ", each step read before the next") << ", "
      << stats.preemptions << " preemptions"
      << (engine.options().prefix_sharing ? ", " + std::to_string(stats.shared_prompt_tokens) + " prompt tokens shared"
                                          : "")
      << "; cache " << fixed_decimals(static_cast<double>(engine.cache_bytes()) / (1024.0 * 1024.0), 1) << " MiB, "
      << stats.peak_blocks << " of " << engine.blocks_total() << " blocks of " << engine.options().block_size
      << " positions used at most" << std::endl;
  if (engine.options().speculation.enabled()) out << speculation_line(engine, stats) << std::endl;
}

infer::EngineStats stats_since(const infer::EngineStats& after, const infer::EngineStats& before) {
  infer::EngineStats stats = after;
  stats.steps -= before.steps;
  stats.graph_steps -= before.graph_steps;
  stats.eager_steps -= before.eager_steps;
  stats.unmatched_steps -= before.unmatched_steps;
  stats.preemptions -= before.preemptions;
  stats.prompt_tokens -= before.prompt_tokens;
  stats.output_tokens -= before.output_tokens;
  stats.shared_prompt_tokens -= before.shared_prompt_tokens;
  stats.step_seconds -= before.step_seconds;
  stats.host_seconds -= before.host_seconds;
  stats.device_seconds -= before.device_seconds;
  stats.masked_steps -= before.masked_steps;
  stats.mask_seconds -= before.mask_seconds;
  stats.verifications -= before.verifications;
  stats.draft_tokens -= before.draft_tokens;
  stats.accepted_tokens -= before.accepted_tokens;
  return stats;
}

}  // namespace graphed::cli
