// LibTorch's SGD, Adam, AdamW and RMSprop, configured from options; SGD's,
// Adam's and AdamW's updates run by default as ATen's fused kernels (one call
// for all parameters), RMSprop's as ATen's foreach operators (one call per
// operator for all parameters).
#include "optimizers.h"

#include <ATen/ATen.h>

#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>
#include <trainyard/error.h>

namespace optimizers {
namespace {

// What ATen's fused kernels need of a parameter and its gradient: they walk
// parameter, gradient and state as one flat array each, so these must share
// dense strides, a floating type and (across the call) a device.
bool fusable(const at::Tensor& p, const at::Tensor& g, std::optional<at::Device>& device) {
  if (!at::isFloatingType(p.scalar_type()) || g.scalar_type() != p.scalar_type() || g.is_sparse() ||
      !p.is_non_overlapping_and_dense() || g.strides() != p.strides() || (device && *device != p.device()))
    return false;
  device = p.device();
  return true;
}

// An optimizer step's closure, if any, evaluated with gradients on (the step
// itself runs under NoGradGuard): the loss it returns.
template <class Closure>
at::Tensor closure_loss(Closure& closure) {
  if (!closure) return {};
  at::AutoGradMode enable_grad(true);
  return closure();
}

// LibTorch's own step where the fused one cannot run: it cannot skip on the
// device, so the flag is read first (one wait for the device).
template <class Step>
at::Tensor step_unless_read(const std::optional<at::Tensor>& found_inf, Step&& step) {
  if (found_inf && found_inf->item<float>() != 0) return {};
  return step();
}

// LibTorch's SGD with its update in ATen's fused kernel (_fused_sgd_, on CPU
// a vectorized loop per parameter; on CUDA a multi-tensor kernel): the same
// arithmetic as SGD::step (momentum buffer = gradient at the first step,
// Nesterov, weight decay, dampening), but one operator call for all the
// parameters instead of four or five per parameter, which is most of the
// optimizer's cost on small models. Momentum buffers stay in SGD's own state,
// so checkpoints are those of torch::optim::SGD, resumable by either.
class FusedSgd : public torch::optim::SGD, public trainyard::SkippableStep {
 public:
  using torch::optim::SGD::SGD;

  at::Tensor step(LossClosure closure = nullptr) override { return fused_step(std::move(closure), {}); }
  // The kernel returns without a change where found_inf is 1 (checked on the
  // device on CUDA, on the host on the CPU).
  void step_unless(const at::Tensor& found_inf) override { fused_step(nullptr, found_inf); }
  void steps_skipped() override {}  // no count on the host: a skipped first step leaves a zero buffer (below)

 private:
  at::Tensor fused_step(LossClosure closure, const std::optional<at::Tensor>& found_inf) {
    // One pass gathers what the kernel needs; nothing is changed (no state
    // created) before every parameter has passed the check.
    struct Call {
      std::vector<at::Tensor> params, grads, buffers;
    };
    // Per group, one call per (starts a momentum buffer now, dtype): the
    // kernel's is_first_step holds for a whole call, and CUDA's kernel takes
    // one dtype for all its tensors (the CPU's loops per tensor and takes any).
    using CallKey = std::pair<bool, at::ScalarType>;
    std::vector<std::map<CallKey, Call>> calls(param_groups_.size());
    std::optional<at::Device> device;
    for (size_t k = 0; k < param_groups_.size(); ++k) {
      const bool momentum = static_cast<const torch::optim::SGDOptions&>(param_groups_[k].options()).momentum() != 0;
      for (const auto& p : param_groups_[k].params()) {
        const at::Tensor& g = p.grad();
        if (!g.defined()) continue;
        if (!fusable(p, g, device)) return unfused_step(std::move(closure), found_inf);
        at::Tensor buffer;
        if (momentum) {
          if (auto found = state_.find(p.unsafeGetTensorImpl()); found != state_.end()) {
            buffer = static_cast<torch::optim::SGDParamState&>(*found->second).momentum_buffer();
            if (buffer.strides() != p.strides() || buffer.scalar_type() != p.scalar_type())
              return unfused_step(std::move(closure), found_inf);
          }
        }
        // A buffer starting at a step that may be skipped starts at zero, so
        // that the next step's buffer = momentum x 0 + (1 - dampening) x
        // gradient: the first step's, where dampening is 0. With dampening,
        // the flag is read first (an unfused step's price, on first steps only).
        if (momentum && !buffer.defined() && found_inf && o_dampening(k) != 0)
          return unfused_step(std::move(closure), found_inf);
        Call& call = calls[k][{momentum && !buffer.defined(), p.scalar_type()}];
        call.params.push_back(p);
        call.grads.push_back(g);
        if (momentum) call.buffers.push_back(buffer);
      }
    }
    at::NoGradGuard no_grad;
    const at::Tensor loss = closure_loss(closure);
    for (size_t k = 0; k < param_groups_.size(); ++k) {
      const auto& o = static_cast<const torch::optim::SGDOptions&>(param_groups_[k].options());
      for (auto& [key, call] : calls[k]) {
        const bool starts = key.first;
        // The parameters whose momentum buffer starts now: made in the
        // parameter's strides (the kernel reads all three alike).
        for (size_t i = 0; starts && i < call.params.size(); ++i) {
          call.buffers[i] =
              found_inf ? at::zeros_like(call.params[i], at::MemoryFormat::Preserve) : at::empty_like(call.params[i]);
          auto state = std::make_unique<torch::optim::SGDParamState>();
          state->momentum_buffer(call.buffers[i]);
          state_[call.params[i].unsafeGetTensorImpl()] = std::move(state);
        }
        at::_fused_sgd_(call.params, call.grads, call.buffers, o.weight_decay(), o.momentum(), o.lr(), o.dampening(),
                        o.nesterov(), /*maximize=*/false, /*is_first_step=*/starts, /*grad_scale=*/{}, found_inf);
      }
    }
    return loss;
  }

  double o_dampening(size_t group) const {
    return static_cast<const torch::optim::SGDOptions&>(param_groups_[group].options()).dampening();
  }

  at::Tensor unfused_step(LossClosure closure, const std::optional<at::Tensor>& found_inf) {
    return step_unless_read(found_inf, [&] { return torch::optim::SGD::step(std::move(closure)); });
  }
};

// LibTorch's Adam or AdamW with the update in ATen's fused kernel
// (_fused_adam_ / _fused_adamw_: on CUDA one multi-tensor kernel for all
// parameters, on CPU a vectorized pass per parameter) instead of six or seven
// operators per parameter. The arithmetic is Adam's (bias corrections, L2 or
// decoupled weight decay, AMSGrad); the kernel's order of operations differs,
// so results agree with LibTorch's step to float rounding, not bit for bit.
// The moments and the step count stay in LibTorch's own state, so checkpoints
// are those of torch::optim::Adam(W), resumable by either. The kernel reads
// the step count from a tensor on the parameters' device: kept beside the
// state (steps_), advanced with one foreach add, and rebuilt from the state's
// count when that changed (a loaded checkpoint) without reading the device.
template <class Base, class Options, class State, bool Decoupled>
class FusedAdamOf : public Base, public trainyard::SkippableStep {
 public:
  using Base::Base;

  at::Tensor step(typename Base::LossClosure closure = nullptr) override { return fused_step(std::move(closure), {}); }
  // The kernel returns without a change where found_inf is 1; the device's
  // step counts advance by 1 - found_inf, the state's on the host by 1 until
  // steps_skipped() reads them back.
  void step_unless(const at::Tensor& found_inf) override { fused_step(nullptr, found_inf); }
  void steps_skipped() override {
    std::vector<std::pair<State*, Steps*>> kept;
    std::vector<at::Tensor> counts;
    for (auto& [key, steps] : steps_) {
      const auto found = this->state_.find(const_cast<void*>(key));  // state_ is keyed by TensorImpl*
      if (found == this->state_.end() || !steps.count.defined()) continue;
      auto& state = static_cast<State&>(*found->second);
      if (steps.mirrored != state.step()) continue;  // replaced since (a loaded checkpoint): rebuilt at the next step
      kept.emplace_back(&state, &steps);
      counts.push_back(steps.count.to(at::kDouble).reshape({1}));
    }
    if (counts.empty()) return;
    const at::Tensor read = at::cat(counts).cpu();  // one wait for the device
    const double* values = read.const_data_ptr<double>();
    for (size_t i = 0; i < kept.size(); ++i) {
      kept[i].first->step(static_cast<int64_t>(std::llround(values[i])));
      kept[i].second->mirrored = kept[i].first->step();
    }
  }

 private:
  at::Tensor fused_step(typename Base::LossClosure closure, const std::optional<at::Tensor>& found_inf) {
    struct Call {
      std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps;
    };
    // Per group, one call per dtype: CUDA's kernel refuses lists of several
    // ("params, grads, exp_avgs, and exp_avg_sqs must have same dtype,
    // device, and layout"); the CPU's loops per tensor and takes any.
    std::vector<std::map<at::ScalarType, Call>> calls(this->param_groups_.size());
    std::optional<at::Device> device;
    for (size_t k = 0; k < this->param_groups_.size(); ++k)
      for (const auto& p : this->param_groups_[k].params()) {
        const at::Tensor& g = p.grad();
        if (!g.defined()) continue;
        if (!fusable(p, g, device)) return unfused_step(std::move(closure), found_inf);
        // Moments loaded from a checkpoint of another layout (a network made
        // channels_last since) are walked as flat arrays too: LibTorch's step then.
        if (const auto found = this->state_.find(p.unsafeGetTensorImpl()); found != this->state_.end()) {
          const auto& state = static_cast<const State&>(*found->second);
          for (const at::Tensor& moment : {state.exp_avg(), state.exp_avg_sq(), state.max_exp_avg_sq()})
            if (moment.defined() && (moment.strides() != p.strides() || moment.scalar_type() != p.scalar_type() ||
                                     moment.device() != p.device()))
              return unfused_step(std::move(closure), found_inf);
        }
      }
    at::NoGradGuard no_grad;
    const at::Tensor loss = closure_loss(closure);
    std::vector<at::Tensor> all_steps;
    for (size_t k = 0; k < this->param_groups_.size(); ++k) {
      const auto& o = static_cast<const Options&>(this->param_groups_[k].options());
      for (const auto& p : this->param_groups_[k].params()) {
        if (!p.grad().defined()) continue;
        auto& slot = this->state_[p.unsafeGetTensorImpl()];
        if (!slot) {  // as LibTorch's step starts a parameter's state
          auto fresh = std::make_unique<State>();
          fresh->step(0);
          fresh->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
          fresh->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
          if (o.amsgrad()) fresh->max_exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
          slot = std::move(fresh);
        }
        auto& state = static_cast<State&>(*slot);
        Steps& steps = steps_[p.unsafeGetTensorImpl()];
        if (!steps.count.defined() || steps.mirrored != state.step())
          steps.count = at::full({}, static_cast<double>(state.step()), p.options().dtype(at::kFloat));
        state.step(state.step() + 1);
        steps.mirrored = state.step();
        Call& call = calls[k][p.scalar_type()];
        call.params.push_back(p);
        call.grads.push_back(p.grad());
        call.exp_avgs.push_back(state.exp_avg());
        call.exp_avg_sqs.push_back(state.exp_avg_sq());
        if (o.amsgrad()) call.max_exp_avg_sqs.push_back(state.max_exp_avg_sq());
        call.steps.push_back(steps.count);
        all_steps.push_back(steps.count);
      }
    }
    if (!all_steps.empty()) {
      if (found_inf)
        at::_foreach_add_(all_steps, 1 - *found_inf);  // a skipped step leaves the count
      else
        at::_foreach_add_(all_steps, 1);
    }
    for (size_t k = 0; k < this->param_groups_.size(); ++k) {
      const auto& o = static_cast<const Options&>(this->param_groups_[k].options());
      const auto [beta1, beta2] = o.betas();
      for (auto& [dtype, c] : calls[k]) {
        if constexpr (Decoupled)
          at::_fused_adamw_(c.params, c.grads, c.exp_avgs, c.exp_avg_sqs, c.max_exp_avg_sqs, c.steps, o.lr(), beta1,
                            beta2, o.weight_decay(), o.eps(), o.amsgrad(), /*maximize=*/false, /*grad_scale=*/{},
                            found_inf);
        else
          at::_fused_adam_(c.params, c.grads, c.exp_avgs, c.exp_avg_sqs, c.max_exp_avg_sqs, c.steps, o.lr(), beta1,
                           beta2, o.weight_decay(), o.eps(), o.amsgrad(), /*maximize=*/false, /*grad_scale=*/{},
                           found_inf);
      }
    }
    return loss;
  }

  at::Tensor unfused_step(typename Base::LossClosure closure, const std::optional<at::Tensor>& found_inf) {
    return step_unless_read(found_inf, [&] { return Base::step(std::move(closure)); });
  }

  struct Steps {
    at::Tensor count;      ///< the step count on the parameter's device, as the kernel reads it
    int64_t mirrored = 0;  ///< the state's count it was last set to
  };
  std::map<const void*, Steps> steps_;
};
using FusedAdam = FusedAdamOf<torch::optim::Adam, torch::optim::AdamOptions, torch::optim::AdamParamState, false>;
using FusedAdamW = FusedAdamOf<torch::optim::AdamW, torch::optim::AdamWOptions, torch::optim::AdamWParamState, true>;

// LibTorch's RMSprop with its update as ATen's multi-tensor (_foreach_)
// operators: ATen has no fused RMSprop kernel, but each of the step's
// operators runs once for all the parameters of a group (on CUDA a few
// multi-tensor kernels) instead of once per parameter. The arithmetic and its
// order are RMSprop::step's: L2 weight decay added to the gradient, the
// running average of squared gradients (and of gradients, centered), its
// root plus eps as the denominator, then the update directly or through the
// momentum buffer. The state is RMSprop's own (step, square_avg,
// momentum_buffer, grad_avg), so checkpoints are those of
// torch::optim::RMSprop, resumable by either.
class ForeachRmsprop : public torch::optim::RMSprop {
 public:
  using torch::optim::RMSprop::RMSprop;

  at::Tensor step(LossClosure closure = nullptr) override {
    for (const auto& group : param_groups_)
      for (const auto& p : group.params())
        if (p.grad().defined() && p.grad().is_sparse())
          return torch::optim::RMSprop::step(std::move(closure));  // refuses it with LibTorch's message
    at::NoGradGuard no_grad;
    const at::Tensor loss = closure_loss(closure);
    // Per group, per (device, dtype): the multi-tensor kernels' fast path
    // takes one of each (a mixed list is a kernel per tensor on CUDA).
    struct Call {
      std::vector<at::Tensor> params, grads, square_avgs, momentum_buffers, grad_avgs;
    };
    for (auto& group : param_groups_) {
      const auto& o = static_cast<const torch::optim::RMSpropOptions&>(group.options());
      std::map<std::pair<std::string, at::ScalarType>, Call> calls;
      for (const auto& p : group.params()) {
        if (!p.grad().defined()) continue;
        auto& slot = state_[p.unsafeGetTensorImpl()];
        if (!slot) {  // as LibTorch's step starts a parameter's state
          auto fresh = std::make_unique<torch::optim::RMSpropParamState>();
          fresh->step(0);
          fresh->square_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
          slot = std::move(fresh);
        }
        auto& state = static_cast<torch::optim::RMSpropParamState&>(*slot);
        // Started here when missing: also after a load from a run whose
        // momentum or centering was off.
        if (o.momentum() > 0 && !state.momentum_buffer().defined())
          state.momentum_buffer(at::zeros_like(p, at::MemoryFormat::Preserve));
        if (o.centered() && !state.grad_avg().defined()) state.grad_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
        state.step(state.step() + 1);
        Call& c = calls[{p.device().str(), p.scalar_type()}];
        c.params.push_back(p);
        c.grads.push_back(p.grad());
        c.square_avgs.push_back(state.square_avg());
        if (o.momentum() > 0) c.momentum_buffers.push_back(state.momentum_buffer());
        if (o.centered()) c.grad_avgs.push_back(state.grad_avg());
      }
      for (auto& [key, c] : calls) update(o, c.params, c.grads, c.square_avgs, c.momentum_buffers, c.grad_avgs);
    }
    return loss;
  }

 private:
  // One (device, dtype) bucket of a group: RMSprop::step's operators, each once for all its tensors.
  static void update(const torch::optim::RMSpropOptions& o, std::vector<at::Tensor>& params,
                     std::vector<at::Tensor> grads, std::vector<at::Tensor>& square_avgs,
                     std::vector<at::Tensor>& momentum_buffers, std::vector<at::Tensor>& grad_avgs) {
    if (o.weight_decay() != 0) grads = at::_foreach_add(grads, params, o.weight_decay());
    at::_foreach_mul_(square_avgs, o.alpha());
    at::_foreach_addcmul_(square_avgs, grads, grads, 1 - o.alpha());
    std::vector<at::Tensor> avg;
    if (o.centered()) {
      at::_foreach_mul_(grad_avgs, o.alpha());
      at::_foreach_add_(grad_avgs, grads, 1 - o.alpha());
      avg = at::_foreach_addcmul(square_avgs, grad_avgs, grad_avgs, -1);
      at::_foreach_sqrt_(avg);
    } else {
      avg = at::_foreach_sqrt(square_avgs);
    }
    at::_foreach_add_(avg, o.eps());
    if (o.momentum() > 0) {
      at::_foreach_mul_(momentum_buffers, o.momentum());
      at::_foreach_addcdiv_(momentum_buffers, grads, avg);
      at::_foreach_add_(params, momentum_buffers, -o.lr());
    } else {
      at::_foreach_addcdiv_(params, grads, avg, -o.lr());
    }
  }
};

// The options of all four optimizers: each schema below binds the fields it
// declares (with their defaults); an optimizer reads only its own.
struct OptimizerOptions {
  double lr = 0;
  double weight_decay = 0;
  double momentum = 0;          // sgd, rmsprop
  double eps = 0;               // adam, adamw, rmsprop
  double dampening = 0;         // sgd
  bool nesterov = false;        // sgd
  bool fused = false;           // sgd, adam, adamw
  bool foreach = false;         // rmsprop
  double beta1 = 0, beta2 = 0;  // adam, adamw
  bool amsgrad = false;         // adam, adamw
  double decay = 0;             // rmsprop
  bool centered = false;        // rmsprop
};
using OptimizerSchema = trainyard::TypedSchema<OptimizerOptions>;

// The keys several optimizers share, declared once; only lr's default differs.
void add_lr(OptimizerSchema& t, double default_lr) {
  t.add("lr", &OptimizerOptions::lr, default_lr, "learning rate").min(0.0);
}
void add_momentum(OptimizerSchema& t) {
  t.add("momentum", &OptimizerOptions::momentum, 0.0, "momentum factor").range(0.0, 1.0);
}
void add_eps(OptimizerSchema& t) {
  t.add("eps", &OptimizerOptions::eps, 1e-8, "term added to the denominator").min(0.0);
}
void add_weight_decay(OptimizerSchema& t) {
  t.add("weight_decay", &OptimizerOptions::weight_decay, 0.0, "L2 penalty").min(0.0);
}

const OptimizerSchema& sgd_typed_schema() {
  static const OptimizerSchema s = [] {
    OptimizerSchema t;
    add_lr(t, 0.01);
    add_momentum(t);
    t.add("dampening", &OptimizerOptions::dampening, 0.0, "dampening of the momentum").range(0.0, 1.0);
    t.add("nesterov", &OptimizerOptions::nesterov, false, "Nesterov momentum (needs momentum > 0, dampening 0)");
    add_weight_decay(t);
    t.add("fused", &OptimizerOptions::fused, true,
          "update with ATen's fused kernel (same arithmetic, one call for all parameters; false: LibTorch's "
          "per-parameter SGD::step)");
    return t;
  }();
  return s;
}

// Adam's and AdamW's: AdamW decouples weight_decay, with the same options.
const OptimizerSchema& adam_typed_schema() {
  static const OptimizerSchema s = [] {
    OptimizerSchema t;
    add_lr(t, 0.001);
    t.add("beta1", &OptimizerOptions::beta1, 0.9, "decay of the first moment estimate").range(0.0, 0.999999);
    t.add("beta2", &OptimizerOptions::beta2, 0.999, "decay of the second moment estimate").range(0.0, 0.999999);
    add_eps(t);
    add_weight_decay(t);
    t.add("amsgrad", &OptimizerOptions::amsgrad, false, "use the AMSGrad variant");
    t.add("fused", &OptimizerOptions::fused, true,
          "update with ATen's fused kernel (one call for all parameters on CUDA; results equal LibTorch's to float "
          "rounding; false: LibTorch's per-parameter step)");
    return t;
  }();
  return s;
}

const OptimizerSchema& rmsprop_typed_schema() {
  static const OptimizerSchema s = [] {
    OptimizerSchema t;
    add_lr(t, 0.01);
    t.add("decay", &OptimizerOptions::decay, 0.99, "decay of the running average of squared gradients (alpha)")
        .range(0.0, 1.0);
    add_momentum(t);
    add_eps(t);
    add_weight_decay(t);
    t.add("centered", &OptimizerOptions::centered, false, "normalize by an estimate of the gradient's variance");
    t.add("foreach", &OptimizerOptions::foreach, true,
          "update with ATen's foreach operators (LibTorch's arithmetic, each operator one call for all parameters; "
          "false: LibTorch's per-parameter RMSprop::step)");
    return t;
  }();
  return s;
}

class Sgd : public trainyard::Optimizer {
 public:
  explicit Sgd(const OptimizerOptions& o)
      : options_(torch::optim::SGDOptions(o.lr)
                     .momentum(o.momentum)
                     .dampening(o.dampening)
                     .weight_decay(o.weight_decay)
                     .nesterov(o.nesterov)),
        fused_(o.fused) {
    if (options_.nesterov() && (options_.momentum() <= 0 || options_.dampening() != 0))
      throw trainyard::ConfigError("nesterov needs momentum and no dampening",
                                   "expected momentum > 0 and dampening 0, got momentum " +
                                       std::to_string(options_.momentum()) + ", dampening " +
                                       std::to_string(options_.dampening()),
                                   "set momentum > 0 and dampening: 0, or nesterov: false");
  }
  std::unique_ptr<torch::optim::Optimizer> build(std::vector<torch::optim::OptimizerParamGroup> groups) override {
    if (fused_) return std::make_unique<FusedSgd>(std::move(groups), options_);
    return std::make_unique<torch::optim::SGD>(std::move(groups), options_);
  }

 private:
  torch::optim::SGDOptions options_;
  bool fused_ = true;
};

class Adam : public trainyard::Optimizer {
 public:
  explicit Adam(const OptimizerOptions& o)
      : options_(torch::optim::AdamOptions(o.lr)
                     .betas({o.beta1, o.beta2})
                     .eps(o.eps)
                     .weight_decay(o.weight_decay)
                     .amsgrad(o.amsgrad)),
        fused_(o.fused) {}
  std::unique_ptr<torch::optim::Optimizer> build(std::vector<torch::optim::OptimizerParamGroup> groups) override {
    if (fused_) return std::make_unique<FusedAdam>(std::move(groups), options_);
    return std::make_unique<torch::optim::Adam>(std::move(groups), options_);
  }

 private:
  torch::optim::AdamOptions options_;
  bool fused_ = true;
};

class AdamW : public trainyard::Optimizer {
 public:
  explicit AdamW(const OptimizerOptions& o)
      : options_(torch::optim::AdamWOptions(o.lr)
                     .betas({o.beta1, o.beta2})
                     .eps(o.eps)
                     .weight_decay(o.weight_decay)
                     .amsgrad(o.amsgrad)),
        fused_(o.fused) {}
  std::unique_ptr<torch::optim::Optimizer> build(std::vector<torch::optim::OptimizerParamGroup> groups) override {
    if (fused_) return std::make_unique<FusedAdamW>(std::move(groups), options_);
    return std::make_unique<torch::optim::AdamW>(std::move(groups), options_);
  }

 private:
  torch::optim::AdamWOptions options_;
  bool fused_ = true;
};

class RmsProp : public trainyard::Optimizer {
 public:
  explicit RmsProp(const OptimizerOptions& o)
      : options_(torch::optim::RMSpropOptions(o.lr)
                     .alpha(o.decay)
                     .eps(o.eps)
                     .momentum(o.momentum)
                     .weight_decay(o.weight_decay)
                     .centered(o.centered)),
        foreach_(o.foreach) {}
  std::unique_ptr<torch::optim::Optimizer> build(std::vector<torch::optim::OptimizerParamGroup> groups) override {
    if (foreach_) return std::make_unique<ForeachRmsprop>(std::move(groups), options_);
    return std::make_unique<torch::optim::RMSprop>(std::move(groups), options_);
  }

 private:
  torch::optim::RMSpropOptions options_;
  bool foreach_ = true;
};

}  // namespace

trainyard::Schema sgd_schema() { return sgd_typed_schema().schema(); }

std::shared_ptr<trainyard::Optimizer> make_sgd(const trainyard::Options& options) {
  return std::make_shared<Sgd>(sgd_typed_schema().bind(options));
}

trainyard::Schema adam_schema() { return adam_typed_schema().schema(); }

std::shared_ptr<trainyard::Optimizer> make_adam(const trainyard::Options& options) {
  return std::make_shared<Adam>(adam_typed_schema().bind(options));
}

trainyard::Schema adamw_schema() { return adam_typed_schema().schema(); }

std::shared_ptr<trainyard::Optimizer> make_adamw(const trainyard::Options& options) {
  return std::make_shared<AdamW>(adam_typed_schema().bind(options));
}

trainyard::Schema rmsprop_schema() { return rmsprop_typed_schema().schema(); }

std::shared_ptr<trainyard::Optimizer> make_rmsprop(const trainyard::Options& options) {
  return std::make_shared<RmsProp>(rmsprop_typed_schema().bind(options));
}

}  // namespace optimizers
