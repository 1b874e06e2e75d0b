#pragma once
// The default random generators' states, put back when the object ends:
// work that must not change what a run draws (the wiring check's batch, the
// network's cost, building later stages ahead) runs inside one.
#include <optional>

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>

namespace trainyard::host {

class GeneratorStates {
 public:
  /// Saves the CPU generator's state, and `device`'s generator's when it is a GPU.
  explicit GeneratorStates(const c10::Device& device = c10::Device(c10::kCPU));
  ~GeneratorStates();
  GeneratorStates(const GeneratorStates&) = delete;
  GeneratorStates& operator=(const GeneratorStates&) = delete;

 private:
  at::Generator cpu_;
  std::optional<at::Generator> gpu_;
  at::Tensor cpu_state_, gpu_state_;
};

}  // namespace trainyard::host
