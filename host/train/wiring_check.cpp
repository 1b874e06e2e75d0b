#include "train/wiring_check.h"

#include <ATen/ATen.h>
#include "train/generator_states.h"

#include <algorithm>

#include "data/loader.h"
#include "train/detections.h"
#include "train/guard.h"
#include "train/meter_results.h"
#include "train/output_fit.h"
#include "util/shape.h"
#include "util/text.h"

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
auto on_probe_batch(const std::string& shapes, F&& f,
                    const std::string& hint = "check the network's sizes against the dataset's samples")
    -> decltype(f()) {
  try {
    return f();
  } catch (const ComponentFailure& failure) {
    throw ConfigError(std::string(failure.what()) + " (on the wiring check's batch: " + shapes + ")",
                      "components that fit one another", hint);
  }
}

// A dataset that holds every label (SDK 1.3's AllLabels) has them all
// checked now, before anything is written, not when a batch reaches a bad one.
void check_all_labels(const Built<Dataset>& data, int64_t num_classes) {
  const AllLabels* known = data.facets.all_labels;
  if (!known || num_classes <= 0) return;
  const at::Tensor labels = guarded(*data.config, "all_labels", [&] { return known->all_labels(); });
  if (!labels.defined() || labels.dim() != 1 || at::isFloatingType(labels.scalar_type())) return;  // not class indices
  const auto bad = first_label_out_of_range(labels, num_classes);
  if (!bad) return;
  misfit(*data.config,
         "sample " + std::to_string(bad->position) + " has label " + std::to_string(bad->label) + " (" +
             std::to_string(bad->count) + " of its " + std::to_string(labels.numel()) +
             " labels are out of range; all checked before training)",
         "expected a class index from 0 to " + std::to_string(num_classes - 1) + " (the training dataset has " +
             std::to_string(num_classes) + " classes)",
         "check the labels, or the dataset's class count");
}

void check_split(Components& c, const Experiment& e, const Context& context, const Built<Dataset>& data,
                 const std::vector<Built<Meter>>& meters, const char* split, std::vector<std::string>& value_names) {
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
  options.normalization = input_normalization(*data.config, *data.object, data.facets);
  options.streamed = dataset_streamed(*data.config, *data.object, data.facets);  // then the first n positions
  options.fields = data.facets.field_dataset;
  check_all_labels(data, context.dataset.num_classes);
  BatchStream stream = batch_stream(*data.object, ids, 0, 0, options);
  std::optional<Batch> batch = guarded(*data.config, "get_batch", stream);
  if (!batch) return;  // every sample a skipped bad record: training will say so
  Fields fields = options.fields_beside->of(*batch);
  for (auto& [name, field] : fields) field.values = field.values.to(context.device);
  batch->input = batch->input.to(context.device);
  batch->target = batch->target.to(context.device);
  if (e.network.memory_format == "channels_last" && batch->input.dim() == 4)
    batch->input = batch->input.contiguous(at::MemoryFormat::ChannelsLast);
  const int64_t rows = batch->size();
  const DatasetInfo& info = context.dataset;
  const std::string for_batch = " for a " + std::string(split) + " batch of " + std::to_string(rows) + " samples of " +
                                shape_text(batch->input[0].sizes());

  Network& net = *c.network.object;
  at::Tensor output;
  {
    ModeGuard modes(net);
    net.eval();  // no batch-norm statistics or dropout draws change
    at::NoGradGuard no_grad;
    // Test samples of another height and width than training's (check_splits_agree lets them by).
    const auto& trained = info.sample_shape;
    const bool other_size = !trained.empty() && batch->input[0].sizes().vec() != trained;
    output = on_probe_batch(
        "input " + shape_text(batch->input.sizes()),
        [&] { return guarded(*c.network.config, "forward", [&] { return net.forward(*batch); }); },
        other_size ? "the " + std::string(split) + " samples are " + shape_text(batch->input[0].sizes()) +
                         ", the training samples " + shape_text(trained) +
                         ": give both splits the same load_size and crop_size for a network of one input size"
                   : "check the network's sizes against the dataset's samples");
  }
  if (const auto bad = output_misfit(output, rows, context.device))
    misfit(*c.network.config, bad->what + for_batch, bad->expected);
  // A metric-learning loss (SDK 1.3's EmbeddingLoss) takes one embedding per sample, of any size.
  const bool embeddings = c.loss.facets.embedding_loss != nullptr;
  // A network that says what its rows are (SDK 1.4's NetworkOutputs) must give what the loss takes:
  // by shape alone, 10 class scores pass for a 10-d embedding.
  if (const std::optional<OutputKind> kind = network_output_kind(c.network)) {
    const std::string loss = "loss '" + c.loss.config->plugin + "'";
    if (embeddings && *kind == OutputKind::class_scores)
      misfit(*c.network.config,
             "outputs class scores (a classification head, " + shape_text(output.sizes()) + for_batch + ")",
             "expected embeddings for " + loss + ", which compares the samples' embeddings with one another",
             "give the network an embedding head (embedding_size: N on mlp, convnet and resnet)");
    if (!embeddings && *kind == OutputKind::embeddings)
      misfit(*c.network.config, "outputs embeddings (" + shape_text(output.sizes()) + for_batch + ")",
             "expected what " + loss + " scores (class scores: embedding_size 0 on mlp, convnet and resnet)",
             "use a metric-learning loss (triplet_margin, contrastive) or drop the network's embedding_size");
  }
  if (embeddings && output.dim() != 2)
    misfit(*c.network.config, "forward returned " + shape_text(output.sizes()) + for_batch,
           "expected one embedding per sample, [" + std::to_string(rows) + ", size], for loss '" +
               c.loss.config->plugin + "', which compares embeddings");
  // Classification: one score per class for each sample (or per pixel).
  // (With boxes, the classes are the box labels': a detector's output is its own.)
  const bool class_targets = info.num_classes > 0 && !at::isFloatingType(batch->target.scalar_type()) && !embeddings &&
                             !fields.count(field_name::box_labels);
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
                          [&] { return checked_loss(c, output, *batch, fields, split); });
  }
  if (!loss.defined() || loss.numel() != 1 || !at::isFloatingType(loss.scalar_type()))
    misfit(*c.loss.config,
           "compute returned " +
               (loss.defined() ? shape_text(loss.sizes()) + " " + c10::toString(loss.scalar_type()) : "nothing") +
               " for outputs " + shape_text(output.sizes()) + " and targets " + shape_text(batch->target.sizes()),
           "expected one floating-point value (the batch's mean loss)");

  // Meters see the batch too (with a detector's decoded detections); their sums are put back as they were.
  const char* meter_phase = std::string(split) == "test" ? "test" : "train";
  Fields measured;
  {
    at::NoGradGuard no_grad;
    measured = on_probe_batch("output " + shape_text(output.sizes()),
                              [&] { return fields_for_meters(c, meters, output.detach(), *batch, fields); });
  }
  for (const auto& m : meters) {
    const MeterState before = meter_state(m);
    update_meter(m, {*batch, output, loss}, measured);
    const auto values = guarded(*m.config, "values", [&] { return m.object->values(); });
    for (const auto& [name, value] : values) value_names.push_back(std::string(meter_phase) + "_" + name);
    set_meter_state(m, before);
  }
}

// The values the loop adds to the meters' (train/epoch_loop.h: add_update_values).
const std::vector<std::string> kLoopValueNames = {"lr",
                                                  "grad_norm",
                                                  "loss_scale",
                                                  "scaler_skipped_updates",
                                                  "skipped_updates",
                                                  "secs_per_train",
                                                  "samples_per_sec",
                                                  "input_wait_secs",
                                                  "input_wait_share",
                                                  "comm_secs",
                                                  "comm_share",
                                                  "train_bad_records",
                                                  "test_bad_records"};

// A name that refers to a meter value (stopping.monitor, stopping.target_meter,
// a plot's ys)
// and is a likely misspelling of one the check's batch produced is refused
// now, before anything is written. A name close to none is left to the
// first test, which sees every value (a meter may add one later).
std::vector<std::string> check_value_names(const Experiment& e, std::vector<std::string> names) {
  names.insert(names.end(), kLoopValueNames.begin(), kLoopValueNames.end());
  // ema.evaluate: each test value again on the averaged weights (the weight average hook's after_test_pass).
  if (e.ema.enabled && e.ema.evaluate)
    for (size_t i = 0, n = names.size(); i < n; ++i)
      if (names[i].rfind("test_", 0) == 0) names.push_back("test_ema_" + names[i].substr(5));
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  std::vector<std::pair<std::string, std::string>> referring{{"stopping.monitor", e.stopping.monitor},
                                                             {"stopping.target_meter", e.stopping.target_meter}};
  for (size_t i = 0; i < e.output.plots.size(); ++i)
    for (const auto& y : e.output.plots[i].ys) referring.emplace_back("output.plots[" + std::to_string(i) + "].ys", y);
  for (const auto& [key, name] : referring) {
    if (name.empty() || std::binary_search(names.begin(), names.end(), name)) continue;
    const std::string hint = did_you_mean(name, names);
    if (hint.empty()) continue;
    throw LocatedConfigError(e.where(key) + ": no meter value '" + name + "'",
                             "expected one of the run's values (" + join(names) + ")", hint);
  }
  return names;
}

}  // namespace

std::vector<std::string> check_wiring(Components& c, const Experiment& e, const Context& context) {
  const GeneratorStates put_back;  // the CPU generator: the check's batch draws nothing the run would
  std::vector<std::string> value_names;
  check_split(c, e, context, c.train_data, c.train_meters, "training", value_names);
  if (c.test_data.object) check_split(c, e, context, c.test_data, c.test_meters, "test", value_names);
  return check_value_names(e, value_names);
}

}  // namespace trainyard::host
