#include "distributed/communicator.h"

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include "trainyard/error.h"

namespace trainyard::host {

struct Communicator::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroup> group;
};

namespace {

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Gloo and the store throw c10::Error when a peer is gone or times out: say
// which operation and that another rank failed.
template <class F>
void collective(const char* what, F&& f) {
  try {
    f();
  } catch (const ConfigError&) {
    throw;
  } catch (const c10::Error& e) {
    throw Error(std::string("distributed ") + what + " failed: another rank died, hung or could not be reached (" +
                e.what_without_backtrace() + ")");
  } catch (const std::exception& e) {  // gloo's own exceptions
    throw Error(std::string("distributed ") + what + " failed: another rank died, hung or could not be reached (" +
                e.what() + ")");
  }
}

}  // namespace

Communicator::Communicator(const World& world, std::chrono::milliseconds timeout, bool cuda)
    : impl_(std::make_unique<Impl>()), world_(world) {
  collective("rendezvous", [&] {
    if (world.rendezvous == "file") {
      impl_->store = c10::make_intrusive<c10d::FileStore>(world.rendezvous_file, world.world_size);
    } else {
      c10d::TCPStoreOptions options;
      options.port = static_cast<uint16_t>(world.master_port);
      options.isServer = world.rank == 0;
      options.numWorkers = world.world_size;
      options.waitWorkers = true;
      options.timeout = timeout;
      impl_->store = c10::make_intrusive<c10d::TCPStore>(world.master_addr, options);
    }
    impl_->store->setTimeout(timeout);
#ifdef USE_C10D_NCCL
    if (cuda) {
      auto options = c10d::ProcessGroupNCCL::Options::create();
      options->timeout = timeout;
      impl_->group = c10::make_intrusive<c10d::ProcessGroupNCCL>(
          c10::make_intrusive<c10d::PrefixStore>("nccl", impl_->store), world.rank, world.world_size, options);
      return;
    }
#else
    if (cuda)
      throw ConfigError("GPUs requested but this LibTorch was built without NCCL",
                        "expected a CUDA LibTorch with NCCL (docs/distributed.md)", "set distributed.num_gpus: 0");
#endif
    auto options = c10d::ProcessGroupGloo::Options::create(timeout);
    // On one machine, Gloo talks over loopback; across machines, over the
    // interface the host name resolves to.
    const bool loopback = world.master_addr == "localhost" || world.master_addr.rfind("127.", 0) == 0;
    options->devices.push_back(loopback ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                        : c10d::ProcessGroupGloo::createDefaultDevice());
    impl_->group = c10::make_intrusive<c10d::ProcessGroupGloo>(
        c10::make_intrusive<c10d::PrefixStore>("gloo", impl_->store), world.rank, world.world_size, options);
  });
}

Communicator::~Communicator() = default;

void Communicator::check_same(const std::string& what, const std::string& value) {
  collective("check", [&] {
    const std::string prefix = "check/" + what + "/";
    impl_->store->set(prefix + std::to_string(world_.rank), std::vector<uint8_t>(value.begin(), value.end()));
    for (int r = 0; r < world_.world_size; ++r) {
      auto other = impl_->store->get(prefix + std::to_string(r));
      if (std::string(other.begin(), other.end()) != value) {
        const int differing = r == 0 ? world_.rank : r;
        throw ConfigError("rank " + std::to_string(differing) + "'s " + what + " differs from rank 0's",
                          "expected every rank to run the same experiment with the same plugins",
                          "launch every rank with the same experiment, --set values and plugin folders");
      }
    }
  });
}

void Communicator::allreduce(at::Tensor& tensor) {
  const auto t0 = std::chrono::steady_clock::now();
  collective("allreduce", [&] {
    std::vector<at::Tensor> tensors{tensor};
    impl_->group->allreduce(tensors)->wait();
  });
  seconds_ += since(t0);
}

void Communicator::broadcast_module(torch::nn::Module& module) {
  const auto t0 = std::chrono::steady_clock::now();
  at::NoGradGuard no_grad;
  collective("broadcast", [&] {
    for (auto& t : module.parameters()) {
      std::vector<at::Tensor> tensors{t.data()};
      impl_->group->broadcast(tensors)->wait();
    }
    for (auto& t : module.buffers()) {
      std::vector<at::Tensor> tensors{t};
      impl_->group->broadcast(tensors)->wait();
    }
  });
  seconds_ += since(t0);
}

void Communicator::average_gradients(const std::vector<at::Tensor>& parameters, size_t bucket_bytes) {
  // Flatten gradients into buckets so that a network of many small tensors
  // costs a few collectives, not one per tensor.
  std::vector<at::Tensor> bucket;
  size_t bytes = 0;
  auto flush = [&] {
    if (bucket.empty()) return;
    at::Tensor flat = at::cat(bucket);
    allreduce(flat);
    flat.div_(world_.world_size);
    int64_t offset = 0;
    for (auto& g : bucket) {
      const int64_t n = g.numel();
      g.copy_(flat.narrow(0, offset, n));
      offset += n;
    }
    bucket.clear();
    bytes = 0;
  };
  std::vector<at::Tensor> views;
  for (const auto& p : parameters) {
    if (!p.requires_grad()) continue;
    at::Tensor grad = p.mutable_grad();
    if (!grad.defined()) {  // a parameter this rank's batch did not reach: contributes zeros
      p.mutable_grad() = at::zeros_like(p);
      grad = p.mutable_grad();
    }
    bucket.push_back(grad.view({-1}));
    bytes += static_cast<size_t>(grad.numel()) * grad.element_size();
    if (bytes >= bucket_bytes) flush();
  }
  flush();
}

std::vector<double> Communicator::sum(const std::vector<double>& values) {
  if (values.empty()) return values;
  at::Tensor t = at::tensor(values, at::kDouble);
  allreduce(t);
  return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
}

bool Communicator::any(bool flag) {
  at::Tensor t = at::full({1}, flag ? 1.0 : 0.0, at::kDouble);
  allreduce(t);
  return t.item<double>() > 0;
}

void Communicator::barrier() {
  at::Tensor t = at::zeros({1}, at::kDouble);
  allreduce(t);
}

double Communicator::take_seconds() {
  double s = seconds_;
  seconds_ = 0;
  return s;
}

}  // namespace trainyard::host
