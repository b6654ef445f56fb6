// cli/engine_report.h — what the serving engine did, as generate and bench --serve report it: one JSON
// object (buckets, graphs, steps from graphs and eager, steps no bucket served, preemptions, blocks,
// cache bytes) and one text line.
#pragma once

#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "graphed/infer/serving_engine.h"

namespace graphed::cli {

/// Speculative decoding's settings and figures (proposed and kept tokens, acceptance rate, tokens per verification,
/// the drawn one included); null without speculation.
nlohmann::json speculation_json(const infer::ServingEngine& engine, const infer::EngineStats& stats);
/// The same as one text line ("" without speculation).
std::string speculation_line(const infer::ServingEngine& engine, const infer::EngineStats& stats);

/// `stats` defaults to the engine's own; bench passes the timed run's share.
nlohmann::json engine_json(const infer::ServingEngine& engine, const infer::EngineStats& stats);
void print_engine_line(const infer::ServingEngine& engine, const infer::EngineStats& stats, std::ostream& out);

/// after - before, field by field (peak blocks: after's).
infer::EngineStats stats_since(const infer::EngineStats& after, const infer::EngineStats& before);

}  // namespace graphed::cli
