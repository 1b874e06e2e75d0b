#pragma once
// The collectives a data-parallel run needs, over a c10d process group:
// Gloo between CPU processes, NCCL between GPUs (when LibTorch has CUDA).
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/util/intrusive_ptr.h>

#include "distributed/world.h"
#include "trainyard/collectives.h"

namespace torch::nn {
class Module;
}

namespace c10d {
class Work;
}

namespace trainyard::host {

/// Where trainyard would set what LibTorch's NCCL backend reads from the
/// environment (main() calls it first, through run/launch.h, before any thread exists); today it
/// keeps LibTorch's defaults (no blocking wait): docs/distributed.md says why.
void configure_nccl_environment();

/// How long the other ranks wait for rank 0's own writes: the stall
/// watchdog's limit (loop.stall_timeout_secs; 0, no watchdog: a year).
std::chrono::milliseconds rank0_io_limit(double stall_timeout_secs);

class Communicator;
/// Rank `rank` == 0 alone runs `work` (a write of the run's files); with
/// `comm` every rank calls this and the others wait for rank 0 as long as a
/// stalled write is tolerated (rank0_io_limit), not the collective timeout.
void on_rank0(Communicator* comm, int rank, const std::string& what, double stall_timeout_secs,
              const std::function<void()>& work);

class Communicator {
 public:
  /// Joins the group (waits for every rank up to the timeout): NCCL when
  /// `rank_device` is a GPU (made current first), Gloo on the CPU, and Gloo
  /// with the GPU's tensors under the test setting ranks_share_gpu_for_tests().
  Communicator(const World& world, std::chrono::milliseconds timeout, c10::Device rank_device);
  ~Communicator();

  int rank() const { return world_.rank; }
  int size() const { return world_.world_size; }
  /// Where this group's collective tensors live (collective_device()).
  c10::Device device() const;
  /// How this rank reaches the others, for the start-up line: "Gloo on
  /// 10.0.0.5 (the route to 10.0.0.1)", "NCCL on cuda:1".
  const std::string& transport() const { return transport_; }

  /// Every rank's `value`, in rank order, through the store (all ranks call it).
  std::vector<std::string> exchange(const std::string& value);
  /// Every rank compares `value` with every other rank's through the store
  /// and throws ConfigError naming the first rank whose `what` differs (and
  /// both values, when `show_values`), with `expected` and `hint` as its
  /// second and third parts.
  void check_same(const std::string& what, const std::string& value, const std::string& expected,
                  const std::string& hint, bool show_values = false);
  /// Work only rank 0 does while the others wait (a checkpoint write): rank 0
  /// runs `work`; the others wait up to `limit` (not the collective timeout,
  /// which is for ranks that stop answering) and fail with rank 0's error if
  /// its work failed. The TCP store lives in rank 0 (or torchrun's agent), so
  /// a rank 0 that dies is noticed at once.
  void rank0_work(const std::string& what, std::chrono::milliseconds limit, const std::function<void()>& work);
  /// Rank 0's parameters and buffers to every rank: one broadcast per dtype.
  void broadcast_module(torch::nn::Module& module);
  /// Rank 0's buffers (batch norm's running statistics) to every rank, as
  /// DDP's broadcast_buffers does before each forward: without it every rank
  /// drifts on its own shard, tests with its own statistics and only rank 0's
  /// are saved. One broadcast per dtype.
  void broadcast_buffers(torch::nn::Module& module);
  /// Element-wise sums over ranks.
  std::vector<double> sum(const std::vector<double>& values);
  /// True when any rank says true.
  bool any(bool flag);
  /// In-place sum over ranks.
  void allreduce(at::Tensor& tensor);
  /// Every rank's `rows` (`[n, width]`, n may differ; undefined: none),
  /// concatenated in rank order, on every rank, on `rows`' device (or the
  /// CPU). Throws Error when ranks disagree on width or dtype.
  at::Tensor gather_rows(const at::Tensor& rows);
  /// The SDK's view of these collectives, for components (Context::collectives).
  const Collectives& collectives() const { return *view_; }
  void barrier();

  /// After a failed collective: the ranks that do not answer through the store
  /// within a few seconds ("rank 1", "ranks 1, 3"), or what is known.
  std::string unresponsive_ranks();

  /// Seconds spent in collectives since the last call (then reset).
  double take_seconds();
  /// A collective failed (another rank is gone): the group is aborted at the
  /// end instead of shut down cleanly.
  void mark_failed();

 private:
  friend class GradientReducer;
  /// An in-place sum over ranks, started now (its failure named as every
  /// collective's), and the wait for one: allreduce() and the GradientReducer.
  c10::intrusive_ptr<c10d::Work> start_allreduce(std::vector<at::Tensor>& tensors);
  void wait(c10d::Work& work);
  void add_seconds(double seconds) { seconds_ += seconds; }
  /// Rank 0's values of `tensors` into every rank's (broadcast_module, broadcast_buffers).
  void broadcast_in_place(const std::vector<at::Tensor>& tensors);
  /// Throws Error naming `what` when `tensor` is not on device().
  void check_on_group_device(const at::Tensor& tensor, const std::string& what) const;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  World world_;
  double seconds_ = 0;
  int64_t exchanges_ = 0;  ///< calls to exchange() and rank0_work(): the same sequence on every rank
  std::string transport_;
  std::unique_ptr<Collectives> view_;
};

}  // namespace trainyard::host
