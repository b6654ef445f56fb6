// capture/argument_signature.h — what a graphed unit was captured with, per input: name, shape,
// dtype, device and requires-grad. A graph replays fixed kernels on fixed addresses, so every call
// must match the capture; check_arguments reports the first difference naming the unit, the argument
// and both values. signature_key groups units whose inputs are interchangeable (buffer reuse).
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

namespace graphed::capture {

struct ArgumentSignature {
  std::string name;  ///< e.g. "hidden", or "argument 1" when the unit names none
  std::vector<int64_t> sizes;
  at::ScalarType dtype = at::kFloat;
  at::Device device = at::Device(at::kCPU);
  bool requires_grad = false;
};

/// The signature of a defined tensor; throws CaptureError naming unit and argument when undefined.
ArgumentSignature signature_of(const std::string& unit, const std::string& name, const at::Tensor& tensor);
/// "[8, 128, 256] BFloat16 on cuda:0, requires grad"
std::string describe(const ArgumentSignature& signature);
/// "argument 'hidden' (argument 0)", or "argument 0" for an unnamed argument.
std::string argument_label(const ArgumentSignature& signature, std::size_t index);
/// Whether a defined tensor has the signature's shape, dtype, device and requires-grad flag.
bool matches(const ArgumentSignature& signature, const at::Tensor& tensor);
/// Throws CaptureError when the arguments differ from the signatures in count, shape, dtype, device or
/// requires-grad, naming the unit, the argument and both values.
void check_arguments(const std::string& unit, const std::vector<ArgumentSignature>& expected,
                     const std::vector<at::Tensor>& arguments);
/// A string equal for two argument lists exactly when their shapes, dtypes, devices and
/// requires-grad flags are equal (names are ignored).
std::string signature_key(const std::vector<ArgumentSignature>& signatures);

}  // namespace graphed::capture
