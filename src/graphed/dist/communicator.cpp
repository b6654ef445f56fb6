// dist/communicator.cpp — see dist/communicator.h.
#include "graphed/dist/communicator.h"

#include <exception>

#include "graphed/dist/detail/backend.h"
#include "graphed/util/error.h"

namespace graphed::dist {
namespace {

using WorkPointer = c10::intrusive_ptr<c10d::Work>;

std::shared_ptr<void> erase(WorkPointer work) { return std::make_shared<WorkPointer>(std::move(work)); }

/// The first line of a library message, without LibTorch's source-location trailer or gloo's
/// "[file.cc:598] " prefix.
std::string short_reason(const std::exception& error) {
  std::string text = error.what();
  for (const char* cut : {"\nException raised from", "\n"}) {
    const auto at = text.find(cut);
    if (at != std::string::npos) text.resize(at);
  }
  if (!text.empty() && text.front() == '[') {
    const auto end = text.find("] ");
    if (end != std::string::npos) text.erase(0, end + 2);
  }
  return text.empty() ? "unknown failure" : text;
}

}  // namespace

std::string collective_failure(int64_t global_rank, const std::string& what, const std::string& reason) {
  return "rank " + std::to_string(global_rank) + ": " + what + " failed (" + reason +
         "); another rank has probably stopped: its own error says why; fix: look for the first rank that "
         "failed, or raise --distributed-timeout-minutes when a rank is only slow";
}

PendingWork::PendingWork(std::shared_ptr<void> work, int64_t global_rank, std::string what)
    : work_(std::move(work)), global_rank_(global_rank), what_(std::move(what)) {}

void PendingWork::wait() {
  if (!work_) return;
  auto& work = *std::static_pointer_cast<WorkPointer>(work_);
  try {
    work->wait();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& error) {
    throw DistributedError(collective_failure(global_rank_, what_, short_reason(error)));
  }
}

Communicator::Communicator(std::shared_ptr<detail::BackendHandle> backend, std::string name, std::vector<int64_t> ranks,
                           int64_t global_rank)
    : backend_(std::move(backend)), name_(std::move(name)), ranks_(std::move(ranks)), global_rank_(global_rank) {
  for (std::size_t i = 0; i < ranks_.size(); ++i) {
    if (ranks_[i] == global_rank) rank_ = static_cast<int64_t>(i);
  }
}

Communicator::~Communicator() = default;

PendingWork Communicator::guarded(const std::string& what, const std::function<std::shared_ptr<void>()>& launch) {
  const std::string label = what + " in the " + name_ + " group";
  try {
    return PendingWork(launch(), global_rank_, label);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& error) {
    throw DistributedError(collective_failure(global_rank_, label, short_reason(error)));
  }
}

PendingWork Communicator::all_reduce(at::Tensor& tensor, bool maximum) {
  if (!tensor.is_cuda() && (tensor.scalar_type() == at::kBFloat16 || tensor.scalar_type() == at::kHalf)) {
    // Gloo sums no 16-bit types here: the sum runs in float32 and is rounded once (as NCCL rounds one add of two).
    at::Tensor wide = tensor.to(at::kFloat);
    all_reduce(wide, maximum).wait();
    tensor.copy_(wide);
    return {};
  }
  return guarded(maximum ? "a max all-reduce" : "an all-reduce", [&] {
    std::vector<at::Tensor> tensors{tensor};
    c10d::AllreduceOptions options;
    options.reduceOp = maximum ? c10d::ReduceOp::MAX : c10d::ReduceOp::SUM;
    return erase(backend_->backend->allreduce(tensors, options));
  });
}

PendingWork Communicator::all_reduce_sum(at::Tensor& tensor) { return all_reduce(tensor, /*maximum=*/false); }

PendingWork Communicator::all_reduce_max(at::Tensor& tensor) { return all_reduce(tensor, /*maximum=*/true); }

PendingWork Communicator::all_gather(std::vector<at::Tensor>& parts, at::Tensor& tensor) {
  return guarded("an all-gather", [&] {
    std::vector<std::vector<at::Tensor>> outputs{parts};
    std::vector<at::Tensor> inputs{tensor};
    return erase(backend_->backend->allgather(outputs, inputs));
  });
}

PendingWork Communicator::all_gather_into(at::Tensor& output, const at::Tensor& input) {
  const int64_t length = input.numel();
  GRAPHED_INTERNAL_ASSERT(output.dim() == 1 && input.dim() == 1 && output.numel() == length * size(),
                          "an all-gather of ", length, " elements a member into ", output.numel());
  if (!input.is_cuda()) {
    // Gloo gathers no 16-bit types: their bytes travel instead.
    const bool half = input.scalar_type() == at::kBFloat16 || input.scalar_type() == at::kHalf;
    const at::Tensor into = half ? output.view(at::kByte) : output;
    const int64_t part = half ? 2 * length : length;
    std::vector<at::Tensor> parts;
    for (int64_t member = 0; member < size(); ++member) parts.push_back(into.narrow(0, member * part, part));
    at::Tensor sent = (half ? input.view(at::kByte) : input).clone();  // it may be this member's part of `output`
    return all_gather(parts, sent);
  }
  return guarded("an all-gather", [&] {
    at::Tensor sent = input;
    return erase(backend_->backend->_allgather_base(output, sent));
  });
}

PendingWork Communicator::reduce_scatter_sum(at::Tensor& output, at::Tensor& input) {
  if (!input.is_cuda()) {
    at::Tensor sum = input.clone();
    all_reduce_sum(sum).wait();
    output.copy_(sum.narrow(0, rank_ * output.size(0), output.size(0)));
    return {};
  }
  return guarded("a reduce-scatter", [&] {
    c10d::ReduceScatterOptions options;
    options.reduceOp = c10d::ReduceOp::SUM;
    return erase(backend_->backend->_reduce_scatter_base(output, input, options));
  });
}

PendingWork Communicator::all_to_all(at::Tensor& output, at::Tensor& input, std::vector<int64_t> output_splits,
                                     std::vector<int64_t> input_splits) {
  return guarded("an all-to-all",
                 [&] { return erase(backend_->backend->alltoall_base(output, input, output_splits, input_splits)); });
}

PendingWork Communicator::send(at::Tensor& tensor, int64_t peer, int64_t tag) {
  return guarded("a send to rank " + std::to_string(ranks_.at(static_cast<std::size_t>(peer))), [&] {
    std::vector<at::Tensor> tensors{tensor};
    return erase(backend_->backend->send(tensors, static_cast<int>(peer), static_cast<int>(tag)));
  });
}

PendingWork Communicator::receive(at::Tensor& tensor, int64_t peer, int64_t tag) {
  return guarded("a receive from rank " + std::to_string(ranks_.at(static_cast<std::size_t>(peer))), [&] {
    std::vector<at::Tensor> tensors{tensor};
    return erase(backend_->backend->recv(tensors, static_cast<int>(peer), static_cast<int>(tag)));
  });
}

void Communicator::broadcast(at::Tensor& tensor, int64_t root) {
  guarded("a broadcast", [&] {
    std::vector<at::Tensor> tensors{tensor};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    return erase(backend_->backend->broadcast(tensors, options));
  }).wait();
}

void Communicator::barrier() {
  guarded("a barrier", [&] { return erase(backend_->backend->barrier()); }).wait();
}

void Communicator::shutdown() {
#if TORCH_VERSION_MAJOR >= 2
  try {
    backend_->backend->shutdown();
  } catch (const std::exception&) {
    // Ending anyway: a backend that cannot shut down cleanly is released with the process.
  }
#endif
}

}  // namespace graphed::dist
