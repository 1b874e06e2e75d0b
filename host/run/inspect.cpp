#include "run/mode_requests.h"

#include <chrono>
#include <sstream>

#include <torch/utils.h>

#include "run/assembly.h"
#include "run/auto_choices.h"
#include "run/experiment_file.h"
#include "run/runner.h"
#include "run/session.h"
#include "train/complexity.h"
#include "train/dry_run.h"
#include "train/guard.h"
#include "train/loader_settings.h"
#include "util/json.h"
#include "util/text.h"

namespace trainyard::host {

namespace {
// Which parameters fell in which optimizer group, and what is frozen; each
// line starts with `indent`.
std::string describe_groups(const Components& built, const Experiment& e, const std::string& indent) {
  std::ostringstream out;
  out << indent << "parameter groups:\n";
  for (const auto& g : built.groups)
    out << indent << "  " << g.name << ": " << g.parameters.size() << " tensors, " << g.numel << " values, lr "
        << json_number(g.lr) << ", weight decay " << g.weight_decay << "\n"
        << indent << "    " << join(g.parameters) << "\n";
  if (!built.frozen.empty()) out << indent << "frozen: " << join(e.network.freeze) << "\n";
  return out.str();
}
}  // namespace

std::string Runner::dry_run() const {
  const Experiment& e = experiment_.stage(0);
  Context context = make_context(e);
  torch::manual_seed(e.seed);
  Components built = build_components(e, context);
  return dry_run_report(e, built, context) + describe_groups(built, e, "");
}

std::vector<std::string> Runner::value_names() const {
  const Experiment& e = experiment_;
  // On the CPU: the caller (a sweep) only wants names, and must leave the GPUs to its runs.
  Context context;
  context.seed = e.seed;
  context.experiment = e.name;
  context.extra = Extra(e.extra);
  context.device = at::Device(at::kCPU);
  std::vector<std::string> names;
  build_checked(e, context, &names);
  return names;
}

void Runner::validate(std::ostream& out) const {
  const Experiment& e = experiment_;
  Context context = make_context(e);
  std::vector<const LoopConfig*> loops{&e.loop};
  for (const auto& stage : e.stages) loops.push_back(&stage.loop);
  announce_precision(loops);
  Components c = build_checked(e, context);
  const auto [params, trainable] = parameter_count(*c.network.object);
  out << "ok: " << e.path << " (" << e.name << "): dataset " << e.train_data.plugin << " ("
      << c.train_data.object->size() << " train"
      << (c.test_data.object ? ", " + std::to_string(c.test_data.object->size()) + " test" : std::string())
      << " samples), network " << e.network.plugin << " (" << params << " parameters, " << trainable
      << " trainable), loss " << e.loss.plugin << ", optimizer " << e.optimizer.plugin << ", " << e.meters.size()
      << " meters, " << e.callbacks.size() << " callbacks, " << e.overrides.size() << " overrides\n";
  std::string why;
  if (const auto cost = try_network_cost(e.loop, e.seed, c, context, why))
    out << "network cost per sample (FLOPs of the linear and convolution layers):\n" << cost_table(*cost, 1);
  else
    out << "network cost per sample: not measured (one sample's forward failed: " << why << ")\n";
  if (e.stages.empty()) out << describe_groups(c, e, "");
  // Each stage built as it will be: its optimizer, groups and freezing, and
  // a network that can start from the previous stage's weights.
  Components previous;
  for (size_t k = 0; k < e.stages.size(); ++k) {
    const Experiment& s = e.stages[k];
    Components built;
    try {
      built = build_checked(s, context);
      if (k > 0) check_weights_carry_over(*built.network.object, *previous.network.object, k - 1);
    } catch (const ConfigError& err) {
      throw ConfigError("stage " + std::to_string(k + 1) + " '" + s.stage_name + "': " + err.what());
    }
    out << "stage " << k + 1 << " '" << s.stage_name << "': " << s.loop.epochs << " epochs, batch "
        << s.loop.batch_per_device << ", optimizer " << s.optimizer.plugin << ", schedule " << s.schedule.policy << ", "
        << parameter_count(*built.network.object).second << " trainable parameters\n"
        << describe_groups(built, s, "  ");
    previous = std::move(built);
  }
}

IterateResult Runner::iterate(int64_t batch_limit) const {
  const Experiment& e = experiment_;
  Context context = make_context(e);
  const Built<Dataset> data = build_dataset(e.train_data, context);
  const auto sampler = make_sampler(e.loop, e.where("loop.classes_per_batch"), data, context);
  sampler->reset(0, e.seed);
  const LoaderOptions options = make_loader_options(e.loop, e.seed, e.network, data, e.loop.batch_per_device, context);
  auto stats = std::make_shared<LoaderStats>();
  const auto t0 = std::chrono::steady_clock::now();
  BatchStream stream = batch_stream(*data.object, *sampler, options, stats);
  IterateResult r;
  int64_t first_batch = 0;
  auto t1 = t0;  // when the first batch arrived: the steady rate counts from there (threads started, caches warm)
  while (batch_limit == 0 || r.batches < batch_limit) {
    auto batch = guarded(e.train_data, "get_batch", stream);
    if (!batch) break;
    ++r.batches;
    r.samples += batch->size();
    if (r.batches == 1) t1 = std::chrono::steady_clock::now(), first_batch = r.samples;
  }
  const auto t2 = std::chrono::steady_clock::now();
  r.seconds = std::chrono::duration<double>(t2 - t0).count();
  r.steady_samples = r.samples - first_batch;
  r.steady_seconds = std::chrono::duration<double>(t2 - t1).count();
  r.decode_threads = options.threads;
  r.bad_records = stats->bad_records.load();
  return r;
}

}  // namespace trainyard::host
