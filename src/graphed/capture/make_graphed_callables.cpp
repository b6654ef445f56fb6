// capture/make_graphed_callables.cpp — see capture/make_graphed_callables.h. Steps (research
// libtorch-graphs.md §1.2, §2, §3.7), one function each below: check the layout and the samples;
// make one state per (unit, microbatch) entry; give every entry its static inputs (shared per the buffer
// plan when reusing); warm up by walking the order (which finds unused inputs and parameters); capture
// by walking the order once more — forwards in unit order, backwards in reverse — all into one pool,
// so replaying in the same order is safe. The per-unit steps are in detail/unit_graphs.h.
#include "graphed/capture/make_graphed_callables.h"

#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "graphed/capture/capture_state.h"
#include "graphed/capture/detail/unit_graphs.h"
#include "graphed/capture/random_stream.h"
#include "graphed/capture/sample_buffer_plan.h"
#include "graphed/runtime/device.h"
#include "graphed/util/compat.h"
#include "graphed/util/error.h"
#include "graphed/util/text.h"

namespace graphed::capture {
namespace {

using detail::GraphedUnitState;
using States = std::vector<std::shared_ptr<GraphedUnitState>>;

/// Walks the order: for +c the chunk's units ascending, for -c descending, each with its microbatch.
void walk(const GraphedCallablesLayout& layout, const std::function<void(int64_t entry)>& forward,
          const std::function<void(int64_t entry)>& backward) {
  const std::size_t chunks = layout.layers_per_chunk.size();
  std::vector<int64_t> forwards(chunks, 0), backwards(chunks, 0);
  for (const int64_t value : layout.order) {
    const auto chunk = static_cast<std::size_t>(std::abs(value) - 1);
    const int64_t layers = layout.layers_per_chunk[chunk];
    if (value > 0) {
      for (int64_t l = 0; l < layers; ++l) forward(layout.entry(static_cast<int64_t>(chunk), forwards[chunk], l));
      ++forwards[chunk];
    } else {
      for (int64_t l = layers - 1; l >= 0; --l)
        backward(layout.entry(static_cast<int64_t>(chunk), backwards[chunk], l));
      ++backwards[chunk];
    }
  }
}

bool has_hooks(const at::Tensor& tensor) {
  return tensor.requires_grad() && !torch::autograd::impl::hooks(tensor).empty();
}

/// The (unit index, microbatch) of every entry.
std::vector<std::pair<std::size_t, int64_t>> entry_positions(const GraphedCallablesLayout& layout) {
  std::vector<std::pair<std::size_t, int64_t>> positions(
      static_cast<std::size_t>(layout.prefix.back() * layout.microbatches));
  for (std::size_t c = 0; c < layout.layers_per_chunk.size(); ++c) {
    for (int64_t mb = 0; mb < layout.microbatches; ++mb) {
      for (int64_t l = 0; l < layout.layers_per_chunk[c]; ++l) {
        positions[static_cast<std::size_t>(layout.entry(static_cast<int64_t>(c), mb, l))] = {
            static_cast<std::size_t>(layout.prefix[c] + l), mb};
      }
    }
  }
  return positions;
}

/// 1. The checks that need no tensors: units, warmup count, autocast cache, layout, chains, counts.
GraphedCallablesLayout check_call(const std::vector<GraphableUnit>& units, const std::vector<UnitArguments>& samples,
                                  const GraphedCallablesOptions& options) {
  GRAPHED_CHECK(!units.empty(), CaptureError, "make_graphed_callables got no units; fix: pass at least one unit");
  GRAPHED_CHECK(options.warmup_iterations >= 1, CaptureError,
                "make_graphed_callables needs warmup_iterations >= 1, got ", options.warmup_iterations,
                "; fix: warm up at least once (autotuning and lazy initialization must not "
                "happen inside a capture)");
  GRAPHED_CHECK(!compat::cuda_autocast_caching(), CaptureError,
                "make_graphed_callables was called under CUDA autocast with its cast cache on; fix: turn the cache "
                "off (compat::AutocastScope does) so that no cached cast outlives its capture");
  const auto unit_count = static_cast<int64_t>(units.size());
  GraphedCallablesLayout layout = graphed_callables_layout(unit_count, options.order, options.layers_per_chunk);
  GRAPHED_CHECK(options.chained_inputs.empty() || static_cast<int64_t>(options.chained_inputs.size()) == unit_count,
                CaptureError, "chained_inputs has ", options.chained_inputs.size(), " entries for ", unit_count,
                " units; fix: one flag per unit, or none");
  for (std::size_t c = 0; c < layout.layers_per_chunk.size(); ++c) {
    const auto first = static_cast<std::size_t>(layout.prefix[c]);
    GRAPHED_CHECK(options.chained_inputs.empty() || !options.chained_inputs[first], CaptureError, "unit ",
                  units[first].name, " is chained to its predecessor but is the first unit of chunk ", c + 1,
                  "; fix: chain only units that follow another unit of the same chunk");
  }
  const int64_t entries = unit_count * layout.microbatches;
  GRAPHED_CHECK(static_cast<int64_t>(samples.size()) == entries, CaptureError, "make_graphed_callables got ",
                samples.size(), " sample argument sets for ", unit_count, " units x ", layout.microbatches,
                " microbatches; fix: pass one per (unit, microbatch), chunk-major, then microbatch, then unit");
  return layout;
}

/// 2. One state per entry with its unit, parameters and checked sample signatures; returns the device.
at::Device make_states(States& states, const std::vector<GraphableUnit>& units,
                       const std::vector<UnitArguments>& samples, const GraphedCallablesLayout& layout,
                       const GraphedCallablesOptions& options) {
  const auto positions = entry_positions(layout);
  const std::set<const void*> shared = detail::shared_parameters(units);
  std::optional<at::Device> device;
  states.resize(positions.size());
  for (std::size_t e = 0; e < positions.size(); ++e) {
    const auto [u, microbatch] = positions[e];
    const GraphableUnit& unit = units[u];
    GRAPHED_INTERNAL_ASSERT(static_cast<bool>(unit.forward), "unit ", unit.name, " has no function");
    auto state = std::make_shared<GraphedUnitState>();
    state->unit = unit;
    state->microbatch = microbatch;
    state->slot = "microbatch " + std::to_string(microbatch);
    state->clone_parameter_grads = options.clone_parameter_grads;
    for (const auto& entry : samples[e].keyword) state->keyword_names.push_back(entry.first);
    for (std::size_t p = 0; p < unit.parameters.size(); ++p) {
      const std::string name =
          p < unit.parameter_names.size() ? unit.parameter_names[p] : "parameter " + std::to_string(p);
      const bool in_graph =
          options.accumulate_parameter_grads && shared.count(unit.parameters[p].unsafeGetTensorImpl()) == 0;
      GRAPHED_CHECK(!has_hooks(unit.parameters[p]), CaptureError, "unit ", state->label(), ": parameter '", name,
                    "' has a gradient hook; fix: remove it while capturing (register hooks after the capture)");
      GRAPHED_CHECK(!in_graph || !unit.parameters[p].requires_grad() || unit.parameters[p].grad().defined(),
                    CaptureError, "unit ", state->label(), ": parameter '", name,
                    "' has no grad tensor, but "
                    "accumulate_parameter_grads accumulates into it inside the graph; fix: allocate every "
                    "param.grad (zeros) before capturing, or turn accumulate_parameter_grads off");
      state->parameters.push_back(unit.parameters[p]);
      state->parameter_names.push_back(name);
      state->accumulate_in_graph.push_back(in_graph);
    }
    const std::vector<at::Tensor> flat = samples[e].flatten();
    const std::vector<std::string> names = samples[e].names(unit);
    for (std::size_t i = 0; i < flat.size(); ++i) {
      state->signatures.push_back(signature_of(state->label(), names[i], flat[i]));
      GRAPHED_CHECK(!has_hooks(flat[i]), CaptureError, "unit ", state->label(), ": sample argument '", names[i],
                    "' has a gradient hook; fix: graphs replay captured work and would skip it: register hooks "
                    "after the capture");
      GRAPHED_CHECK(flat[i].is_cuda(), CaptureError, "unit ", state->label(), ": sample argument '", names[i],
                    "' is on ", flat[i].device().str(),
                    "; fix: CUDA graphs capture CUDA work only: pass samples "
                    "on the GPU the unit runs on");
      if (!device) device = flat[i].device();
      GRAPHED_CHECK(flat[i].device() == *device, CaptureError, "unit ", state->label(), ": sample argument '", names[i],
                    "' is on ", flat[i].device().str(), " but others are on ", device->str(),
                    "; fix: one capture serves one device: put every sample on it");
    }
    states[e] = std::move(state);
  }
  GRAPHED_CHECK(device.has_value(), CaptureError,
                "make_graphed_callables got units without tensor arguments; fix: a graphed unit needs at least one "
                "input tensor");
  return *device;
}

/// Which buffer set each entry uses: its own, or (reusing) one shared per the schedule-aware plan.
std::vector<int64_t> plan_buffers(const States& states, const GraphedCallablesLayout& layout, bool reuse,
                                  int64_t* buffer_count) {
  const auto entries = static_cast<int64_t>(states.size());
  std::vector<int64_t> buffer_of(static_cast<std::size_t>(entries));
  if (!reuse) {
    for (int64_t e = 0; e < entries; ++e) buffer_of[static_cast<std::size_t>(e)] = e;
    *buffer_count = entries;
    return buffer_of;
  }
  std::map<std::string, int64_t> keys;
  std::vector<std::vector<int64_t>> signatures(layout.layers_per_chunk.size());
  for (std::size_t c = 0; c < layout.layers_per_chunk.size(); ++c) {
    for (int64_t l = 0; l < layout.layers_per_chunk[c]; ++l) {
      const auto& first = *states[static_cast<std::size_t>(layout.entry(static_cast<int64_t>(c), 0, l))];
      const std::string key = signature_key(first.signatures);
      for (int64_t mb = 1; mb < layout.microbatches; ++mb) {
        const auto& other = *states[static_cast<std::size_t>(layout.entry(static_cast<int64_t>(c), mb, l))];
        GRAPHED_CHECK(signature_key(other.signatures) == key, CaptureError, "unit ", other.label(),
                      " has samples of another shape, dtype or requires-grad than its microbatch 0; fix: with "
                      "reuse_buffers every microbatch of a unit takes the same argument signature");
      }
      signatures[c].push_back(keys.emplace(key, static_cast<int64_t>(keys.size())).first->second);
    }
  }
  const SampleBufferPlan plan =
      plan_sample_buffers(layout.order, layout.layers_per_chunk, layout.microbatches, signatures);
  *buffer_count = plan.unique_buffers;
  return plan.buffer_of_entry;
}

/// 3. Static inputs: the samples themselves (as leaves), shared per the buffer plan when reusing.
void assign_static_inputs(States& states, const std::vector<UnitArguments>& samples,
                          const GraphedCallablesLayout& layout, const GraphedCallablesOptions& options) {
  int64_t buffer_count = 0;
  const std::vector<int64_t> buffer_of = plan_buffers(states, layout, options.reuse_buffers, &buffer_count);
  std::vector<std::vector<at::Tensor>> buffers(static_cast<std::size_t>(buffer_count));
  std::set<const void*> taken;  // memory already serving as a buffer: a second buffer gets a copy
  for (std::size_t e = 0; e < states.size(); ++e) {
    auto& buffer = buffers[static_cast<std::size_t>(buffer_of[e])];
    if (buffer.empty()) {
      for (const at::Tensor& t : samples[e].flatten()) {
        const bool fresh = taken.insert(t.data_ptr()).second;
        buffer.push_back((fresh ? t.detach() : t.detach().clone()).requires_grad_(t.requires_grad()));
      }
    }
    GraphedUnitState& state = *states[e];
    state.static_inputs = buffer;
    state.needs_grad.clear();
    for (const at::Tensor& t : detail::surface_of(state)) state.needs_grad.push_back(t.requires_grad());
  }
}

/// 4. Warmup: walks the order warmup_iterations times on the static inputs, with autograd::grad.
void warm_up(States& states, const GraphedCallablesLayout& layout, const GraphedCallablesOptions& options,
             const at::Device& device) {
  WarmupScope warming(WarmupKind::kGradientProbe);
  std::vector<detail::WarmupPass> in_flight(states.size());
  for (int64_t iteration = 0; iteration < options.warmup_iterations; ++iteration) {
    const bool first = iteration == 0;
    walk(
        layout,
        [&](int64_t e) {
          GraphedUnitState& state = *states[static_cast<std::size_t>(e)];
          in_flight[static_cast<std::size_t>(e)] = detail::warm_up_forward(state, state.static_inputs, first, device);
        },
        [&](int64_t e) {
          detail::warm_up_backward(*states[static_cast<std::size_t>(e)],
                                   std::move(in_flight[static_cast<std::size_t>(e)]), first, options.allow_unused_input,
                                   device);
        });
  }
  runtime::synchronize(device);
}  // every warmup output and autograd graph is gone before the first capture

/// Chained entries: entry -> its predecessor (to), and predecessor -> entry (from).
struct Chains {
  std::map<int64_t, int64_t> to;
  std::map<int64_t, int64_t> from;
};

Chains chains_of(const GraphedCallablesLayout& layout, const GraphedCallablesOptions& options) {
  Chains chains;
  if (options.chained_inputs.empty()) return chains;
  for (std::size_t c = 0; c < layout.layers_per_chunk.size(); ++c) {
    for (int64_t mb = 0; mb < layout.microbatches; ++mb) {
      for (int64_t l = 1; l < layout.layers_per_chunk[c]; ++l) {
        if (!options.chained_inputs[static_cast<std::size_t>(layout.prefix[c] + l)]) continue;
        const int64_t e = layout.entry(static_cast<int64_t>(c), mb, l);
        const int64_t previous = layout.entry(static_cast<int64_t>(c), mb, l - 1);
        chains.to[e] = previous;
        chains.from[previous] = e;
      }
    }
  }
  return chains;
}

/// A chained entry's argument 0 becomes its predecessor's static output 0.
void bind_chained_input(GraphedUnitState& state, const GraphedUnitState& before) {
  GRAPHED_CHECK(!before.static_outputs.empty() && !state.static_inputs.empty(), CaptureError, "unit ", state.label(),
                " is chained to unit ", before.label(),
                " but one of them has no tensor to share; fix: chain only "
                "units whose argument 0 is the previous unit's output 0");
  const at::Tensor& output = before.static_outputs[0];
  const ArgumentSignature& want = state.signatures[0];
  GRAPHED_CHECK(output.sizes().equals(want.sizes) && output.scalar_type() == want.dtype, CaptureError, "unit ",
                state.label(), " is chained to unit ", before.label(), " but its argument 0 is ", describe(want),
                " while that unit's output 0 is ", describe(signature_of(before.label(), "output 0", output)),
                "; fix: chain only units whose argument 0 is the previous unit's output 0");
  state.static_inputs[0] = output.detach().requires_grad_(want.requires_grad);
}

/// The grad-output buffers of an entry's backward: the next chained unit's input-grad buffer for
/// output 0 (its backward writes the grad right there), else one shared per signature when reusing,
/// else a fresh one.
std::vector<at::Tensor> backward_seeds(const GraphedUnitState& state, const GraphedUnitState* next, bool reuse,
                                       std::map<std::string, at::Tensor>& shared) {
  std::vector<at::Tensor> seeds(state.static_outputs.size());
  for (std::size_t i = 0; i < state.static_outputs.size(); ++i) {
    const at::Tensor& o = state.static_outputs[i];
    if (!o.requires_grad()) continue;
    const at::Tensor* chained =
        next != nullptr && i == 0 && !next->static_grad_inputs.empty() ? &next->static_grad_inputs[0] : nullptr;
    if (chained && detail::can_hold_grad_of(*chained, o)) {
      seeds[i] = *chained;
    } else if (reuse) {
      const std::string key = signature_key({signature_of(state.label(), "output", o)});
      auto found = shared.find(key);
      if (found == shared.end()) found = shared.emplace(key, at::empty_like(o)).first;
      seeds[i] = found->second;
    } else {
      seeds[i] = at::empty_like(o);
    }
  }
  return seeds;
}

/// 5. Capture, walking the order once; then every state is finished.
void capture_all(States& states, const GraphedCallablesLayout& layout, const GraphedCallablesOptions& options,
                 const GraphPool& pool) {
  const Chains chains = chains_of(layout, options);
  std::map<std::string, at::Tensor> shared_grad_outputs;
  walk(
      layout,
      [&](int64_t e) {
        GraphedUnitState& state = *states[static_cast<std::size_t>(e)];
        if (const auto previous = chains.to.find(e); previous != chains.to.end()) {
          bind_chained_input(state, *states[static_cast<std::size_t>(previous->second)]);
        }
        detail::capture_forward(state, pool, options.mode);
      },
      [&](int64_t e) {
        GraphedUnitState& state = *states[static_cast<std::size_t>(e)];
        const auto next = chains.from.find(e);
        const GraphedUnitState* chained =
            next != chains.from.end() ? states[static_cast<std::size_t>(next->second)].get() : nullptr;
        const auto seeds = backward_seeds(state, chained, options.reuse_buffers, shared_grad_outputs);
        detail::capture_backward(state, seeds, pool, options.mode, options.retain_backward_graph);
        // Release the captured autograd graph (and with it the accumulate-grad nodes it created).
        detail::release_autograd_graph(state, options.reuse_buffers);
      });
  for (const auto& state : states) detail::finish_capture(*state);
}

}  // namespace

int64_t GraphedCallablesLayout::entry(int64_t chunk, int64_t microbatch, int64_t layer) const {
  const auto c = static_cast<std::size_t>(chunk);
  return prefix[c] * microbatches + microbatch * layers_per_chunk[c] + layer;
}

GraphedCallablesLayout graphed_callables_layout(int64_t units, const std::vector<int64_t>& order,
                                                const std::vector<int64_t>& layers_per_chunk) {
  GraphedCallablesLayout layout;
  layout.order = order.empty() ? std::vector<int64_t>{1, -1} : order;
  const std::string fix =
      "pass an order of +c (forward) and -c (backward) entries, 1-based chunk ids, each chunk's "
      "microbatches equally often forward and backward, no backward before its forward "
      "(capture/schedule_order.h builds one)";
  int64_t chunks = 0;
  for (const int64_t value : layout.order) {
    if (value == 0) throw CaptureError("order " + bracketed(layout.order) + " contains 0", fix);
    chunks = std::max(chunks, std::abs(value));
  }
  if (layers_per_chunk.empty()) {
    if (units % chunks != 0) {
      throw CaptureError(std::to_string(units) + " units cannot be split evenly over the " + std::to_string(chunks) +
                             " chunks of order " + bracketed(layout.order),
                         "pass layers_per_chunk");
    }
    layout.layers_per_chunk.assign(static_cast<std::size_t>(chunks), units / chunks);
  } else {
    layout.layers_per_chunk = layers_per_chunk;
  }
  int64_t total = 0;
  for (const int64_t layers : layout.layers_per_chunk) total += layers;
  if (static_cast<int64_t>(layout.layers_per_chunk.size()) != chunks || total != units) {
    throw CaptureError("layers_per_chunk has " + std::to_string(layout.layers_per_chunk.size()) + " chunks and " +
                           std::to_string(total) + " units, but the order has " + std::to_string(chunks) +
                           " chunks and there are " + std::to_string(units) + " units",
                       "give one count per chunk of the order, summing to the number of units");
  }
  if (layout.order.size() % static_cast<std::size_t>(2 * chunks) != 0) {
    throw CaptureError("order " + bracketed(layout.order) + " has " + std::to_string(layout.order.size()) +
                           " entries, not a multiple of 2 x " + std::to_string(chunks) + " chunks",
                       fix);
  }
  layout.microbatches = static_cast<int64_t>(layout.order.size()) / (2 * chunks);
  std::vector<int64_t> forwards(static_cast<std::size_t>(chunks), 0), backwards(static_cast<std::size_t>(chunks), 0);
  for (const int64_t value : layout.order) {
    const auto c = static_cast<std::size_t>(std::abs(value) - 1);
    if (value > 0 && ++forwards[c] > layout.microbatches) {
      throw CaptureError("order " + bracketed(layout.order) + " runs chunk " + std::to_string(value) +
                             " forward more than " + std::to_string(layout.microbatches) + " times",
                         fix);
    }
    if (value < 0 && ++backwards[c] > forwards[c]) {
      throw CaptureError("order " + bracketed(layout.order) + " runs a backward of chunk " + std::to_string(-value) +
                             " before its forward",
                         fix);
    }
  }
  layout.prefix.assign(static_cast<std::size_t>(chunks) + 1, 0);
  for (std::size_t c = 0; c < static_cast<std::size_t>(chunks); ++c) {
    layout.prefix[c + 1] = layout.prefix[c] + layout.layers_per_chunk[c];
  }
  return layout;
}

std::vector<std::shared_ptr<GraphedCallable>> make_graphed_callables(const std::vector<GraphableUnit>& units,
                                                                     const std::vector<UnitArguments>& sample_arguments,
                                                                     const GraphedCallablesOptions& options) {
  const GraphedCallablesLayout layout = check_call(units, sample_arguments, options);
  States states;
  const at::Device device = make_states(states, units, sample_arguments, layout, options);
  assign_static_inputs(states, sample_arguments, layout, options);
  // Warmup and capture run on the current stream, or a private one instead of the default stream.
  OffDefaultStream off_default_stream(device);
  const RandomStateSnapshot random_states(device);
  warm_up(states, layout, options, device);
  capture_all(states, layout, options, options.pool.is_shared() ? options.pool : GraphPool::create());
  random_states.restore();
  runtime::synchronize(device);
  std::vector<std::shared_ptr<GraphedCallable>> callables;
  callables.reserve(states.size());
  for (auto& state : states) callables.push_back(std::make_shared<GraphedCallable>(std::move(state)));
  return callables;
}

}  // namespace graphed::capture
