// tests/capture/toy_units.h — hand-written graphable units for the capture tests (capture/ never sees
// model code): gelu(x W + b), and a unit of two arguments, y = gelu(x W + b) * m + r, whose m and r
// play a mask and a rope table that several units read.
#pragma once

#include <string>
#include <vector>

#include "graphed/capture/unit_runner.h"

namespace graphed::testing {

/// gelu(x W + b), with W and b as parameters.
inline capture::GraphableUnit linear_unit(const std::string& name, const at::Tensor& weight, const at::Tensor& bias) {
  capture::GraphableUnit unit;
  unit.name = name;
  unit.input_names = {"x"};
  unit.parameters = {weight, bias};
  unit.parameter_names = {name + ".weight", name + ".bias"};
  unit.forward = [weight, bias](const std::vector<at::Tensor>& in) {
    return std::vector<at::Tensor>{at::gelu(at::addmm(bias, in.at(0), weight))};
  };
  return unit;
}

/// x + gelu(x W + b): a residual, as transformer layers have. Its backward reads the incoming grad
/// twice (the skip path and the branch), so a grad buffer clobbered in between shows.
inline capture::GraphableUnit residual_unit(const std::string& name, const at::Tensor& weight, const at::Tensor& bias) {
  capture::GraphableUnit unit = linear_unit(name, weight, bias);
  unit.forward = [weight, bias](const std::vector<at::Tensor>& in) {
    const at::Tensor& x = in.at(0);
    return std::vector<at::Tensor>{x + at::gelu(at::addmm(bias, at::layer_norm(x, {x.size(-1)}), weight))};
  };
  return unit;
}

/// gelu(x W + b) * mask + table: arguments {x, mask, table}.
inline capture::GraphableUnit masked_unit(const std::string& name, const at::Tensor& weight, const at::Tensor& bias) {
  capture::GraphableUnit unit = linear_unit(name, weight, bias);
  unit.input_names = {"x", "mask", "table"};
  unit.forward = [weight, bias](const std::vector<at::Tensor>& in) {
    return std::vector<at::Tensor>{at::gelu(at::addmm(bias, in.at(0), weight)) * in.at(1) + in.at(2)};
  };
  return unit;
}

}  // namespace graphed::testing
