// serve/mirrored_engine.cpp — see serve/mirrored_engine.h. A batch is JSON: the commands in order, a
// request's options field by field.
#include "graphed/serve/mirrored_engine.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "graphed/util/error.h"

namespace graphed::serve {
namespace {

nlohmann::json to_json(const EngineCommand& command) {
  nlohmann::json item{{"kind", static_cast<int>(command.kind)}};
  if (command.kind == EngineCommand::Kind::kCancel) item["id"] = command.id;
  if (command.kind != EngineCommand::Kind::kAdd) return item;
  const infer::SamplingOptions& sampling = command.options.sampling;
  item["prompt"] = command.prompt;
  item["temperature"] = sampling.temperature;
  item["top_k"] = sampling.top_k;
  item["top_p"] = sampling.top_p;
  item["seed"] = sampling.seed;
  item["vocabulary"] = sampling.vocabulary;
  item["max_new_tokens"] = command.options.max_new_tokens;
  item["stop_tokens"] = command.options.stop_tokens;
  return item;
}

EngineCommand from_json(const nlohmann::json& item) {
  EngineCommand command;
  command.kind = static_cast<EngineCommand::Kind>(item.at("kind").get<int>());
  if (command.kind == EngineCommand::Kind::kCancel) command.id = item.at("id").get<int64_t>();
  if (command.kind != EngineCommand::Kind::kAdd) return command;
  infer::SamplingOptions& sampling = command.options.sampling;
  command.prompt = item.at("prompt").get<std::vector<int64_t>>();
  sampling.temperature = item.at("temperature").get<double>();
  sampling.top_k = item.at("top_k").get<int64_t>();
  sampling.top_p = item.at("top_p").get<double>();
  sampling.seed = item.at("seed").get<uint64_t>();
  sampling.vocabulary = item.at("vocabulary").get<int64_t>();
  command.options.max_new_tokens = item.at("max_new_tokens").get<int64_t>();
  command.options.stop_tokens = item.at("stop_tokens").get<std::vector<int64_t>>();
  return command;
}

std::string key_of(int64_t sequence, int64_t rank) {
  return "serve/" + std::to_string(sequence) + "/" + std::to_string(rank);
}

}  // namespace

CommandChannel::CommandChannel(c10::intrusive_ptr<c10d::Store> store, int64_t rank, int64_t ranks)
    : store_(std::move(store)), rank_(rank), ranks_(ranks) {}

void CommandChannel::publish(const std::vector<EngineCommand>& commands) {
  nlohmann::json batch = nlohmann::json::array();
  for (const EngineCommand& command : commands) batch.push_back(to_json(command));
  const std::string text = batch.dump();
  const std::vector<uint8_t> bytes(text.begin(), text.end());
  for (int64_t rank = 1; rank < ranks_; ++rank) store_->set(key_of(sequence_, rank), bytes);
  ++sequence_;
}

std::vector<EngineCommand> CommandChannel::receive() {
  const std::string key = key_of(sequence_++, rank_);
  // Polls rather than waits: an idle server may send nothing for longer than any store timeout, and a
  // timed-out wait stays registered on LibTorch 1.13's store. A lost store throws out of check().
  auto pause = std::chrono::microseconds(20);
  while (!store_->check({key})) {
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(10000));
  }
  const std::vector<uint8_t> bytes = store_->get(key);
  store_->deleteKey(key);
  std::vector<EngineCommand> commands;
  for (const auto& item : nlohmann::json::parse(bytes.begin(), bytes.end())) commands.push_back(from_json(item));
  return commands;
}

int64_t MirroredEngineCalls::add_request(std::vector<int64_t> prompt, infer::RequestOptions options) {
  EngineCommand command;
  command.kind = EngineCommand::Kind::kAdd;
  command.prompt = prompt;
  command.options = options;
  pending_.push_back(std::move(command));
  return engine_.add_request(std::move(prompt), std::move(options));
}

void MirroredEngineCalls::cancel(int64_t id) {
  EngineCommand command;
  command.kind = EngineCommand::Kind::kCancel;
  command.id = id;
  pending_.push_back(command);
  engine_.cancel(id);
}

infer::StepResult MirroredEngineCalls::step() {
  publish_with(EngineCommand::Kind::kStep);
  return engine_.step();
}

void MirroredEngineCalls::publish_with(EngineCommand::Kind last) {
  EngineCommand command;
  command.kind = last;
  pending_.push_back(command);
  channel_.publish(pending_);
  pending_.clear();
}

void MirroredEngineCalls::abort() { publish_with(EngineCommand::Kind::kAbort); }

void MirroredEngineCalls::finish() { publish_with(EngineCommand::Kind::kStop); }

bool follow_engine(infer::ServingEngine& engine, CommandChannel& channel) {
  for (;;) {
    for (EngineCommand& command : channel.receive()) {
      switch (command.kind) {
        case EngineCommand::Kind::kAdd:
          engine.add_request(std::move(command.prompt), std::move(command.options));
          break;
        case EngineCommand::Kind::kCancel: engine.cancel(command.id); break;
        case EngineCommand::Kind::kStep: engine.step(); break;
        case EngineCommand::Kind::kStop: return true;
        case EngineCommand::Kind::kAbort: return false;
      }
    }
  }
}

}  // namespace graphed::serve
