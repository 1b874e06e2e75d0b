#include "distributed/communicator.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#ifdef USE_C10D_NCCL
#include <c10/cuda/CUDAGuard.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <torch/nn/module.h>

#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <map>
#include <thread>

#include "distributed/device.h"
#include "distributed/rendezvous.h"
#include "trainyard/error.h"
#include "util/clock.h"

namespace trainyard::host {

// Since LibTorch 2.0, ProcessGroupGloo and ProcessGroupNCCL are c10d::Backends
// (a ProcessGroup dispatches to one per device type). One backend serves every
// collective here, so it is held directly.
struct Communicator::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::Backend> group;
  /// Small host values (the per-step flags, meter sums): Gloo on the CPU. In
  /// a GPU run a second group beside NCCL (or beside the GPU tensors' Gloo
  /// group, under ranks_share_gpu_for_tests()), so that agreeing on the next
  /// step never makes the host wait for the GPU; in a CPU run the same group.
  c10::intrusive_ptr<c10d::Backend> control;
  /// `group` is NCCL's: shut down or aborted at exit.
  bool nccl = false;
  /// A collective failed: at exit NCCL is aborted, since a clean shutdown
  /// would wait for kernels that wait for a dead peer.
  bool failed = false;
  c10::Device device = c10::Device(c10::DeviceType::CPU);  ///< collective_device(): where collective tensors live
};

namespace {

// Gloo and the store throw c10::Error when a peer is gone or times out: say
// which operation and that another rank failed.
template <class F>
void collective(const char* what, F&& f, Communicator* comm = nullptr) {
  auto who = [&] {
    if (!comm) return std::string();
    comm->mark_failed();
    return "; " + comm->unresponsive_ranks();
  };
  try {
    // NCCL runs on the rank's GPU whatever device a callback made current
    // (Gloo's CUDA work stages on the tensors' own device; the guard is harmless).
    c10::OptionalDeviceGuard guard;
    if (comm && comm->device().is_cuda()) guard.reset_device(comm->device());
    f();
  } catch (const Error&) {  // ours, with its cause already named
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
  impl_->nccl = uses_nccl(rank_device);
  // The test setting TRAINYARD_TEST_SHARED_GPU: Gloo with the GPU's tensors.
  const bool gloo_on_gpu = rank_device.is_cuda() && !impl_->nccl;
  collective("rendezvous", [&] {
    // The interface is checked before waiting for anyone.
    std::vector<std::shared_ptr<::gloo::transport::Device>> gloo;
    if (!impl_->nccl) gloo = gloo_devices(world, transport_);
    impl_->store = open_store(world, timeout);
#ifdef USE_C10D_NCCL
    if (impl_->nccl) {
      // The rank's GPU is current before NCCL creates its communicator, and
      // the group is bound to it (as torch.distributed's device_id does):
      // the communicator is created now, on that device, not at the first
      // collective on whatever device is current then. NCCL picks its
      // interface itself (NCCL_SOCKET_IFNAME, read from the environment).
      make_current(impl_->device);
      auto options = c10d::ProcessGroupNCCL::Options::create();
      options->timeout = timeout;
      auto nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(
          c10::make_intrusive<c10d::PrefixStore>("nccl", impl_->store), world.rank, world.world_size, options);
      nccl->setBoundDeviceId(impl_->device);
      nccl->eagerConnectSingleDevice(impl_->device);
      impl_->group = nccl;
      const char* ifname = std::getenv("NCCL_SOCKET_IFNAME");
      std::string control;
      impl_->control = c10::make_intrusive<c10d::ProcessGroupGloo>(
          c10::make_intrusive<c10d::PrefixStore>("gloo-control", impl_->store), world.rank, world.world_size, [&] {
            auto control_options = c10d::ProcessGroupGloo::Options::create(timeout);
            control_options->devices = gloo_devices(world, control);
            return control_options;
          }());
      transport_ = "NCCL on " + impl_->device.str() +
                   (ifname ? std::string(" (NCCL_SOCKET_IFNAME=") + ifname + ")" : "") + ", flags over " + control;
      return;
    }
#else
    if (impl_->nccl)
      throw ConfigError("GPUs requested but this LibTorch was built without NCCL",
                        "expected a CUDA LibTorch with NCCL (docs/distributed.md)", "set distributed.num_gpus: 0");
#endif
    auto options = c10d::ProcessGroupGloo::Options::create(timeout);
    options->devices = gloo;
    try {
      impl_->group = c10::make_intrusive<c10d::ProcessGroupGloo>(
          c10::make_intrusive<c10d::PrefixStore>("gloo", impl_->store), world.rank, world.world_size, options);
      impl_->control = impl_->group;
      if (gloo_on_gpu) {
        // As beside NCCL: the flags in their own group, never queued behind
        // a GPU tensor's staging. ProcessGroupGloo takes CUDA tensors for
        // allreduce and broadcast (the only calls made on `group`): each is
        // copied to pinned host memory on a side stream, reduced or sent by
        // Gloo, copied back, and wait() makes the current stream wait for it.
        impl_->control = c10::make_intrusive<c10d::ProcessGroupGloo>(
            c10::make_intrusive<c10d::PrefixStore>("gloo-control", impl_->store), world.rank, world.world_size, [&] {
              auto control_options = c10d::ProcessGroupGloo::Options::create(timeout);
              std::string unused;  // the same choice as `gloo`, in devices of its own (as beside NCCL)
              control_options->devices = gloo_devices(world, unused);
              return control_options;
            }());
        transport_ += " with " + impl_->device.str() +
                      "'s tensors staged through host memory (test setting "
                      "TRAINYARD_TEST_SHARED_GPU=1, in place of NCCL), flags over a second Gloo group";
      }
      // A group can come up on one rank and not on another (each advertised
      // an address only it can reach, and a stray connection satisfied one
      // side): one small reduction now, in this try, makes every rank fail
      // here with the interface advice instead of one of them failing later
      // at its first exchange, blaming a rank that is only unreachable.
      std::vector<at::Tensor> probe{at::zeros({1})};
      impl_->control->allreduce(probe)->wait();
    } catch (const std::exception& e) {
      // Every rank reached the store, but not each other at the addresses
      // they advertised through it.
      std::string why = e.what();
      why = why.substr(0, why.find('\n'));
      throw Error("distributed rendezvous: rank " + std::to_string(world.rank) +
                  " reached the store but could not connect to the other ranks (" + transport_ + "; " + why +
                  "); on several networks, name the one the ranks share with GLOO_SOCKET_IFNAME");
    }
  });
}

void configure_nccl_environment() {
  // Nothing is set: LibTorch's defaults are what a GPU run needs. Work::wait()
  // only orders the current CUDA stream after NCCL's, so the host runs ahead;
  // ProcessGroupNCCL's watchdog thread (TORCH_NCCL_ASYNC_ERROR_HANDLING,
  // default 3) aborts the communicator and ends the process when a collective
  // outlives options->timeout or NCCL reports a dead peer. trainyard used to
  // set TORCH_NCCL_BLOCKING_WAIT=1 for a friendlier error, at the price of a
  // host wait on every collective (about 57 per ResNet-20 step with sync batch
  // norm). The per-step flags now go over Gloo (Impl::control), where a lost
  // rank is named as in CPU runs. A user's own setting is left as it is.
}

Communicator::~Communicator() {
  // NCCL warns at exit about a group never destroyed; after a failure its
  // communicator is aborted instead. (Gloo's backend needs neither, also
  // when it holds CUDA tensors: its destructor drains its queue and joins
  // its threads, and Backend's shutdown() and abort() do nothing for it.)
  if (!impl_ || !impl_->group || !impl_->nccl) return;
  try {
    if (std::uncaught_exceptions() == 0 && !impl_->failed)
      impl_->group->shutdown();
    else
      impl_->group->abort();
  } catch (...) {}
}

std::vector<std::string> Communicator::exchange(const std::string& value) {
  std::vector<std::string> values;
  collective(
      "exchange",
      [&] {
        const std::string prefix = "exchange/" + std::to_string(exchanges_++) + "/";
        impl_->store->set(prefix + std::to_string(world_.rank), std::vector<uint8_t>(value.begin(), value.end()));
        for (int r = 0; r < world_.world_size; ++r) {
          auto other = impl_->store->get(prefix + std::to_string(r));
          values.emplace_back(other.begin(), other.end());
        }
      },
      this);
  return values;
}

void Communicator::check_same(const std::string& what, const std::string& value, const std::string& expected,
                              const std::string& hint, bool show_values) {
  const std::vector<std::string> values = exchange(value);
  auto shown = [&](const std::string& v) { return show_values ? " (" + (v.empty() ? "none" : v) + ")" : ""; };
  for (int r = 1; r < world_.world_size; ++r)
    if (values[r] != values[0])
      throw ConfigError(
          "rank " + std::to_string(r) + "'s " + what + shown(values[r]) + " differs from rank 0's" + shown(values[0]),
          expected, hint);
}

std::chrono::milliseconds rank0_io_limit(double stall_timeout_secs) {
  if (stall_timeout_secs <= 0) return std::chrono::hours(24 * 365);
  return std::chrono::milliseconds(static_cast<int64_t>(stall_timeout_secs * 1000));
}

void on_rank0(Communicator* comm, int rank, const std::string& what, double stall_timeout_secs,
              const std::function<void()>& work) {
  auto work_on_rank0 = [&] {
    if (rank == 0) work();
  };
  if (comm)
    comm->rank0_work(what, rank0_io_limit(stall_timeout_secs), work_on_rank0);
  else
    work_on_rank0();
}

void Communicator::rank0_work(const std::string& what, std::chrono::milliseconds limit,
                              const std::function<void()>& work) {
  const std::string key = "rank0-work/" + std::to_string(exchanges_++);
  if (world_.rank == 0) {
    // Rank 0's own failure is its error; the others are told so they stop with it.
    std::string outcome = "ok";
    std::exception_ptr failure;
    try {
      work();
    } catch (const std::exception& e) {
      outcome = e.what();
      failure = std::current_exception();
    }
    collective("rank 0's report",
               [&] { impl_->store->set(key, std::vector<uint8_t>(outcome.begin(), outcome.end())); });
    if (failure) std::rethrow_exception(failure);
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<uint8_t> outcome;
  try {
    impl_->store->wait({key}, limit);
    outcome = impl_->store->get(key);
  } catch (const c10::DistError& e) {
    const bool timed_out = std::chrono::steady_clock::now() - t0 >= limit;
    throw Error("distributed: waiting for rank 0's " + what + ": " +
                (timed_out ? "not done within " + std::to_string(limit.count() / 1000) + " s (loop.stall_timeout_secs)"
                           : "rank 0 (which holds the rendezvous store) cannot be reached; it died or was stopped") +
                " (" + e.what_without_backtrace() + ")");
  }
  const std::string said(outcome.begin(), outcome.end());
  if (said != "ok") throw Error("rank 0's " + what + " failed: " + said);
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
  check_on_group_device(tensor, "allreduce");
  std::vector<at::Tensor> tensors{tensor};
  wait(*start_allreduce(tensors));
  seconds_ += seconds_since(t0);
}

at::Tensor Communicator::gather_rows(const at::Tensor& rows) {
  if (rows.defined() && rows.dim() != 2)
    throw Error("gather_rows: a " + std::to_string(rows.dim()) + "-d tensor; expected [samples, width]");
  // Each rank's row count, width and dtype, through one small sum: rank r fills slot r.
  const size_t n = static_cast<size_t>(size()), me = static_cast<size_t>(rank());
  std::vector<double> shapes(3 * n, 0.0);
  if (rows.defined() && rows.size(0) > 0) {
    shapes[me] = static_cast<double>(rows.size(0));
    shapes[n + me] = static_cast<double>(rows.size(1));
    shapes[2 * n + me] = static_cast<double>(static_cast<int>(rows.scalar_type())) + 1;
  }
  shapes = sum(shapes);
  int64_t total = 0, width = -1, offset = 0;
  c10::ScalarType dtype = at::kFloat;
  for (size_t r = 0; r < n; ++r) {
    if (shapes[r] == 0) continue;
    const auto w = static_cast<int64_t>(shapes[n + r]);
    const auto t = static_cast<c10::ScalarType>(static_cast<int>(shapes[2 * n + r]) - 1);
    if (width >= 0 && (w != width || t != dtype))
      throw Error("gather_rows: rank " + std::to_string(r) + " has rows of width " + std::to_string(w) + " (" +
                  c10::toString(t) + "); expected width " + std::to_string(width) + " (" + c10::toString(dtype) +
                  ") as the ranks before it");
    width = w, dtype = t;
    if (r < me) offset += static_cast<int64_t>(shapes[r]);
    total += static_cast<int64_t>(shapes[r]);
  }
  if (total == 0) return rows;
  // Zeros everywhere but this rank's slice: the sum over ranks is the concatenation (x + 0 is x).
  at::Tensor all = at::zeros({total, width}, at::TensorOptions().dtype(dtype).device(impl_->device));
  if (rows.defined() && rows.size(0) > 0) all.narrow(0, offset, rows.size(0)).copy_(rows);
  allreduce(all);
  return all.to(rows.defined() ? rows.device() : c10::Device(c10::kCPU));
}

void Communicator::check_on_group_device(const at::Tensor& tensor, const std::string& what) const {
  if (tensor.device() != impl_->device)
    throw Error("distributed " + what + ": a tensor on " + tensor.device().str() +
                " given to a group whose tensors live on " + impl_->device.str() +
                " (a component or a checkpoint put it on the wrong device; use Collectives::device())");
}

void Communicator::broadcast_module(torch::nn::Module& module) {
  at::NoGradGuard no_grad;
  // NCCL would fail its bound-device check deep inside and look like a dead rank: say which tensor.
  for (const auto& t : module.named_parameters()) check_on_group_device(t.value(), "broadcast of " + t.key());
  for (const auto& t : module.named_buffers()) check_on_group_device(t.value(), "broadcast of " + t.key());
  std::vector<at::Tensor> tensors;
  for (auto& t : module.parameters()) tensors.push_back(t.data());
  for (auto& t : module.buffers()) tensors.push_back(t);
  broadcast_in_place(tensors);
}

void Communicator::broadcast_buffers(torch::nn::Module& module) { broadcast_in_place(module.buffers()); }

void Communicator::broadcast_in_place(const std::vector<at::Tensor>& tensors) {
  if (tensors.empty()) return;
  const auto t0 = std::chrono::steady_clock::now();
  at::NoGradGuard no_grad;
  // One broadcast per dtype, in the tensors' fixed order: the same sequence
  // of collectives on every rank, and a few launches instead of one per tensor.
  std::map<at::ScalarType, std::vector<at::Tensor>> by_type;
  for (const auto& t : tensors) by_type[t.scalar_type()].push_back(t);
  for (auto& [type, list] : by_type) {
    std::vector<at::Tensor> parts;
    for (const auto& t : list) parts.push_back(t.reshape({-1}).to(impl_->device));
    at::Tensor flat = at::cat(parts);
    collective(
        "broadcast",
        [&] {
          std::vector<at::Tensor> flats{flat};
          impl_->group->broadcast(flats)->wait();
        },
        this);
    std::vector<at::Tensor> received;
    int64_t offset = 0;
    for (const auto& t : list) {
      received.push_back(flat.narrow(0, offset, t.numel()).view(t.sizes()).to(t.device()));
      offset += t.numel();
    }
    at::_foreach_copy_(list, received);  // one multi-tensor copy where devices and layouts allow
  }
  seconds_ += seconds_since(t0);
}

c10::Device Communicator::device() const { return impl_->device; }

void Communicator::mark_failed() { impl_->failed = true; }

// Flags, meter sums, stop agreement and the barrier: small double tensors on
// the CPU, through the control group (Gloo), never waiting for the GPU.
std::vector<double> Communicator::sum(const std::vector<double>& values) {
  if (values.empty()) return values;
  const auto t0 = std::chrono::steady_clock::now();
  at::Tensor t = at::tensor(values, at::kDouble);  // on the CPU: the control group is Gloo
  collective(
      "allreduce",
      [&] {
        std::vector<at::Tensor> tensors{t};
        impl_->control->allreduce(tensors)->wait();
      },
      this);
  seconds_ += seconds_since(t0);
  return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
}

bool Communicator::any(bool flag) { return sum({flag ? 1.0 : 0.0})[0] > 0; }

void Communicator::barrier() { sum({0.0}); }

c10::intrusive_ptr<c10d::Work> Communicator::start_allreduce(std::vector<at::Tensor>& tensors) {
  c10::intrusive_ptr<c10d::Work> work;
  collective(
      "allreduce", [&] { work = impl_->group->allreduce(tensors); }, this);
  return work;
}

void Communicator::wait(c10d::Work& work) {
  collective(
      "allreduce", [&] { work.wait(); }, this);
}

double Communicator::take_seconds() {
  double s = seconds_;
  seconds_ = 0;
  return s;
}

}  // namespace trainyard::host
