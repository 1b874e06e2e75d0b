#include "train/cuda_graph.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>

#include "config/step_rules.h"
#include "log/log.h"
#include "trainyard/error.h"

#ifdef TRAINYARD_WITH_CUDA
#include <ATen/core/CachingHostAllocator.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "util/cuda_stream.h"
#endif

namespace trainyard::host {

std::optional<size_t> replaced_gradient(const std::vector<at::Tensor>& parameters,
                                        const std::vector<const void*>& captured) {
  for (size_t i = 0; i < parameters.size() && i < captured.size(); ++i) {
    if (!captured[i]) continue;  // unused at the capture: no gradient from any replay either
    const at::Tensor& g = parameters[i].grad();
    if (!g.defined() || g.const_data_ptr() != captured[i]) return i;
  }
  return std::nullopt;
}

int64_t capture_warmup(int64_t profile_skip, int64_t warmup) { return std::max(warmup, profile_skip); }

#ifdef TRAINYARD_WITH_CUDA

namespace {
// Whether this LibTorch's CUDAGraph::reset() undoes a capture that failed
// before capture_end() finished (its capturing_to_pool_ flag, which torch
// 2.15 has and 2.11 has not): asked of the protected member from a derived
// class, at compile time.
struct GraphState : at::cuda::CUDAGraph {
  template <class G = GraphState>
  static constexpr bool resets_a_failed_capture() {
    return requires { &G::capturing_to_pool_; };
  }
};
}  // namespace

struct CapturedStep::Impl {
  c10::Device device;
  std::vector<at::Tensor> parameters;  ///< those that train (requires_grad)
  int64_t warmup;
  c10::cuda::CUDAStream stream;  ///< warm-up and capture run here (never the default stream)
  std::unique_ptr<at::cuda::CUDAGraph> graph;
  at::Tensor input, target;            ///< the graph's inputs: each batch is copied into them
  StepTensors out;                     ///< the graph's outputs
  std::vector<const void*> gradients;  ///< where the graph writes each parameter's gradient

  std::string failure;  ///< why the capture failed; the step runs eagerly since

  Impl(c10::Device d, std::vector<at::Tensor> p, int64_t w)
      : device(d), parameters(std::move(p)), warmup(w), stream(loop_stream(d, LoopStream::captured_step)) {}

  bool fits(const Batch& batch) const {
    return batch.input.sizes() == input.sizes() && batch.target.sizes() == target.sizes() &&
           batch.input.scalar_type() == input.scalar_type() && batch.target.scalar_type() == target.scalar_type() &&
           batch.input.device() == input.device() && batch.target.device() == target.device();
  }

  void check_gradients() const {
    if (replaced_gradient(parameters, gradients))
      throw Error(
          "loop.cuda_graph: a parameter's gradient was replaced after the step was captured (a callback "
          "or override called zero_grad() with set_to_none, or assigned .grad()); the graph writes the "
          "gradients where they were at the capture: zero them in place (grad().zero_()), or turn "
          "loop.cuda_graph off");
  }

  // A capture the step broke off (it read the device, or threw), undone so
  // that the run can go on eagerly: the stream out of capture mode, the
  // caching allocators no longer routing its allocations to the graph's pool,
  // the pool released, and the capture's error not left for the next kernel
  // launch's check to find. capture_end() ends the stream's capture in every
  // LibTorch (cudaStreamEndCapture, then it throws); torch 2.15's also stops
  // the routing and its reset() releases the pool (CUDAGraph's
  // capturing_to_pool_); in older ones (2.11) reset() leaves both, so they
  // are undone here, each step alone (where the failure came decides which
  // are left to do).
  void abandon_capture(const at::cuda::MempoolId_t& pool) {
    const auto quietly = [](auto&& f) {
      try {
        f();
      } catch (...) {}
    };
    quietly([&] { graph->capture_end(); });
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream.stream(), &status) == cudaSuccess && status != cudaStreamCaptureStatusNone) {
      cudaGraph_t partial = nullptr;
      (void)cudaStreamEndCapture(stream.stream(), &partial);
      if (partial) (void)cudaGraphDestroy(partial);
    }
    if constexpr (!GraphState::resets_a_failed_capture()) {
      quietly([&] { c10::cuda::CUDACachingAllocator::endAllocateToPool(device.index(), pool); });
      quietly([&] { c10::cuda::CUDACachingAllocator::releasePool(device.index(), pool); });
      quietly([&] { at::getHostAllocator(at::kCUDA)->end_allocate_to_pool(pool); });
      quietly([&] { at::getHostAllocator(at::kCUDA)->release_pool(pool); });
    }
    quietly([&] { graph.reset(); });  // 2.15: ends the routing if still on, releases the pool
    (void)cudaGetLastError();
    // The partial backward may have set gradients in the pool: the eager step makes its own.
    for (at::Tensor& p : parameters) p.mutable_grad().reset();
  }

  StepTensors capture(const Batch& batch, const Step& step) {
    // Unset gradients: the captured backward allocates them in the graph's
    // pool and assigns them, so that each replay writes them whole.
    for (at::Tensor& p : parameters) p.mutable_grad().reset();
    input = batch.input.clone();
    target = batch.target.clone();
    const Batch fixed{input, target, batch.indices};
    // Autocast's cache of cast weights would hold tensors of the capture
    // past its end (PyTorch's graphed callables turn it off too).
    const bool cache = at::autocast::is_autocast_cache_enabled();
    at::autocast::set_autocast_cache_enabled(false);
    graph = std::make_unique<at::cuda::CUDAGraph>();
    // A pool of our own: its id is known if the capture fails (CUDAGraph's
    // pool() is only there after a capture that ended).
    const at::cuda::MempoolId_t pool = at::cuda::graph_pool_handle();
    try {
      // Thread-local: the loader's threads go on pinning the next batches
      // (cudaEventQuery, cudaHostAlloc), which a global capture would refuse.
      graph->capture_begin(pool, cudaStreamCaptureModeThreadLocal);
      out = step(fixed);
      graph->capture_end();
    } catch (const std::exception& e) {
      at::autocast::set_autocast_cache_enabled(cache);
      abandon_capture(pool);  // and a failed capture leaves nothing to replay
      out = {};
      input = at::Tensor();
      target = at::Tensor();
      failure = e.what();
      log_warning("warning: loop.cuda_graph: the step could not be captured (" + failure +
                  "); it runs eagerly from here on: a loss or network that reads the device within the step (.item(), "
                  "masked_select, nonzero) cannot be captured; turn loop.cuda_graph off to silence this");
      return {};
    }
    at::autocast::set_autocast_cache_enabled(cache);
    gradients.clear();
    for (const at::Tensor& p : parameters)
      gradients.push_back(p.grad().defined() ? p.grad().const_data_ptr() : nullptr);
    graph->replay();  // this batch's step: capturing ran nothing
    return out;
  }
};

CapturedStep::CapturedStep(c10::Device device, std::vector<at::Tensor> parameters, int64_t warmup) {
  std::vector<at::Tensor> training;
  for (at::Tensor& p : parameters)
    if (p.requires_grad()) training.push_back(p);
  impl_ = std::make_unique<Impl>(device, std::move(training), warmup);
}

CapturedStep::~CapturedStep() = default;

bool CapturedStep::captured() const { return impl_->graph != nullptr; }

const std::string& CapturedStep::failure() const { return impl_->failure; }

std::optional<StepTensors> CapturedStep::run(const Batch& batch, const Step& step) {
  Impl& s = *impl_;
  if (!s.failure.empty()) return std::nullopt;  // eager since the capture failed
  c10::cuda::CUDAGuard device_guard(s.device);
  if (s.graph) {
    if (!s.fits(batch)) return std::nullopt;
    s.check_gradients();
    s.input.copy_(batch.input, /*non_blocking=*/true);
    s.target.copy_(batch.target, /*non_blocking=*/true);
    s.graph->replay();
    return s.out;
  }
  // Warm-up and capture on the side stream, ordered after everything the
  // training stream has queued (the batch's copy, the last update) and
  // before whatever it queues next.
  const c10::cuda::CUDAStream training = c10::cuda::getCurrentCUDAStream(s.device.index());
  at::cuda::CUDAEvent queued;
  queued.record(training);
  queued.block(s.stream);
  StepTensors result;
  {
    c10::cuda::CUDAStreamGuard on_side(s.stream);
    if (s.warmup > 0) {
      --s.warmup;
      result = step(batch);
    } else {
      result = s.capture(batch, step);
    }
  }
  at::cuda::CUDAEvent done;
  done.record(s.stream);
  done.block(training);
  if (!s.failure.empty()) return std::nullopt;  // the caller runs this batch's step eagerly
  return result;
}

#else

struct CapturedStep::Impl {};
CapturedStep::CapturedStep(c10::Device, std::vector<at::Tensor>, int64_t) {
  throw Error("loop.cuda_graph: " + cuda_graph_refusal({.built_with_cuda = false})->line());
}
CapturedStep::~CapturedStep() = default;
bool CapturedStep::captured() const { return false; }
const std::string& CapturedStep::failure() const {
  static const std::string none;
  return none;
}
std::optional<StepTensors> CapturedStep::run(const Batch&, const Step&) { return std::nullopt; }

#endif

}  // namespace trainyard::host
