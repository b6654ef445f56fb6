// capture/argument_signature.cpp — see capture/argument_signature.h.
#include "graphed/capture/argument_signature.h"

#include <sstream>

#include "graphed/util/error.h"
#include "graphed/util/text.h"

namespace graphed::capture {
namespace {

const char* kFix =
    "call a graphed unit with tensors of exactly the shapes, dtypes, devices and requires-grad flags it was "
    "captured with (a graph replays fixed kernels on fixed buffers), or delete the graphs and capture again for "
    "the new shapes";

}  // namespace

ArgumentSignature signature_of(const std::string& unit, const std::string& name, const at::Tensor& tensor) {
  if (!tensor.defined()) {
    throw CaptureError("unit " + unit + ": argument '" + name + "' is an undefined tensor",
                       "graphed units take defined tensors only; pass a tensor (zeros if it carries nothing)");
  }
  return {name, tensor.sizes().vec(), tensor.scalar_type(), tensor.device(), tensor.requires_grad()};
}

std::string argument_label(const ArgumentSignature& signature, std::size_t index) {
  const std::string position = "argument " + std::to_string(index);
  return signature.name.empty() || signature.name == position ? position
                                                              : "argument '" + signature.name + "' (" + position + ")";
}

bool matches(const ArgumentSignature& signature, const at::Tensor& tensor) {
  return tensor.sizes().equals(signature.sizes) && tensor.scalar_type() == signature.dtype &&
         tensor.device() == signature.device && tensor.requires_grad() == signature.requires_grad;
}

std::string describe(const ArgumentSignature& signature) {
  std::ostringstream out;
  out << bracketed(signature.sizes) << " " << c10::toString(signature.dtype) << " on " << signature.device.str()
      << (signature.requires_grad ? ", requires grad" : ", no grad");
  return out.str();
}

void check_arguments(const std::string& unit, const std::vector<ArgumentSignature>& expected,
                     const std::vector<at::Tensor>& arguments) {
  if (arguments.size() != expected.size()) {
    throw CaptureError("unit " + unit + " was called with " + std::to_string(arguments.size()) +
                           " arguments but was captured with " + std::to_string(expected.size()),
                       kFix);
  }
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const ArgumentSignature& want = expected[i];
    const at::Tensor& got = arguments[i];
    const std::string label = "unit " + unit + ": " + argument_label(want, i);
    if (!got.defined()) throw CaptureError(label + " is an undefined tensor; captured with " + describe(want), kFix);
    if (matches(want, got)) continue;
    std::string what;
    if (!got.sizes().equals(want.sizes)) {
      what = "shape " + bracketed(got.sizes().vec()) + ", captured with " + bracketed(want.sizes);
    } else if (got.scalar_type() != want.dtype) {
      what = std::string("dtype ") + c10::toString(got.scalar_type()) + ", captured with " + c10::toString(want.dtype);
    } else if (got.device() != want.device) {
      what = "device " + got.device().str() + ", captured with " + want.device.str();
    } else if (got.requires_grad() != want.requires_grad) {
      what = std::string("requires_grad ") + (got.requires_grad() ? "true" : "false") + ", captured with " +
             (want.requires_grad ? "true" : "false");
    }
    throw CaptureError(label + " has " + what, kFix);
  }
}

std::string signature_key(const std::vector<ArgumentSignature>& signatures) {
  std::ostringstream out;
  for (const ArgumentSignature& s : signatures) {
    out << bracketed(s.sizes) << ":" << static_cast<int>(s.dtype) << ":" << s.device.str() << ":" << s.requires_grad
        << ";";
  }
  return out.str();
}

}  // namespace graphed::capture
