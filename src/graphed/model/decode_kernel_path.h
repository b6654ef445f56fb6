// model/decode_kernel_path.h — decoding on graphed's decode kernels (kernels/decode_ops.h,
// kernels/paged_attention_ops.h): a kernel path over another (model/wrapped_path.h) whose inference
// operations run the fused kernels — the norm and its linear in one launch, SwiGLU with the down projection
// and the residual, RoPE with the paged cache write, paged attention — wherever the kernels take the tensors
// (bf16 on a GPU), and the wrapped path's elsewhere. The model takes it at assembly (--fused-kernels); the
// kernels' own contract, asked here and nowhere else, decides each call.
#pragma once

#include <memory>

#include "graphed/model/wrapped_path.h"

namespace graphed::model {

/// `inner` with the decode kernels for its inference operations.
std::shared_ptr<const KernelPath> with_decode_kernels(std::shared_ptr<const KernelPath> inner);

}  // namespace graphed::model
