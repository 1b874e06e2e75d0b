#include "run/model.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <numeric>

#include <torch/csrc/jit/serialization/import.h>

#include "data/loader.h"
#include "formats/run_paths.h"
#include "formats/state_dict.h"
#include "run/session.h"
#include "train/checkpoint_store.h"
#include "run/assembly.h"
#include "train/trainer.h"
#include "util/shape.h"
#include "train/guard.h"
#include "trainyard/labeled_files.h"
#include "trainyard/error.h"
#include "util/csv.h"
#include "util/files.h"
#include "util/json.h"
#include "util/text.h"

namespace fs = std::filesystem;

namespace trainyard::host {
namespace {

/// The components of the stage a checkpoint belongs to, its weights loaded.
struct LoadedModel {
  Context context;
  const Experiment* stage = nullptr;
  std::unique_ptr<Trainer> trainer;
  /// How the evaluation split (test, else train) turns an image file into a
  /// sample (Dataset::image_preprocessing), and which entry said so.
  std::optional<std::map<std::string, Value>> image_preprocessing;
  std::string evaluation_split;  ///< "dataset.test (dataset 'fashion_mnist' from ...)"
};
LoadedModel load_model(const Experiment& experiment, const std::string& checkpoint);

LoadedModel load_model(const Experiment& e, const std::string& checkpoint) {
  LoadedModel m;
  CheckpointState peeked;
  try {
    verify_checkpoint(checkpoint);  // a truncated or damaged file is named before anything is built
    peeked = peek_checkpoint(checkpoint);
  } catch (const ConfigError&) {
    throw;
  } catch (const Error& err) {
    throw ConfigError(err.what(), "expected a complete checkpoint written by trainyard run", "");
  }
  m.stage = e.stages.empty() ? &e : &e.stages.at(static_cast<size_t>(std::max<int64_t>(0, peeked.stage)));
  m.context = make_context(*m.stage);
  m.trainer = assemble_stage(*m.stage, m.context, nullptr, RunPaths(""));
  const Components& c = m.trainer->components();
  const Built<Dataset>& split = c.test_data.object ? c.test_data : c.train_data;
  m.evaluation_split = split.config->key + " (" + split.config->component->label() + ")";
  if (split.config->component->supports(SdkFeature::image_preprocessing))
    m.image_preprocessing = guarded(*split.config, "image_preprocessing", [&] { return split.object->image_preprocessing(); });
  try {
    load_checkpoint(checkpoint, m.trainer->network(), m.trainer->optimizer(), Verify::already_done);
  } catch (const Error& err) {
    throw ConfigError(err.what(), "expected a checkpoint of this experiment's network", "");
  }
  return m;
}

}  // namespace


std::string checkpoint_to_read(const std::optional<std::string>& explicit_path, const Experiment& e,
                               const std::string& output_dir) {
  if (explicit_path) {
    if (!fs::is_regular_file(*explicit_path))
      throw ConfigError("command line: --checkpoint " + *explicit_path + ": no such file", "expected a checkpoint file", "");
    return *explicit_path;
  }
  const CheckpointStore store(RunPaths((fs::path(output_dir.empty() ? e.output.dir : output_dir) / e.name).string()).checkpoints, 0);
  auto all = store.list();
  if (all.empty())
    throw ConfigError(store.dir() + ": no checkpoint to read", "expected a trained run of " + e.path,
                      "train it first, or pass --checkpoint PATH");
  return all.back();
}

MeterValues evaluate(const Experiment& e, const std::string& checkpoint) {
  return load_model(e, checkpoint).trainer->test_pass();
}

size_t export_model(const Experiment& e, const ExportRequest& request) {
  if (request.format != "state_dict" && request.format != "torchscript")
    throw ConfigError("command line: --format " + request.format, "expected state_dict or torchscript",
                      did_you_mean(request.format, {"state_dict", "torchscript"}));
  const ComponentConfig& network_config = e.network;
  if (request.format == "torchscript" && network_config.plugin != "torchscript")
    throw ConfigError("command line: --format torchscript: network '" + network_config.plugin +
                          "' is not built from a TorchScript module",
                      "a network with plugin: torchscript (its module is written back with the trained values)",
                      "export --format state_dict, which PyTorch loads into the equivalent nn.Module");
  LoadedModel m = load_model(e, request.checkpoint);
  torch::nn::Module& network = m.trainer->network();
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (const auto& p : network.named_parameters()) tensors.emplace_back(p.key(), p.value().detach().cpu());
  for (const auto& b : network.named_buffers()) tensors.emplace_back(b.key(), b.value().detach().cpu());
  if (request.format == "state_dict") {
    write_file_atomic(request.output, pytorch_state_dict(tensors));
    return tensors.size();
  }
  // The module the network was built from, its tensors replaced by name.
  const std::string script_path = network_config.options.get<std::string>("path");
  torch::jit::Module script = torch::jit::load(script_path, c10::Device(c10::kCPU));
  size_t copied = 0;
  std::map<std::string, at::Tensor> trained(tensors.begin(), tensors.end());
  auto copy_into = [&](const std::string& name, at::Tensor target) {
    auto it = trained.find(name);
    if (it == trained.end())
      throw Error("export: the TorchScript module's " + name + " is not among the network's tensors");
    at::NoGradGuard no_grad;
    target.copy_(it->second);
    ++copied;
  };
  for (const auto& p : script.named_parameters()) copy_into(p.name, p.value);
  for (const auto& b : script.named_buffers()) copy_into(b.name, b.value);
  replace_file_atomic(request.output, [&](const std::string& tmp) { script.save(tmp); });
  return copied;
}

int64_t predict(const Experiment& e, const Registry& registry, const PredictRequest& request) {
  const std::string& input = request.input;
  LoadedModel m = load_model(e, request.checkpoint);
  const bool is_lmdb = fs::is_regular_file(input) || fs::exists(fs::path(input) / "data.mdb");
  const std::string plugin = is_lmdb ? "lmdb" : "csv";
  const Component& component = registry.get(Kind::dataset, plugin);
  // New images are preprocessed exactly as the evaluation split's samples,
  // or not at all: a guess (no normalization) gives plausible, wrong classes.
  if (!m.image_preprocessing)
    throw ConfigError("predict: " + m.evaluation_split + " does not say how an image file becomes one of its samples",
                      "expected a test dataset whose plugin implements Dataset::image_preprocessing() (SDK 1.1; "
                      "the built-in lmdb, image_folder, csv and fashion_mnist do)",
                      "evaluate with `trainyard eval` on a split of this experiment, or give the test set a dataset "
                      "plugin that says");
  std::map<std::string, Value> values;
  for (const auto& [key, value] : *m.image_preprocessing)
    if (!component.schema.find(key))
      throw ConfigError("predict: " + m.evaluation_split + ": image_preprocessing() gives '" + key + "'",
                        "options of the built-in image datasets", "");
    else
      values[key] = value;
  std::vector<std::string> files;
  const std::string list = (fs::temp_directory_path() / ("trainyard-predict-" + std::to_string(::getpid()) + ".csv")).string();
  if (is_lmdb) {
    values["path"] = input;
  } else {
    for (const auto& entry : fs::recursive_directory_iterator(input))
      if (entry.is_regular_file() && trainyard::is_image_file(entry.path().string())) files.push_back(fs::absolute(entry.path()).string());
    std::sort(files.begin(), files.end());
    if (files.empty()) throw ConfigError("command line: --input " + input + ": no images in this folder",
                                         "expected .png, .jpg, .jpeg, .bmp or .pgm files", "");
    std::string csv = "path,label\n";
    for (const auto& f : files) csv += f + ",0\n";  // labels unknown: the column is left empty in the output
    write_file_atomic(list, csv);
    values["file"] = list;
  }
  Options validated = component_options(component.schema, values, request.input_options, "--input-options");
  Context context = m.context;
  context.component = "predict input";
  auto dataset = guarded(e.test_data.component ? e.test_data : e.train_data, "construction", [&] {
    return std::get<Factory<Dataset>>(component.factory)(validated, context);
  });
  // What the network was trained on: the input must have its sample shape and classes.
  const DatasetInfo trained = m.context.dataset, given = dataset->info();
  if (dataset->size() == 0)
    throw ConfigError("command line: --input " + request.input + ": no samples", "expected at least one sample", "");
  if (!trained.sample_shape.empty() && !given.sample_shape.empty() && trained.sample_shape != given.sample_shape)
    throw ConfigError("command line: --input " + request.input + ": samples of shape " + shape_text(given.sample_shape),
                      "expected the shape the network was trained on, " + shape_text(trained.sample_shape),
                      "pass --input-options load_size/crop_size to match the training set's");
  std::vector<int64_t> order(static_cast<size_t>(dataset->size()));
  std::iota(order.begin(), order.end(), 0);
  LoaderOptions lo;
  lo.batch_size = e.loop.test_batch_per_device > 0 ? e.loop.test_batch_per_device : e.loop.batch_per_device;
  lo.device = context.device;
  lo.normalization = input_normalization(e.test_data.component ? e.test_data : e.train_data, *dataset, &component);
  BatchStream batches = batch_stream(*dataset, order, 0, 0, lo, std::make_shared<LoaderStats>());
  const auto& names = m.context.dataset.class_names;
  const int64_t k = std::max<int64_t>(1, std::min<int64_t>(request.topk, m.context.dataset.num_classes));
  std::vector<std::string> header{"index", "source", "label"};
  for (int64_t j = 1; j <= k; ++j) header.push_back("class_" + std::to_string(j)), header.push_back("prob_" + std::to_string(j));
  std::string csv = csv_row(header);
  auto class_name = [&](int64_t c) { return c < static_cast<int64_t>(names.size()) ? names[size_t(c)] : std::to_string(c); };
  Network& net = m.trainer->network();
  net.eval();
  at::NoGradGuard no_grad;
  int64_t rows = 0;
  while (auto batch = batches()) {
    at::Tensor probs = m.trainer->forward(*batch).softmax(1).cpu();  // with the experiment's precision
    auto [p, idx] = probs.topk(k, 1);
    at::Tensor target = batch->target.cpu();
    for (int64_t i = 0; i < batch->size(); ++i) {
      const int64_t sample = batch->indices[size_t(i)];
      std::vector<std::string> row{std::to_string(sample),
                                   is_lmdb ? "lmdb:" + std::to_string(sample) : files[size_t(sample)],
                                   is_lmdb ? class_name(target[i].item<int64_t>()) : std::string()};
      for (int64_t j = 0; j < k; ++j)
        row.push_back(class_name(idx[i][j].item<int64_t>())), row.push_back(json_number(p[i][j].item<double>()));
      csv += csv_row(row);
      ++rows;
    }
  }
  if (!is_lmdb) fs::remove(list);
  write_file_atomic(request.output, csv);
  return rows;
}

}  // namespace trainyard::host
