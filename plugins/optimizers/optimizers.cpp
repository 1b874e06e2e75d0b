// LibTorch's SGD and Adam, configured from options.
#include "optimizers.h"

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>
#include <trainyard/error.h>

namespace optimizers {
namespace {

class Sgd : public trainyard::Optimizer {
 public:
  explicit Sgd(const trainyard::Options& o)
      : options_(torch::optim::SGDOptions(o.get<double>("lr"))
                     .momentum(o.get<double>("momentum"))
                     .dampening(o.get<double>("dampening"))
                     .weight_decay(o.get<double>("weight_decay"))
                     .nesterov(o.get<bool>("nesterov"))) {
    if (options_.nesterov() && (options_.momentum() <= 0 || options_.dampening() != 0))
      throw trainyard::ConfigError("nesterov needs momentum and no dampening",
                                   "expected momentum > 0 and dampening 0, got momentum " +
                                       std::to_string(options_.momentum()) + ", dampening " +
                                       std::to_string(options_.dampening()),
                                   "set momentum > 0 and dampening: 0, or nesterov: false");
  }
  std::unique_ptr<torch::optim::Optimizer> build(std::vector<torch::optim::OptimizerParamGroup> groups) override {
    return std::make_unique<torch::optim::SGD>(std::move(groups), options_);
  }

 private:
  torch::optim::SGDOptions options_;
};

class Adam : public trainyard::Optimizer {
 public:
  explicit Adam(const trainyard::Options& o)
      : options_(torch::optim::AdamOptions(o.get<double>("lr"))
                     .betas({o.get<double>("beta1"), o.get<double>("beta2")})
                     .eps(o.get<double>("eps"))
                     .weight_decay(o.get<double>("weight_decay"))
                     .amsgrad(o.get<bool>("amsgrad"))) {}
  std::unique_ptr<torch::optim::Optimizer> build(std::vector<torch::optim::OptimizerParamGroup> groups) override {
    return std::make_unique<torch::optim::Adam>(std::move(groups), options_);
  }

 private:
  torch::optim::AdamOptions options_;
};

class AdamW : public trainyard::Optimizer {
 public:
  explicit AdamW(const trainyard::Options& o)
      : options_(torch::optim::AdamWOptions(o.get<double>("lr"))
                     .betas({o.get<double>("beta1"), o.get<double>("beta2")})
                     .eps(o.get<double>("eps"))
                     .weight_decay(o.get<double>("weight_decay"))
                     .amsgrad(o.get<bool>("amsgrad"))) {}
  std::unique_ptr<torch::optim::Optimizer> build(std::vector<torch::optim::OptimizerParamGroup> groups) override {
    return std::make_unique<torch::optim::AdamW>(std::move(groups), options_);
  }

 private:
  torch::optim::AdamWOptions options_;
};

class RmsProp : public trainyard::Optimizer {
 public:
  explicit RmsProp(const trainyard::Options& o)
      : options_(torch::optim::RMSpropOptions(o.get<double>("lr"))
                     .alpha(o.get<double>("decay"))
                     .eps(o.get<double>("eps"))
                     .momentum(o.get<double>("momentum"))
                     .weight_decay(o.get<double>("weight_decay"))
                     .centered(o.get<bool>("centered"))) {}
  std::unique_ptr<torch::optim::Optimizer> build(std::vector<torch::optim::OptimizerParamGroup> groups) override {
    return std::make_unique<torch::optim::RMSprop>(std::move(groups), options_);
  }

 private:
  torch::optim::RMSpropOptions options_;
};

}  // namespace

trainyard::Schema adamw_schema() { return adam_schema(); }

std::shared_ptr<trainyard::Optimizer> make_adamw(const trainyard::Options& options) {
  return std::make_shared<AdamW>(options);
}

trainyard::Schema rmsprop_schema() {
  trainyard::Schema s;
  s.add("lr", 0.01, "learning rate").min(0.0);
  s.add("decay", 0.99, "decay of the running average of squared gradients (alpha)").range(0.0, 1.0);
  s.add("momentum", 0.0, "momentum factor").range(0.0, 1.0);
  s.add("eps", 1e-8, "term added to the denominator").min(0.0);
  s.add("weight_decay", 0.0, "L2 penalty").min(0.0);
  s.add("centered", false, "normalize by an estimate of the gradient's variance");
  return s;
}

std::shared_ptr<trainyard::Optimizer> make_rmsprop(const trainyard::Options& options) {
  return std::make_shared<RmsProp>(options);
}

trainyard::Schema sgd_schema() {
  trainyard::Schema s;
  s.add("lr", 0.01, "learning rate").min(0.0);
  s.add("momentum", 0.0, "momentum factor").range(0.0, 1.0);
  s.add("dampening", 0.0, "dampening of the momentum").range(0.0, 1.0);
  s.add("nesterov", false, "Nesterov momentum (needs momentum > 0, dampening 0)");
  s.add("weight_decay", 0.0, "L2 penalty").min(0.0);
  return s;
}

std::shared_ptr<trainyard::Optimizer> make_sgd(const trainyard::Options& options) {
  return std::make_shared<Sgd>(options);
}

trainyard::Schema adam_schema() {
  trainyard::Schema s;
  s.add("lr", 0.001, "learning rate").min(0.0);
  s.add("beta1", 0.9, "decay of the first moment estimate").range(0.0, 0.999999);
  s.add("beta2", 0.999, "decay of the second moment estimate").range(0.0, 0.999999);
  s.add("eps", 1e-8, "term added to the denominator").min(0.0);
  s.add("weight_decay", 0.0, "L2 penalty").min(0.0);
  s.add("amsgrad", false, "use the AMSGrad variant");
  return s;
}

std::shared_ptr<trainyard::Optimizer> make_adam(const trainyard::Options& options) {
  return std::make_shared<Adam>(options);
}

}  // namespace optimizers
