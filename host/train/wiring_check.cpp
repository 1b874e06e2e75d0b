#include "train/wiring_check.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "data/loader.h"
#include "train/guard.h"
#include "util/shape.h"

namespace trainyard::host {
namespace {

// Samples per split: enough to see a batch dimension and some of the
// split's variety, few enough to be free.
constexpr int64_t kProbeSamples = 4;

[[noreturn]] void misfit(const ComponentConfig& who, const std::string& what, const std::string& expected,
                         const std::string& hint = "") {
  throw ConfigError(who.where + " (" + component_label(who) + "): " + what, expected, hint);
}

// Restores each module's train/eval mode (frozen submodules stay in eval).
struct ModeGuard {
  std::vector<std::pair<std::shared_ptr<torch::nn::Module>, bool>> modes;
  explicit ModeGuard(torch::nn::Module& network) {
    for (auto& m : network.modules(/*include_self=*/true)) modes.emplace_back(m, m->is_training());
  }
  ~ModeGuard() {
    for (auto& [m, training] : modes) m->train(training);  // pre-order: children after their parent
  }
};

// A LibTorch error on the check's batch ("mat1 and mat2 shapes cannot be
// multiplied") is the components not fitting: bad input, with the shapes.
template <class F>
auto on_probe_batch(const std::string& shapes, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const ComponentFailure& failure) {
    throw ConfigError(std::string(failure.what()) + " (on the wiring check's batch: " + shapes + ")",
                      "components that fit one another", "check the network's sizes against the dataset's samples");
  }
}

void check_split(Components& c, const Experiment& e, const Context& context, const Built<Dataset>& data,
                 const std::vector<Built<Meter>>& meters, const char* split) {
  // Spread over the split (first, ..., last): sorted datasets (image
  // folders, class by class) show their variety, not one class's.
  const int64_t size = data.object->size();
  const int64_t n = std::min<int64_t>({kProbeSamples, size, e.loop.batch_per_device});
  std::vector<int64_t> ids;
  for (int64_t k = 0; k < n; ++k) ids.push_back(n == 1 ? 0 : k * (size - 1) / (n - 1));
  LoaderOptions options;
  options.batch_size = n;
  options.seed = e.seed;
  options.skip_bad_records = data.config->skip_bad_records;
  options.max_bad_fraction = 1.0;  // a probe of a few samples says nothing about the epoch's share
  options.normalization = input_normalization(*data.config, *data.object);
  options.streamed = dataset_streamed(*data.config, *data.object);  // then the first n positions
  BatchStream stream = batch_stream(*data.object, ids, 0, 0, options);
  std::optional<Batch> batch = guarded(*data.config, "get_batch", stream);
  if (!batch) return;  // every sample a skipped bad record: training will say so
  batch->input = batch->input.to(context.device);
  batch->target = batch->target.to(context.device);
  if (e.network.memory_format == "channels_last" && batch->input.dim() == 4)
    batch->input = batch->input.contiguous(at::MemoryFormat::ChannelsLast);
  const int64_t rows = batch->size();
  const DatasetInfo& info = context.dataset;
  const std::string for_batch = " for a " + std::string(split) + " batch of " + std::to_string(rows) +
                                " samples of " + shape_text(batch->input[0].sizes());

  Network& net = *c.network.object;
  at::Tensor output;
  {
    ModeGuard modes(net);
    net.eval();  // no batch-norm statistics or dropout draws change
    at::NoGradGuard no_grad;
    output = on_probe_batch("input " + shape_text(batch->input.sizes()), [&] {
      return guarded(*c.network.config, "forward", [&] { return net.forward(*batch); });
    });
  }
  if (!output.defined()) misfit(*c.network.config, "forward returned an undefined tensor" + for_batch, "expected a tensor of outputs");
  if (!at::isFloatingType(output.scalar_type()))
    misfit(*c.network.config, "forward returned " + std::string(c10::toString(output.scalar_type())) + " values" + for_batch,
           "expected floating-point outputs");
  if (output.device() != context.device)
    misfit(*c.network.config, "forward returned a tensor on " + output.device().str() + for_batch,
           "expected it on " + context.device.str() + ", where the batch is");
  if (output.dim() == 0 || output.size(0) != rows)
    misfit(*c.network.config, "forward returned " + shape_text(output.sizes()) + for_batch,
           "expected one row per sample: " + std::to_string(rows) + " rows");
  // Classification: one score per class for each sample (or per pixel).
  const bool class_targets = info.num_classes > 0 && !at::isFloatingType(batch->target.scalar_type());
  if (class_targets && (output.dim() < 2 || output.size(1) != info.num_classes)) {
    std::string expected = "[" + std::to_string(rows) + ", " + std::to_string(info.num_classes);
    for (int64_t d = 1; d < batch->target.dim(); ++d) expected += ", " + std::to_string(batch->target.size(d));
    misfit(*c.network.config, "forward returned " + shape_text(output.sizes()) + for_batch,
           "expected " + expected + "]: the training dataset has " + std::to_string(info.num_classes) + " classes",
           "size the network's last layer from context.dataset.num_classes");
  }

  at::Tensor loss;
  {
    at::NoGradGuard no_grad;
    loss = on_probe_batch("output " + shape_text(output.sizes()) + ", target " + shape_text(batch->target.sizes()),
                          [&] { return guarded(*c.loss.config, "compute", [&] { return c.loss.object->compute(output, *batch); }); });
  }
  if (!loss.defined() || loss.numel() != 1 || !at::isFloatingType(loss.scalar_type()))
    misfit(*c.loss.config,
           "compute returned " + (loss.defined() ? shape_text(loss.sizes()) + " " + c10::toString(loss.scalar_type()) : "nothing") +
               " for outputs " + shape_text(output.sizes()) + " and targets " + shape_text(batch->target.sizes()),
           "expected one floating-point value (the batch's mean loss)");

  // Meters see the batch too; their sums are put back as they were.
  for (const auto& m : meters) {
    const std::vector<double> before = guarded(*m.config, "accumulators", [&] { return m.object->accumulators(); });
    guarded(*m.config, "update", [&] { m.object->update({*batch, output, loss}); });
    guarded(*m.config, "values", [&] { return m.object->values(); });
    guarded(*m.config, "set_accumulators", [&] { m.object->set_accumulators(before); });
  }
}

}  // namespace

void check_wiring(Components& c, const Experiment& e, const Context& context) {
  at::Generator cpu = at::detail::getDefaultCPUGenerator();
  at::Tensor rng_state;
  {
    std::lock_guard<std::mutex> lock(cpu.mutex());
    rng_state = cpu.get_state();
  }
  check_split(c, e, context, c.train_data, c.train_meters, "training");
  if (c.test_data.object) check_split(c, e, context, c.test_data, c.test_meters, "test");
  std::lock_guard<std::mutex> lock(cpu.mutex());
  cpu.set_state(rng_state);
}

}  // namespace trainyard::host
