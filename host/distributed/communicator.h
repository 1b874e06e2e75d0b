#pragma once
// The collectives a data-parallel run needs, over a c10d process group:
// Gloo between CPU processes, NCCL between GPUs (when LibTorch has CUDA).
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "distributed/world.h"

namespace torch::nn {
class Module;
}

namespace trainyard::host {

class Communicator {
 public:
  /// Joins the group (waits for every rank up to the timeout).
  Communicator(const World& world, std::chrono::milliseconds timeout, bool cuda);
  ~Communicator();

  int rank() const { return world_.rank; }
  int size() const { return world_.world_size; }

  /// Every rank compares `value` with every other rank's through the store
  /// and throws ConfigError naming the first rank whose `what` differs.
  void check_same(const std::string& what, const std::string& value);
  /// Rank 0's parameters and buffers to every rank.
  void broadcast_module(torch::nn::Module& module);
  /// Gradients averaged over ranks, in flat buckets of about `bucket_bytes`.
  void average_gradients(const std::vector<at::Tensor>& parameters, size_t bucket_bytes = 25u << 20);
  /// Element-wise sums over ranks.
  std::vector<double> sum(const std::vector<double>& values);
  /// True when any rank says true.
  bool any(bool flag);
  void barrier();

  /// Seconds spent in collectives since the last call (then reset).
  double take_seconds();

 private:
  void allreduce(at::Tensor& tensor);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  World world_;
  double seconds_ = 0;
};

}  // namespace trainyard::host
