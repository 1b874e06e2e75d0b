#include "distributed/gradient_reducer.h"

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <algorithm>
#include <chrono>

#include "distributed/communicator.h"

namespace trainyard::host {

struct GradientReducer::Impl {
  Communicator* comm = nullptr;
  std::vector<at::Tensor> parameters;
  struct Bucket {
    std::vector<size_t> members;  // parameter indices
    std::vector<int64_t> offsets;
    at::Tensor flat;
    size_t pending = 0;
    bool ready = false;
    c10::intrusive_ptr<c10d::Work> work;
  };
  std::vector<Bucket> buckets;
  std::vector<std::pair<size_t, int64_t>> place;  // parameter -> (bucket, offset)
  size_t next_launch = 0;
  bool active = true;
  std::vector<bool> filled;
  std::chrono::steady_clock::time_point started;

  void launch_ready() {
    while (next_launch < buckets.size() && buckets[next_launch].ready) {
      Bucket& b = buckets[next_launch++];
      std::vector<at::Tensor> tensors{b.flat};
      b.work = comm->start_allreduce(tensors);
    }
  }
};

GradientReducer::GradientReducer(Communicator& comm, std::vector<at::Tensor> parameters, size_t bucket_bytes)
    : impl_(std::make_unique<Impl>()) {
  impl_->comm = &comm;
  for (auto& p : parameters)
    if (p.requires_grad()) impl_->parameters.push_back(p);
  auto& params = impl_->parameters;
  impl_->place.resize(params.size());
  impl_->filled.assign(params.size(), false);
  // Gradients arrive roughly from the last layer to the first: bucket in that
  // order. The first bucket is small (1 MB, as PyTorch's DDP does) so that
  // communication starts early in the backward pass.
  const size_t first_bytes = std::min<size_t>(bucket_bytes, 1u << 20);
  size_t bytes = bucket_bytes;
  for (size_t k = params.size(); k-- > 0;) {
    if (bytes >= (impl_->buckets.size() == 1 ? first_bytes : bucket_bytes)) {
      impl_->buckets.emplace_back();
      bytes = 0;
    }
    auto& b = impl_->buckets.back();
    int64_t offset = b.offsets.empty() ? 0 : b.offsets.back() + params[b.members.back()].numel();
    b.members.push_back(k);
    b.offsets.push_back(offset);
    impl_->place[k] = {impl_->buckets.size() - 1, offset};
    bytes += static_cast<size_t>(params[k].numel()) * params[k].element_size();
  }
  for (auto& b : impl_->buckets) {
    int64_t total = b.offsets.back() + params[b.members.back()].numel();
    b.flat = at::zeros({total}, params[b.members.front()].options());
  }
  Impl* impl = impl_.get();
  for (size_t k = 0; k < params.size(); ++k)
    params[k].register_hook([impl, k](const at::Tensor& grad) {
      if (!impl->active) return;
      auto [bucket, offset] = impl->place[k];
      Impl::Bucket& b = impl->buckets[bucket];
      // The hook runs before autograd adds `grad` into .grad: add what earlier
      // micro-steps accumulated.
      at::Tensor slice = b.flat.narrow(0, offset, grad.numel());
      const at::Tensor& earlier = impl->parameters[k].grad();
      if (earlier.defined())
        slice.copy_((earlier + grad).reshape({-1}));
      else
        slice.copy_(grad.reshape({-1}));
      impl->filled[k] = true;
      if (--b.pending == 0) {
        b.ready = true;
        impl->launch_ready();
      }
    });
}

GradientReducer::~GradientReducer() = default;

void GradientReducer::set_active(bool active) { impl_->active = active; }

void GradientReducer::prepare() {
  impl_->next_launch = 0;
  impl_->active = true;
  std::fill(impl_->filled.begin(), impl_->filled.end(), false);
  impl_->started = std::chrono::steady_clock::now();
  for (auto& b : impl_->buckets) {
    b.flat.zero_();  // a parameter without a gradient this step contributes zeros
    b.pending = b.members.size();
    b.ready = false;
    b.work.reset();
  }
}

void GradientReducer::finish() {
  // What is not hidden behind backward: launching the rest and waiting.
  const auto t0 = std::chrono::steady_clock::now();
  // Gradients no hook saw (accumulated without communication, or none at all).
  for (size_t k = 0; k < impl_->parameters.size(); ++k) {
    if (impl_->filled[k]) continue;
    auto [bucket, offset] = impl_->place[k];
    const at::Tensor& grad = impl_->parameters[k].grad();
    if (grad.defined()) impl_->buckets[bucket].flat.narrow(0, offset, grad.numel()).copy_(grad.reshape({-1}));
  }
  for (auto& b : impl_->buckets) b.ready = true;
  impl_->launch_ready();
  const double world = impl_->comm->size();
  for (auto& b : impl_->buckets) {
    impl_->comm->wait(*b.work);
    b.flat.div_(world);
    // The averages into the gradients: one multi-tensor copy a bucket (a
    // copy per gradient before); a parameter without one gets its own.
    std::vector<at::Tensor> grads, slices;
    for (size_t i = 0; i < b.members.size(); ++i) {
      at::Tensor& p = impl_->parameters[b.members[i]];
      at::Tensor slice = b.flat.narrow(0, b.offsets[i], p.numel()).view_as(p);
      if (p.mutable_grad().defined()) {
        grads.push_back(p.mutable_grad());
        slices.push_back(slice);
      } else {
        p.mutable_grad() = slice.clone();
      }
    }
    if (!grads.empty()) at::_foreach_copy_(grads, slices);
  }
  impl_->comm->add_seconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

}  // namespace trainyard::host
