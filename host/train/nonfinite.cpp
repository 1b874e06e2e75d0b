#include "train/nonfinite.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

#include "util/json.h"
#include "util/text.h"

namespace trainyard::host {

std::string iteration_text(const LoopPosition& at) {
  return "iteration " + std::to_string(at.iteration + 1) + " (epoch " + std::to_string(at.epoch + 1) + ", batch " +
         std::to_string(at.position + 1) + ")";
}

std::string norm_text(double norm) { return std::isnan(norm) ? "NaN" : std::isinf(norm) ? "inf" : json_number(norm); }

std::string nonfinite_stop_message(const NonFiniteStopReport& r) {
  const bool on_device = !r.read.empty();
  return "stopped at " + r.at + ": " + r.cause +
         (r.in_a_row > 0 ? " (" + std::to_string(r.in_a_row) + " updates in a row)" : "") +
         (on_device ? "; " + r.read : "") + "; the last good state is checkpointed " +
         (on_device ? "where it was read (" : "at this batch (") +
         (on_device ? "set loop.update_checks_every: 1 or --debug for the layer that made it; " : "") +
         "set loop.nonfinite: skip to drop such updates, or lower the learning rate and resume, allowing that "
         "config change)";
}

namespace {

bool finite(const at::Tensor& t) {
  if (!t.defined() || !t.is_floating_point() || t.numel() == 0) return true;
  return t.isfinite().all().item<bool>();
}

// The forward watcher. LibTorch has no forward hooks on C++ modules, so the
// watch is one level lower: while it is on, every ATen operator call passes
// through a boxed fallback registered on a dispatch mode key, which looks at
// the call's inputs (to see which layer's parameters it used) and outputs
// (to find the first non-finite one), then lets the call through. The key is
// the dispatcher's generic test mode (TESTING_ONLY_GenericMode): nothing else
// in LibTorch uses it, and it is switched on only for this diagnostic pass,
// on this thread, after a non-finite value has already stopped training.
struct Watch {
  std::map<const c10::TensorImpl*, std::string> parameters;
  std::string last_layer, found;
  int depth = 0;
};
thread_local Watch* g_watch = nullptr;

std::string module_of(const std::string& parameter) {
  auto dot = parameter.rfind('.');
  return dot == std::string::npos ? "(network)" : parameter.substr(0, dot);
}

void for_each_tensor(const c10::IValue& v, const std::function<void(const at::Tensor&)>& f) {
  if (v.isTensor())
    f(v.toTensor());
  else if (v.isTensorList())
    for (const at::Tensor& t : v.toTensorVector()) f(t);
}

void watch_call(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  Watch* w = g_watch;
  const bool top = w && w->depth == 0 && w->found.empty();
  std::string layer;
  bool inputs_finite = true;
  // The watch's own checks (isfinite, all) must not be watched.
  auto unwatched = [](auto&& f) {
    c10::impl::ExcludeDispatchKeyGuard off(c10::DispatchKey::TESTING_ONLY_GenericMode);
    return f();
  };
  if (top) {
    for (const auto& v : torch::jit::last(*stack, op.schema().arguments().size()))
      for_each_tensor(v, [&](const at::Tensor& t) {
        auto it = w->parameters.find(t.unsafeGetTensorImpl());
        if (it != w->parameters.end()) layer = module_of(it->second);
        inputs_finite = inputs_finite && unwatched([&] { return finite(t); });
      });
  }
  if (w) ++w->depth;
  op.redispatchBoxed(
      keys & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, c10::DispatchKey::TESTING_ONLY_GenericMode), stack);
  if (w) --w->depth;
  if (!top) return;
  if (!layer.empty()) w->last_layer = layer;
  bool outputs_finite = true;
  for (const auto& v : torch::jit::last(*stack, op.schema().returns().size()))
    for_each_tensor(
        v, [&](const at::Tensor& t) { outputs_finite = outputs_finite && unwatched([&] { return finite(t); }); });
  if (!outputs_finite)
    w->found =
        op.schema().name() +
        (layer.empty() ? (w->last_layer.empty() ? " (before any layer with parameters"
                                                : " (after layer '" + w->last_layer + "', the last with parameters")
                       : " (in layer '" + layer + "'") +
        (inputs_finite ? "; its inputs were finite)" : "; its inputs were already not finite)");
}

}  // namespace
}  // namespace trainyard::host

TORCH_LIBRARY_IMPL(_, TESTING_ONLY_GenericMode, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&trainyard::host::watch_call>());
}

namespace trainyard::host {

std::vector<std::string> nonfinite_parameters(Network& network, bool with_buffers) {
  std::vector<std::string> bad;
  at::NoGradGuard no_grad;
  for (const auto& p : network.named_parameters())
    if (!finite(p.value())) bad.push_back(p.key());
  if (with_buffers)
    for (const auto& b : network.named_buffers())
      if (!finite(b.value())) bad.push_back(b.key() + " (buffer)");
  return bad;
}

std::vector<std::string> nonfinite_gradients(Network& network) {
  std::vector<std::string> bad;
  at::NoGradGuard no_grad;
  for (const auto& p : network.named_parameters())
    if (p.value().grad().defined() && !finite(p.value().grad())) bad.push_back(p.key());
  return bad;
}

std::string locate_nonfinite_forward(Network& network, const Batch& batch) {
  Watch watch;
  for (const auto& p : network.named_parameters()) watch.parameters[p.value().unsafeGetTensorImpl()] = p.key();
  for (const auto& b : network.named_buffers()) watch.parameters[b.value().unsafeGetTensorImpl()] = b.key();
  g_watch = &watch;
  try {
    at::NoGradGuard no_grad;
    c10::impl::IncludeDispatchKeyGuard on(c10::DispatchKey::TESTING_ONLY_GenericMode);
    network.forward(batch);
  } catch (...) {
    g_watch = nullptr;
    throw;
  }
  g_watch = nullptr;
  return watch.found;
}

std::string diagnose_nonfinite_loss(Network& network, const Batch& batch, const at::Tensor& output,
                                    const std::string& loss_name, const std::string& network_label) {
  auto bad = nonfinite_parameters(network);
  if (!bad.empty()) return "these parameters are not finite (a previous update made them so): " + join(bad);
  const std::string loss = "the loss '" + loss_name + "'";
  if (finite(output)) {
    // A finite output so large that arithmetic on it overflows (its square
    // past float's range) is the network's doing, though the loss overflowed.
    const double largest = output.defined() && output.numel() > 0 && output.is_floating_point()
                               ? output.detach().abs().max().item<double>()
                               : 0.0;
    if (largest > std::sqrt(static_cast<double>(std::numeric_limits<float>::max()))) {
      char text[32];
      std::snprintf(text, sizeof text, "%.3g", largest);
      return "the output of " + network_label + " is finite but extreme (largest magnitude " + text + "): " + loss +
             " overflowed on it; check the network's forward";
    }
    return "the network's output is finite: " + loss + " produced it";
  }
  const std::string where = locate_nonfinite_forward(network, batch);
  const std::string not_loss = "; the output of " + network_label + " was already not finite, before " + loss;
  if (where.empty())
    return "the network's output is not finite, but was finite when run again (nondeterministic?)" + not_loss;
  return "the first non-finite value in the forward pass came from " + where + not_loss;
}

}  // namespace trainyard::host
