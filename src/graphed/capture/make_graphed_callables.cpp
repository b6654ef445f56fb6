// capture/make_graphed_callables.cpp — see capture/make_graphed_callables.h. Steps (research
// libtorch-graphs.md §1.2, §2, §3.7): check the layout and the samples; give every entry its static
// inputs (shared per the buffer plan when reusing); warm up by walking the order with autograd::grad
// (which finds unused inputs and parameters); capture by walking the order once more — forwards in
// unit order, backwards in reverse — all into one pool, so replaying in the same order is safe.
#include "graphed/capture/make_graphed_callables.h"

#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "graphed/capture/capture_state.h"
#include "graphed/capture/device.h"
#include "graphed/capture/sample_buffer_plan.h"
#include "graphed/util/compat.h"
#include "graphed/util/error.h"
#include "graphed/util/text.h"

namespace graphed::capture {
namespace {

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
      for (int64_t l = layers - 1; l >= 0; --l) backward(layout.entry(static_cast<int64_t>(chunk), backwards[chunk], l));
      ++backwards[chunk];
    }
  }
}

/// The surface (arguments, then parameters) of a state.
std::vector<at::Tensor> surface_of(const GraphedUnitState& state) {
  std::vector<at::Tensor> surface = state.static_inputs;
  surface.insert(surface.end(), state.parameters.begin(), state.parameters.end());
  return surface;
}

bool has_hooks(const at::Tensor& tensor) {
  return tensor.requires_grad() && !torch::autograd::impl::hooks(tensor).empty();
}

/// Outputs needing grad and the surface entries to differentiate, for one entry.
struct GradientProblem {
  std::vector<at::Tensor> outputs;
  std::vector<std::size_t> output_index;
  std::vector<at::Tensor> inputs;
  std::vector<std::size_t> input_index;  ///< into the surface
};

GradientProblem gradient_problem(const GraphedUnitState& state, const std::vector<at::Tensor>& outputs,
                                 const std::vector<bool>& needs_grad) {
  GradientProblem problem;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].defined() && outputs[i].requires_grad()) {
      problem.outputs.push_back(outputs[i]);
      problem.output_index.push_back(i);
    }
  }
  const std::vector<at::Tensor> surface = surface_of(state);
  for (std::size_t i = 0; i < surface.size(); ++i) {
    if (needs_grad[i]) {
      problem.inputs.push_back(surface[i]);
      problem.input_index.push_back(i);
    }
  }
  return problem;
}

/// A tensor aliasing another's memory without owning it (TransformerEngine's make_weak_ref): the
/// memory goes back to the graph pool, and the next graph captured may reuse it.
at::Tensor non_owning_alias(const at::Tensor& tensor) {
  return at::from_blob(tensor.data_ptr(), tensor.sizes(), tensor.strides(), tensor.options());
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
  const std::string fix = "pass an order of +c (forward) and -c (backward) entries, 1-based chunk ids, each chunk's "
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
      throw CaptureError("order " + bracketed(layout.order) + " runs chunk " + std::to_string(value) + " forward more than " +
                             std::to_string(layout.microbatches) + " times",
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
  GRAPHED_CHECK(!units.empty(), CaptureError, "make_graphed_callables got no units; fix: pass at least one unit");
  GRAPHED_CHECK(options.warmup_iterations >= 1, CaptureError, "make_graphed_callables needs warmup_iterations >= 1, got ",
                options.warmup_iterations, "; fix: warm up at least once (autotuning and lazy initialization must not "
                "happen inside a capture)");
  GRAPHED_CHECK(!compat::cuda_autocast_caching(), CaptureError,
                "make_graphed_callables was called under CUDA autocast with its cast cache on; fix: turn the cache "
                "off (compat::AutocastScope does) so that no cached cast outlives its capture");
  const auto unit_count = static_cast<int64_t>(units.size());
  const GraphedCallablesLayout layout = graphed_callables_layout(unit_count, options.order, options.layers_per_chunk);
  const int64_t entries = unit_count * layout.microbatches;
  GRAPHED_CHECK(options.chained_inputs.empty() || static_cast<int64_t>(options.chained_inputs.size()) == unit_count,
                CaptureError, "chained_inputs has ", options.chained_inputs.size(), " entries for ", unit_count,
                " units; fix: one flag per unit, or none");
  const auto chained = [&](std::size_t chunk, int64_t layer) {
    return !options.chained_inputs.empty() && options.chained_inputs[static_cast<std::size_t>(layout.prefix[chunk] + layer)];
  };
  for (std::size_t c = 0; c < layout.layers_per_chunk.size(); ++c) {
    GRAPHED_CHECK(!chained(c, 0), CaptureError, "unit ", units[static_cast<std::size_t>(layout.prefix[c])].name,
                  " is chained to its predecessor but is the first unit of chunk ", c + 1,
                  "; fix: chain only units that follow another unit of the same chunk");
  }
  GRAPHED_CHECK(static_cast<int64_t>(sample_arguments.size()) == entries, CaptureError, "make_graphed_callables got ",
                sample_arguments.size(), " sample argument sets for ", unit_count, " units x ", layout.microbatches,
                " microbatches; fix: pass one per (unit, microbatch), chunk-major, then microbatch, then unit");

  // 1. One state per entry, with checked samples.
  std::vector<std::shared_ptr<GraphedUnitState>> states(static_cast<std::size_t>(entries));
  std::optional<at::Device> device;
  for (std::size_t c = 0; c < layout.layers_per_chunk.size(); ++c) {
    for (int64_t mb = 0; mb < layout.microbatches; ++mb) {
      for (int64_t l = 0; l < layout.layers_per_chunk[c]; ++l) {
        const int64_t e = layout.entry(static_cast<int64_t>(c), mb, l);
        const GraphableUnit& unit = units[static_cast<std::size_t>(layout.prefix[c] + l)];
        GRAPHED_INTERNAL_ASSERT(static_cast<bool>(unit.forward), "unit ", unit.name, " has no function");
        auto state = std::make_shared<GraphedUnitState>();
        state->unit = unit;
        state->microbatch = mb;
        state->clone_parameter_grads = options.clone_parameter_grads;
        state->parameter_grads_in_graph = options.accumulate_parameter_grads;
        const UnitArguments& sample = sample_arguments[static_cast<std::size_t>(e)];
        for (const auto& entry : sample.keyword) state->keyword_names.push_back(entry.first);
        for (std::size_t p = 0; p < unit.parameters.size(); ++p) {
          const std::string name = p < unit.parameter_names.size() ? unit.parameter_names[p] : "parameter " + std::to_string(p);
          GRAPHED_CHECK(!has_hooks(unit.parameters[p]), CaptureError, "unit ", state->label(), ": parameter '", name,
                        "' has a gradient hook; fix: remove it while capturing (register hooks after the capture)");
          GRAPHED_CHECK(!options.accumulate_parameter_grads || !unit.parameters[p].requires_grad() ||
                            unit.parameters[p].grad().defined(),
                        CaptureError, "unit ", state->label(), ": parameter '", name, "' has no grad tensor, but "
                        "accumulate_parameter_grads accumulates into it inside the graph; fix: allocate every "
                        "param.grad (zeros) before capturing, or turn accumulate_parameter_grads off");
          state->parameters.push_back(unit.parameters[p]);
          state->parameter_names.push_back(name);
        }
        const std::vector<at::Tensor> flat = sample.flatten();
        const std::vector<std::string> names = sample.names(unit);
        for (std::size_t i = 0; i < flat.size(); ++i) {
          state->signatures.push_back(signature_of(state->label(), names[i], flat[i]));
          GRAPHED_CHECK(!has_hooks(flat[i]), CaptureError, "unit ", state->label(), ": sample argument '", names[i],
                        "' has a gradient hook; fix: graphs replay captured work and would skip it: register hooks "
                        "after the capture");
          GRAPHED_CHECK(flat[i].is_cuda(), CaptureError, "unit ", state->label(), ": sample argument '", names[i],
                        "' is on ", flat[i].device().str(), "; fix: CUDA graphs capture CUDA work only: pass samples "
                        "on the GPU the unit runs on");
          if (!device) device = flat[i].device();
          GRAPHED_CHECK(flat[i].device() == *device, CaptureError, "unit ", state->label(), ": sample argument '",
                        names[i], "' is on ", flat[i].device().str(), " but others are on ", device->str(),
                        "; fix: one capture serves one device: put every sample on it");
        }
        states[static_cast<std::size_t>(e)] = std::move(state);
      }
    }
  }
  GRAPHED_CHECK(device.has_value(), CaptureError,
                "make_graphed_callables got units without tensor arguments; fix: a graphed unit needs at least one "
                "input tensor");

  // 2. Static inputs: the samples themselves (as leaves), shared per the buffer plan when reusing.
  std::vector<std::vector<at::Tensor>> buffers;
  std::vector<int64_t> buffer_of(static_cast<std::size_t>(entries));
  if (options.reuse_buffers) {
    std::map<std::string, int64_t> keys;
    std::vector<std::vector<int64_t>> signatures(layout.layers_per_chunk.size());
    for (std::size_t c = 0; c < layout.layers_per_chunk.size(); ++c) {
      for (int64_t l = 0; l < layout.layers_per_chunk[c]; ++l) {
        const std::string key = signature_key(states[static_cast<std::size_t>(layout.entry(static_cast<int64_t>(c), 0, l))]->signatures);
        for (int64_t mb = 1; mb < layout.microbatches; ++mb) {
          const auto& other = *states[static_cast<std::size_t>(layout.entry(static_cast<int64_t>(c), mb, l))];
          GRAPHED_CHECK(signature_key(other.signatures) == key, CaptureError, "unit ", other.label(),
                        " has samples of another shape, dtype or requires-grad than its microbatch 0; fix: with "
                        "reuse_buffers every microbatch of a unit takes the same argument signature");
        }
        signatures[c].push_back(keys.emplace(key, static_cast<int64_t>(keys.size())).first->second);
      }
    }
    const SampleBufferPlan plan = plan_sample_buffers(layout.order, layout.layers_per_chunk, layout.microbatches, signatures);
    buffer_of = plan.buffer_of_entry;
    buffers.resize(static_cast<std::size_t>(plan.unique_buffers));
  } else {
    for (int64_t e = 0; e < entries; ++e) buffer_of[static_cast<std::size_t>(e)] = e;
    buffers.resize(static_cast<std::size_t>(entries));
  }
  std::set<const void*> taken;  // memory already serving as a buffer: a second buffer gets a copy
  for (int64_t e = 0; e < entries; ++e) {
    auto& buffer = buffers[static_cast<std::size_t>(buffer_of[static_cast<std::size_t>(e)])];
    if (buffer.empty()) {
      for (const at::Tensor& t : sample_arguments[static_cast<std::size_t>(e)].flatten()) {
        const bool fresh = taken.insert(t.data_ptr()).second;
        buffer.push_back((fresh ? t.detach() : t.detach().clone()).requires_grad_(t.requires_grad()));
      }
    }
    GraphedUnitState& state = *states[static_cast<std::size_t>(e)];
    state.static_inputs = buffer;
    state.needs_grad.clear();
    for (const at::Tensor& t : surface_of(state)) state.needs_grad.push_back(t.requires_grad());
  }

  // 3. Warmup and capture run on the current stream, or a private one instead of the default stream.
  std::optional<SideStream> own_stream;
  std::optional<SideStream::Use> on_own_stream;
  if (on_default_stream(*device)) {
    own_stream.emplace(*device);
    on_own_stream.emplace(*own_stream);
  }
  const auto random_states = rng_states(*device);
  {
    WarmupScope warming;
    std::vector<std::vector<at::Tensor>> in_flight(static_cast<std::size_t>(entries));
    for (int64_t iteration = 0; iteration < options.warmup_iterations; ++iteration) {
      walk(
          layout,
          [&](int64_t e) {
            GraphedUnitState& state = *states[static_cast<std::size_t>(e)];
            const uint64_t offset = cuda_random_offset(*device);
            in_flight[static_cast<std::size_t>(e)] = state.unit.forward(state.static_inputs);
            if (iteration == 0) state.forward_draws_random = cuda_random_offset(*device) != offset;
          },
          [&](int64_t e) {
            GraphedUnitState& state = *states[static_cast<std::size_t>(e)];
            std::vector<at::Tensor> outputs = std::move(in_flight[static_cast<std::size_t>(e)]);
            const GradientProblem problem = gradient_problem(state, outputs, state.needs_grad);
            if (problem.outputs.empty() || problem.inputs.empty()) return;
            std::vector<at::Tensor> seeds;
            for (const at::Tensor& o : problem.outputs) seeds.push_back(at::ones_like(o));
            const uint64_t offset = cuda_random_offset(*device);
            const auto grads = torch::autograd::grad(problem.outputs, problem.inputs, seeds, /*retain_graph=*/false,
                                                     /*create_graph=*/false, /*allow_unused=*/true);
            if (iteration > 0) return;
            state.backward_draws_random = cuda_random_offset(*device) != offset;
            // Unused inputs: an error unless allowed; unused parameters are dropped (TransformerEngine).
            const std::size_t arguments = state.static_inputs.size();
            std::vector<std::size_t> unused_parameters;
            for (std::size_t k = 0; k < grads.size(); ++k) {
              if (grads[k].defined()) continue;
              const std::size_t i = problem.input_index[k];
              if (i < arguments) {
                GRAPHED_CHECK(options.allow_unused_input, CaptureError, "unit ", state.label(), ": argument '",
                              state.signatures[i].name, "' requires grad but no output depends on it; fix: pass it "
                              "without requires_grad, or set allow_unused_input (its grad is then undefined)");
                state.needs_grad[i] = false;
              } else {
                unused_parameters.push_back(i - arguments);
              }
            }
            for (auto it = unused_parameters.rbegin(); it != unused_parameters.rend(); ++it) {
              state.parameters.erase(state.parameters.begin() + static_cast<std::ptrdiff_t>(*it));
              state.parameter_names.erase(state.parameter_names.begin() + static_cast<std::ptrdiff_t>(*it));
              state.needs_grad.erase(state.needs_grad.begin() + static_cast<std::ptrdiff_t>(arguments + *it));
            }
          });
    }
    synchronize(*device);
  }  // every warmup output and autograd graph is gone before the first capture

  // 4. Capture, walking the order once. Chained entries: entry -> its predecessor, and back.
  std::map<int64_t, int64_t> chained_to, chained_from;
  for (std::size_t c = 0; c < layout.layers_per_chunk.size(); ++c) {
    for (int64_t mb = 0; mb < layout.microbatches; ++mb) {
      for (int64_t l = 1; l < layout.layers_per_chunk[c]; ++l) {
        if (!chained(c, l)) continue;
        const int64_t e = layout.entry(static_cast<int64_t>(c), mb, l);
        const int64_t previous = layout.entry(static_cast<int64_t>(c), mb, l - 1);
        chained_to[e] = previous;
        chained_from[previous] = e;
      }
    }
  }
  const GraphPool pool = options.pool.is_shared() ? options.pool : GraphPool::create();
  std::map<std::string, at::Tensor> shared_grad_outputs;
  walk(
      layout,
      [&](int64_t e) {
        GraphedUnitState& state = *states[static_cast<std::size_t>(e)];
        if (const auto previous = chained_to.find(e); previous != chained_to.end()) {
          const GraphedUnitState& before = *states[static_cast<std::size_t>(previous->second)];
          GRAPHED_CHECK(!before.static_outputs.empty() && !state.static_inputs.empty(), CaptureError, "unit ",
                        state.label(), " is chained to unit ", before.label(), " but one of them has no tensor to "
                        "share; fix: chain only units whose argument 0 is the previous unit's output 0");
          const at::Tensor& output = before.static_outputs[0];
          const ArgumentSignature& want = state.signatures[0];
          GRAPHED_CHECK(output.sizes().equals(want.sizes) && output.scalar_type() == want.dtype, CaptureError, "unit ",
                        state.label(), " is chained to unit ", before.label(), " but its argument 0 is ", describe(want),
                        " while that unit's output 0 is ", describe(signature_of(before.label(), "output 0", output)),
                        "; fix: chain only units whose argument 0 is the previous unit's output 0");
          state.static_inputs[0] = output.detach().requires_grad_(want.requires_grad);
        }
        state.static_outputs = state.forward_graph.capture([&] { return state.unit.forward(state.static_inputs); }, pool,
                                                           options.mode, "the forward of unit " + state.label());
        state.output_requires_grad.clear();
        for (const at::Tensor& o : state.static_outputs) {
          GRAPHED_CHECK(o.defined(), CaptureError, "unit ", state.label(), " returned an undefined tensor; fix: "
                        "return defined tensors only");
          state.output_requires_grad.push_back(o.requires_grad());
        }
      },
      [&](int64_t e) {
        GraphedUnitState& state = *states[static_cast<std::size_t>(e)];
        const GradientProblem problem = gradient_problem(state, state.static_outputs, state.needs_grad);
        state.static_grad_outputs.assign(state.static_outputs.size(), at::Tensor());
        state.static_grad_inputs.assign(state.needs_grad.size(), at::Tensor());
        state.has_backward = !problem.outputs.empty() && !problem.inputs.empty();
        if (state.has_backward) {
          std::vector<at::Tensor> seeds;
          for (std::size_t k = 0; k < problem.outputs.size(); ++k) {
            const at::Tensor& o = problem.outputs[k];
            at::Tensor seed;
            const auto next = chained_from.find(e);
            const at::Tensor* shared =
                next != chained_from.end() && problem.output_index[k] == 0
                    ? &states[static_cast<std::size_t>(next->second)]->static_grad_inputs.at(0)
                    : nullptr;
            if (shared && shared->defined() && shared->sizes().equals(o.sizes()) && shared->scalar_type() == o.scalar_type()) {
              seed = *shared;  // the next unit's input-grad buffer: its backward writes the grad right here
            } else if (options.reuse_buffers) {
              const std::string key = signature_key({signature_of(state.label(), "output", o)});
              auto found = shared_grad_outputs.find(key);
              if (found == shared_grad_outputs.end()) found = shared_grad_outputs.emplace(key, at::empty_like(o)).first;
              seed = found->second;
            } else {
              seed = at::empty_like(o);
            }
            state.static_grad_outputs[problem.output_index[k]] = seed;
            seeds.push_back(seed);
          }
          const std::size_t arguments = state.static_inputs.size();
          const auto grads = state.backward_graph.capture(
              [&] {
                if (!options.accumulate_parameter_grads) {
                  return torch::autograd::grad(problem.outputs, problem.inputs, seeds, options.retain_backward_graph,
                                               /*create_graph=*/false, /*allow_unused=*/true);
                }
                // Accumulate into .grad: parameters add in place (captured); argument leaves, whose .grad is
                // unset, receive the graph's grad tensor, which is taken back out below.
                torch::autograd::backward(problem.outputs, seeds, options.retain_backward_graph,
                                          /*create_graph=*/false, problem.inputs);
                std::vector<at::Tensor> result;
                for (std::size_t k = 0; k < problem.inputs.size(); ++k) {
                  if (problem.input_index[k] >= arguments) {
                    result.emplace_back();
                    continue;
                  }
                  at::Tensor& grad = problem.inputs[k].mutable_grad();
                  result.push_back(grad);
                  grad = at::Tensor();
                }
                return result;
              },
              pool, options.mode, "the backward of unit " + state.label());
          for (std::size_t k = 0; k < grads.size(); ++k) state.static_grad_inputs[problem.input_index[k]] = grads[k];
        }
        // Release the captured autograd graph (and with it the accumulate-grad nodes it created).
        for (at::Tensor& o : state.static_outputs) o = options.reuse_buffers ? non_owning_alias(o) : o.detach();
      });
  for (const auto& state : states) {
    const bool argument_needs_grad =
        std::any_of(state->static_inputs.begin(), state->static_inputs.end(), [](const at::Tensor& t) { return t.requires_grad(); });
    state->parameters_in_surface = !state->parameter_grads_in_graph || !argument_needs_grad;
    state->parameter_addresses.clear();
    state->parameter_grad_addresses.clear();
    for (const at::Tensor& p : state->parameters) {
      state->parameter_addresses.push_back(p.data_ptr());
      state->parameter_grad_addresses.push_back(p.grad().defined() ? p.grad().data_ptr() : nullptr);
    }
    state->captured = true;
  }
  std::map<std::string, at::Tensor> restore(random_states.begin(), random_states.end());
  restore_rng_states(*device, restore);
  synchronize(*device);

  std::vector<std::shared_ptr<GraphedCallable>> callables;
  callables.reserve(states.size());
  for (auto& state : states) callables.push_back(std::make_shared<GraphedCallable>(std::move(state)));
  return callables;
}

}  // namespace graphed::capture
