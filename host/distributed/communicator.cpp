#include "distributed/communicator.h"

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_NCCL
#include <c10/cuda/CUDAGuard.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <torch/nn/module.h>

#include <cstdlib>
#include <exception>
#include <thread>

#include "distributed/device.h"
#include "trainyard/error.h"

namespace trainyard::host {

// Since LibTorch 2.0, ProcessGroupGloo and ProcessGroupNCCL are c10d::Backends
// (a ProcessGroup dispatches to one per device type). One backend serves every
// collective here, so it is held directly.
struct Communicator::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::Backend> group;
  c10::Device device = c10::Device(c10::DeviceType::CPU);  ///< collective_device(): where collective tensors live
};

namespace {

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Gloo and the store throw c10::Error when a peer is gone or times out: say
// which operation and that another rank failed.
template <class F>
void collective(const char* what, F&& f, Communicator* comm = nullptr) {
  auto who = [&] { return comm ? "; " + comm->unresponsive_ranks() : std::string(); };
  try {
    // NCCL runs on the rank's GPU whatever device a callback made current.
    c10::OptionalDeviceGuard guard;
    if (comm && comm->device().is_cuda()) guard.reset_device(comm->device());
    f();
  } catch (const ConfigError&) {
    throw;
  } catch (const c10::ValueError& e) {  // a wrong tensor (layout, shape), not a lost rank
    throw Error(std::string("distributed ") + what + ": " + e.what_without_backtrace());
  } catch (const c10::TypeError& e) {  // a dtype the backend does not reduce
    throw Error(std::string("distributed ") + what + ": " + e.what_without_backtrace());
  } catch (const c10::Error& e) {
    throw Error(std::string("distributed ") + what + " failed: another rank died, hung or could not be reached (" +
                e.what_without_backtrace() + ")" + who());
  } catch (const std::exception& e) {  // gloo's own exceptions
    throw Error(std::string("distributed ") + what + " failed: another rank died, hung or could not be reached (" +
                e.what() + ")" + who());
  }
}

class CollectivesView : public Collectives {
 public:
  explicit CollectivesView(Communicator& comm) : comm_(comm) {}
  int rank() const override { return comm_.rank(); }
  int world_size() const override { return comm_.size(); }
  void all_reduce_sum(at::Tensor& tensor) const override {
    if (tensor.device() == comm_.device()) return comm_.allreduce(tensor);
    at::Tensor there = tensor.to(comm_.device());
    comm_.allreduce(there);
    tensor.copy_(there);
  }
  c10::Device device() const override { return comm_.device(); }

 private:
  Communicator& comm_;
};

}  // namespace

Communicator::Communicator(const World& world, std::chrono::milliseconds timeout, c10::Device rank_device)
    : impl_(std::make_unique<Impl>()), world_(world), view_(std::make_unique<CollectivesView>(*this)) {
  impl_->device = collective_device(rank_device);
  collective("rendezvous", [&] {
    if (world.rendezvous == "file") {
      impl_->store = c10::make_intrusive<c10d::FileStore>(world.rendezvous_file, world.world_size);
    } else {
      c10d::TCPStoreOptions options;
      options.port = static_cast<uint16_t>(world.master_port);
      options.isServer = world.rank == 0 && !world.agent_store;  // torchrun's agent may serve it already
      options.numWorkers = world.world_size;
      options.waitWorkers = true;
      options.timeout = timeout;
      impl_->store = c10::make_intrusive<c10d::TCPStore>(world.master_addr, options);
    }
    impl_->store->setTimeout(timeout);
#ifdef USE_C10D_NCCL
    if (uses_nccl(rank_device)) {
      // The rank's GPU is current before NCCL creates its communicator, and
      // the group is bound to it (as torch.distributed's device_id does):
      // the communicator is created now, on that device, not at the first
      // collective on whatever device is current then.
      make_current(impl_->device);
      auto options = c10d::ProcessGroupNCCL::Options::create();
      options->timeout = timeout;
      auto nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(
          c10::make_intrusive<c10d::PrefixStore>("nccl", impl_->store), world.rank, world.world_size, options);
      nccl->setBoundDeviceId(impl_->device);
      nccl->eagerConnectSingleDevice(impl_->device);
      impl_->group = nccl;
      return;
    }
#else
    if (uses_nccl(rank_device))
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

void configure_nccl_environment() {
  // ProcessGroupNCCL reads this when it is created; set here, before any
  // thread exists (setenv races with getenv on other threads). Blocking wait
  // makes Work::wait() poll: on options->timeout or an NCCL error (a dead
  // peer) it aborts the communicator and throws c10::DistBackendError on the
  // waiting thread, so the rank fails its collective here and names who
  // stopped answering, instead of waiting on the GPU. In this mode LibTorch
  // runs no watchdog thread (ProcessGroupNCCL.cpp, read at 2.8), so
  // TORCH_NCCL_ASYNC_ERROR_HANDLING plays no part.
  setenv("TORCH_NCCL_BLOCKING_WAIT", "1", /*overwrite=*/0);
}

Communicator::~Communicator() {
  // NCCL warns at exit about a group never destroyed; after a failure its
  // communicator is aborted instead. (Gloo's backend needs neither.)
  if (!impl_ || !impl_->group || !impl_->device.is_cuda()) return;
  try {
    if (std::uncaught_exceptions() == 0) impl_->group->shutdown();
    else impl_->group->abort();
  } catch (...) {
  }
}

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

std::string Communicator::unresponsive_ranks() {
  // Every surviving rank announces itself; whoever has not within 3 s is named.
  try {
    impl_->store->setTimeout(std::chrono::seconds(3));
    impl_->store->set("alive/" + std::to_string(world_.rank), std::vector<uint8_t>{1});
    std::vector<std::string> silent;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    for (int r = 0; r < world_.world_size; ++r) {
      if (r == world_.rank) continue;
      while (!impl_->store->check({"alive/" + std::to_string(r)}) && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (!impl_->store->check({"alive/" + std::to_string(r)})) silent.push_back(std::to_string(r));
    }
    if (silent.empty()) return "every rank still answers";
    std::string list;
    for (size_t i = 0; i < silent.size(); ++i) list += (i ? ", " : "") + silent[i];
    return (silent.size() == 1 ? "rank " : "ranks ") + list + " stopped answering";
  } catch (const std::exception&) {
    return "rank 0 (which holds the rendezvous store) cannot be reached";
  }
}

void Communicator::allreduce(at::Tensor& tensor) {
  const auto t0 = std::chrono::steady_clock::now();
  if (tensor.device() != impl_->device)
    throw Error("distributed allreduce: a tensor on " + tensor.device().str() + " given to a group whose tensors live on " +
                impl_->device.str() + " (a component built it on the wrong device; use Collectives::device())");
  collective("allreduce", [&] {
    std::vector<at::Tensor> tensors{tensor};
    impl_->group->allreduce(tensors)->wait();
  }, this);
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
  }, this);
  seconds_ += since(t0);
}

c10::Device Communicator::device() const { return impl_->device; }

// Flags, meter sums, stop agreement and the barrier: small double tensors
// built on device(), since NCCL refuses CPU tensors; read back on the CPU.
std::vector<double> Communicator::sum(const std::vector<double>& values) {
  if (values.empty()) return values;
  at::Tensor t = at::tensor(values, at::kDouble).to(impl_->device);
  allreduce(t);
  at::Tensor host = t.cpu();
  return std::vector<double>(host.data_ptr<double>(), host.data_ptr<double>() + host.numel());
}

bool Communicator::any(bool flag) { return sum({flag ? 1.0 : 0.0})[0] > 0; }

void Communicator::barrier() { sum({0.0}); }

double Communicator::take_seconds() {
  double s = seconds_;
  seconds_ = 0;
  return s;
}

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
      collective("allreduce", [&] { b.work = comm->impl_->group->allreduce(tensors); }, comm);
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
      if (earlier.defined()) slice.copy_((earlier + grad).reshape({-1}));
      else slice.copy_(grad.reshape({-1}));
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
    collective("allreduce", [&] { b.work->wait(); }, impl_->comm);
    b.flat.div_(world);
    for (size_t i = 0; i < b.members.size(); ++i) {
      at::Tensor& p = impl_->parameters[b.members[i]];
      at::Tensor slice = b.flat.narrow(0, b.offsets[i], p.numel()).view_as(p);
      if (p.mutable_grad().defined()) p.mutable_grad().copy_(slice);
      else p.mutable_grad() = slice.clone();
    }
  }
  impl_->comm->seconds_ += since(t0);
}

}  // namespace trainyard::host
