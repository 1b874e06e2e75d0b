#include "train/dry_run.h"
#include "train/precision.h"
#include "util/shape.h"

#include <chrono>
#include <map>
#include <set>
#include <sstream>

#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>

#include "data/loader.h"
#include "train/complexity.h"
#include "train/guard.h"
#include "train/loader_settings.h"
#include "train/output_fit.h"
#include "util/text.h"

namespace trainyard::host {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

}  // namespace

std::string dry_run_report(const Experiment& e, Components& c, const Context& context) {
  std::ostringstream out;
  Network& net = *c.network.object;

  // One training batch: data, forward, loss, backward, optimizer step, each timed.
  auto t0 = Clock::now();
  const auto sampler = make_sampler(e.loop, e.where("loop.classes_per_batch"), c.train_data, context);
  sampler->reset(0, e.seed);
  auto stats = std::make_shared<LoaderStats>();
  const LoaderOptions train_options =
      make_loader_options(e.loop, e.seed, e.network, c.train_data, sampler->batch_size(), context);
  BatchStream train = guarded(*c.train_data.config, "get_batch",
                              [&] { return batch_stream(*c.train_data.object, *sampler, train_options, stats); });
  std::optional<Batch> batch = guarded(*c.train_data.config, "get_batch", train);
  const double data_ms = ms_since(t0);
  if (!batch) throw Error("dry run: the training set gives no batch");
  net.train();
  for (auto& m : c.frozen) m->eval();
  c.optimizer->zero_grad();
  t0 = Clock::now();
  auto forward = [&](const Batch& b) {
    return forward_in_precision(context.device.type(), e.loop.effective_precision(),
                                [&] { return guarded(*c.network.config, "forward", [&] { return net.forward(b); }); });
  };
  at::Tensor output = forward(*batch);
  const double forward_ms = ms_since(t0);
  t0 = Clock::now();
  at::Tensor loss = checked_loss(c, output, *batch, train_options.fields_beside->of(*batch), "training");
  const double loss_ms = ms_since(t0);
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
                          make_loader_options(e.loop, e.seed, e.network, c.test_data, bs, context), stats);
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
  // Per module: the parameters, and from one sample's forward (train/complexity.h) the
  // output shape (here with the batch's size), FLOPs and output bytes per sample.
  std::string why;
  const std::optional<NetworkCost> cost = try_network_cost(e.loop, e.seed, c, context, why);
  std::map<std::string, const ModuleCost*> costs;
  if (cost)
    for (const auto& m : cost->modules) costs[m.name] = &m;
  out << "network " << e.network.plugin << ": module (parameters, trainable) -> output shape; forward FLOPs, "
      << "output bytes per sample\n";
  for (const auto& m : net.named_modules()) {
    int64_t count = 0, trainable = 0;
    for (const auto& p : m.value()->parameters()) {
      count += p.numel();
      if (p.requires_grad()) trainable += p.numel();
    }
    const std::string name = m.key().empty() ? "(network)" : m.key();
    const size_t depth = m.key().empty() ? 0 : std::count(m.key().begin(), m.key().end(), '.') + 1;
    const ModuleCost* mc = costs.count(m.key()) ? costs.at(m.key()) : nullptr;
    std::string shape = m.key().empty() ? shape_text(output.sizes()) : "";
    if (mc && mc->output_sizes && !m.key().empty()) {  // the batch's size, then one sample's shape
      std::vector<int64_t> sizes{batch->size()};
      sizes.insert(sizes.end(), mc->output_sizes->begin(), mc->output_sizes->end());
      shape = shape_text(sizes);
    }
    std::string per_sample;
    if (mc && mc->flops > 0) per_sample += human_flops(mc->flops);
    if (mc && mc->output_bytes >= 0) per_sample += (per_sample.empty() ? "" : ", ") + human_bytes(mc->output_bytes);
    out << "  " << std::string(2 * depth, ' ') << name << " " << m.value()->name() << " (" << count << ", " << trainable
        << ")" << (shape.empty() ? "" : " -> " + shape) << (per_sample.empty() ? "" : "; " + per_sample) << "\n";
  }
  if (cost)
    out << "forward per sample: " << human_flops(cost->flops) << " (" << cost->flops
        << "); activations of the weighted "
        << "layers: " << human_bytes(cost->activation_bytes) << " (fp32)\n";
  else
    out << "forward per sample: not measured (one sample's forward failed: " << why << ")\n";
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
