#include "train/dry_run.h"
#include "train/precision.h"
#include "util/shape.h"

#include <chrono>
#include <deque>
#include <map>
#include <set>
#include <sstream>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/optim/optimizer.h>

#include "data/loader.h"
#include "train/guard.h"
#include "train/trainer.h"
#include "util/text.h"

namespace trainyard::host {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

std::string module_of(const std::string& parameter) {
  auto dot = parameter.rfind('.');
  return dot == std::string::npos ? "" : parameter.substr(0, dot);
}

// The output shape of every module that owns parameters, read off the
// autograd graph: the node that consumes a module's parameter (directly, or
// through a transpose or view of it) computed that module's output, and its
// input metadata holds the output's shape. Modules without parameters (ReLU,
// pooling) leave no such trace.
std::map<std::string, std::string> output_shapes(Network& net, const at::Tensor& loss, int64_t batch) {
  std::map<const torch::autograd::Node*, std::string> owner;
  for (const auto& p : net.named_parameters())
    if (p.value().requires_grad())
      if (auto acc = torch::autograd::impl::try_get_grad_accumulator(p.value())) owner[acc.get()] = p.key();
  auto param_behind = [&](const torch::autograd::Node* n) -> std::string {
    if (owner.count(n)) return owner[n];
    // A transpose/view/expand of a parameter (Linear's weight.t()).
    if (n && n->num_outputs() == 1 && n->next_edges().size() == 1 && n->next_edges()[0].function)
      if (owner.count(n->next_edges()[0].function.get())) return owner[n->next_edges()[0].function.get()];
    return "";
  };
  std::map<std::string, std::string> shapes;
  std::set<const torch::autograd::Node*> seen;
  std::deque<torch::autograd::Node*> todo;
  if (loss.grad_fn()) todo.push_back(loss.grad_fn().get());
  while (!todo.empty()) {
    torch::autograd::Node* n = todo.front();
    todo.pop_front();
    if (!seen.insert(n).second) continue;
    for (const auto& edge : n->next_edges()) {
      if (!edge.function) continue;
      const std::string param = param_behind(edge.function.get());
      if (!param.empty() && n->num_inputs() > 0) {
        // (1.13 keeps the shape private; a zero tensor of it, once per module, is cheap enough here)
        if (!shapes.count(module_of(param))) {
          at::Tensor like = n->input_metadata(0).zeros_like();
          if (like.dim() > 0 && like.size(0) == batch) shapes[module_of(param)] = shape_text(like.sizes());
        }
      }
      todo.push_back(edge.function.get());
    }
  }
  return shapes;
}

}  // namespace

std::string dry_run_report(const Experiment& e, Components& c, const Context& context) {
  std::ostringstream out;
  Network& net = *c.network.object;

  // One training batch: data, forward, loss, backward, optimizer step, each timed.
  auto t0 = Clock::now();
  EpochPlan plan = make_epoch_plan(e, *c.train_data.object, context);
  auto stats = std::make_shared<LoaderStats>();
  BatchStream train = guarded(*c.train_data.config, "get_batch", [&] {
    return batch_stream(*c.train_data.object, plan.indices(0), 0, 0,
                        make_loader_options(e, *c.train_data.config, *c.train_data.object, plan.batch_size, context), stats);
  });
  std::optional<Batch> batch = guarded(*c.train_data.config, "get_batch", train);
  const double data_ms = ms_since(t0);
  if (!batch) throw Error("dry run: the training set gives no batch");
  net.train();
  for (auto& m : c.frozen) m->eval();
  c.optimizer->zero_grad();
  t0 = Clock::now();
  auto forward = [&](const Batch& b) {
    return forward_in_precision(context.device.type(), e.loop.effective_precision(), [&] {
      return guarded(*c.network.config, "forward", [&] { return net.forward(b); });
    });
  };
  at::Tensor output = forward(*batch);
  const double forward_ms = ms_since(t0);
  t0 = Clock::now();
  at::Tensor loss = guarded(*c.loss.config, "compute", [&] { return c.loss.object->compute(output, *batch); });
  const double loss_ms = ms_since(t0);
  const auto shapes = output_shapes(net, loss, batch->size());
  t0 = Clock::now();
  guarded(*c.network.config, "backward", [&] { loss.backward(); });
  const double backward_ms = ms_since(t0);
  t0 = Clock::now();
  guarded(*c.optimizer_plugin.config, "step", [&] { c.optimizer->step(); });
  const double step_ms = ms_since(t0);

  // One test batch, as the test pass runs it.
  double test_ms = 0;
  std::string test_shape = "(no dataset.test)";
  if (c.test_data.object) {
    BatchStream test = guarded(*c.test_data.config, "get_batch", [&] {
      std::vector<int64_t> order;
      const int64_t bs = e.loop.test_batch_per_device > 0 ? e.loop.test_batch_per_device : e.loop.batch_per_device;
      for (int64_t i = 0; i < std::min(bs, c.test_data.object->size()); ++i) order.push_back(i);
      return batch_stream(*c.test_data.object, std::move(order), 0, 0,
                          make_loader_options(e, *c.test_data.config, *c.test_data.object, bs, context), stats);
    });
    std::optional<Batch> tb = guarded(*c.test_data.config, "get_batch", test);
    if (tb) {
      net.eval();
      at::NoGradGuard no_grad;
      t0 = Clock::now();
      at::Tensor o = forward(*tb);
      test_ms = ms_since(t0);
      test_shape = shape_text(o.sizes());
      net.train();
    }
  }

  out << "dry run of " << e.path << " (" << e.name << "): nothing is written\n";
  out << "plugins:\n";
  std::set<std::string> listed;
  auto plugin = [&](const ComponentConfig& cc) {
    if (!cc.component) return;
    const auto& lib = *cc.component->library;
    out << "  " << cc.key << ": " << cc.plugin << " (" << lib.name << " " << lib.version << ", " << lib.path << ")\n";
  };
  for (const auto* cc : {&e.train_data, &e.test_data, &e.network, &e.loss, &e.optimizer}) plugin(*cc);
  for (const auto* list : {&e.meters, &e.callbacks, &e.overrides})
    for (const auto& cc : *list) plugin(cc);

  out << "input batch: " << shape_text(batch->input.sizes()) << " " << c10::toString(batch->input.scalar_type())
      << ", target " << shape_text(batch->target.sizes()) << "\n";
  out << "network " << e.network.plugin << ": module (parameters, trainable) -> output shape\n";
  for (const auto& m : net.named_modules()) {
    int64_t count = 0, trainable = 0;
    for (const auto& p : m.value()->parameters()) {
      count += p.numel();
      if (p.requires_grad()) trainable += p.numel();
    }
    const std::string name = m.key().empty() ? "(network)" : m.key();
    const size_t depth = m.key().empty() ? 0 : std::count(m.key().begin(), m.key().end(), '.') + 1;
    auto shape = m.key().empty() ? shape_text(output.sizes()) : (shapes.count(m.key()) ? shapes.at(m.key()) : "");
    out << "  " << std::string(2 * depth, ' ') << name << " " << m.value()->name() << " (" << count << ", "
        << trainable << ")" << (shape.empty() ? "" : " -> " + shape) << "\n";
  }
  out << "loss " << e.loss.plugin << ": " << loss.item<double>() << "\n";
  char times[256];
  std::snprintf(times, sizeof times,
                "one train step (ms): data %.1f, forward %.1f, loss %.1f, backward %.1f, optimizer %.1f; "
                "one test batch forward %.1f -> %s\n",
                data_ms, forward_ms, loss_ms, backward_ms, step_ms, test_ms, test_shape.c_str());
  out << times;
  return out.str();
}

}  // namespace trainyard::host
