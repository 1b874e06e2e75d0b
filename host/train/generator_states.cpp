#include "train/generator_states.h"

#include <mutex>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/detail/CUDAHooksInterface.h>

namespace trainyard::host {

GeneratorStates::GeneratorStates(const c10::Device& device) : cpu_(at::detail::getDefaultCPUGenerator()) {
  std::lock_guard<std::mutex> lock(cpu_.mutex());
  cpu_state_ = cpu_.get_state();
  if (device.is_cuda()) {
    gpu_ = at::detail::getCUDAHooks().getDefaultGenerator(device.index());
    std::lock_guard<std::mutex> gpu_lock(gpu_->mutex());
    gpu_state_ = gpu_->get_state();
  }
}

GeneratorStates::~GeneratorStates() {
  std::lock_guard<std::mutex> lock(cpu_.mutex());
  cpu_.set_state(cpu_state_);
  if (gpu_) {
    std::lock_guard<std::mutex> gpu_lock(gpu_->mutex());
    gpu_->set_state(gpu_state_);
  }
}

}  // namespace trainyard::host
