#include "run/mode_requests.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <numeric>

#include <torch/csrc/jit/serialization/import.h>

#include "data/loader.h"
#include "formats/run_paths.h"
#include "formats/safetensors.h"
#include "formats/state_dict.h"
#include "run/assembly.h"
#include "run/dense_predict.h"
#include "run/detection_predict.h"
#include "run/loaded_model.h"
#include "run/runner.h"
#include "run/task_metadata.h"
#include "train/checkpoint_store.h"
#include "train/guard.h"
#include "trainyard/error.h"
#include "trainyard/labeled_files.h"
#include "trainyard/loss.h"
#include "trainyard/version.h"
#include "util/csv.h"
#include "util/files.h"
#include "util/json.h"
#include "util/shape.h"
#include "util/text.h"

namespace fs = std::filesystem;

namespace trainyard::host {

std::string Runner::run_directory(const std::string& output_dir) const {
  return (fs::path(output_dir.empty() ? experiment_.output.dir : output_dir) / experiment_.name).string();
}

std::string Runner::checkpoint_to_read(const std::optional<std::string>& explicit_path,
                                       const std::string& output_dir) const {
  if (explicit_path) {
    if (!fs::is_regular_file(*explicit_path))
      throw ConfigError("command line: --checkpoint " + *explicit_path + ": no such file", "expected a checkpoint file",
                        "");
    return *explicit_path;
  }
  const CheckpointStore store(RunPaths(run_directory(output_dir)).checkpoints, 0);
  auto all = store.list();
  if (all.empty())
    throw ConfigError(store.dir() + ": no checkpoint to read", "expected a trained run of " + experiment_.path,
                      "train it first, or pass --checkpoint PATH");
  return all.back();
}

MeterValues Runner::evaluate(const std::string& checkpoint, const std::string& weights) const {
  return load_model(checkpoint, weights).evaluator().test_pass();
}

const std::vector<ExportFormat>& export_formats() {
  static const std::vector<ExportFormat> table{
      {"state_dict", "{name: tensor} for torch.load and nn.Module.load_state_dict"},
      {"safetensors", "the same tensors for safetensors.torch.load_file (Hugging Face's format)"},
      {"torchscript", "the network's TorchScript module with the trained values (network.plugin: torchscript)"},
  };
  return table;
}

std::vector<std::string> export_format_names() {
  std::vector<std::string> names;
  for (const auto& f : export_formats()) names.push_back(f.name);
  return names;
}

size_t Runner::export_network(const ExportRequest& request) const {
  const std::vector<std::string> names = export_format_names();
  if (std::find(names.begin(), names.end(), request.format) == names.end()) {
    std::string choices;  // "a, b or c"
    for (size_t i = 0; i < names.size(); ++i)
      choices += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
    throw ConfigError("command line: --format " + request.format, "expected " + choices,
                      did_you_mean(request.format, names));
  }
  const ComponentConfig& network_config = experiment_.network;
  LoadedModel m = load_model(request.checkpoint, request.weights);
  // The network says which TorchScript file it was built from (SDK 1.4 ScriptedModule); no plugin is known by name.
  const ScriptedModule* scripted = m.components.network.facets.scripted_module;
  if (request.format == "torchscript" && !scripted)
    throw ConfigError("command line: --format torchscript: network '" + network_config.plugin +
                          "' is not built from a TorchScript module",
                      "a network with plugin: torchscript (its module is written back with the trained values)",
                      "export --format state_dict, which PyTorch loads into the equivalent nn.Module");
  torch::nn::Module& network = m.network();
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  // A loss's own parameters (registered as "loss", SDK 1.4 LossParameters) are not the network's.
  const bool loss_owned = m.components.loss.facets.loss_parameters != nullptr;
  auto network_tensor = [&](const std::string& name) { return !loss_owned || name.rfind("loss.", 0) != 0; };
  for (const auto& p : network.named_parameters())
    if (network_tensor(p.key())) tensors.emplace_back(p.key(), p.value().detach().cpu());
  for (const auto& b : network.named_buffers())
    if (network_tensor(b.key())) tensors.emplace_back(b.key(), b.value().detach().cpu());
  // The output is the user's choice: a write that fails there (a full disk,
  // a read-only mount, a file made immutable meanwhile) is bad input naming
  // it, exit 2; the temporary file is gone and what was there is untouched.
  auto written = [&](const std::function<void()>& write) {
    try {
      write();
    } catch (const ConfigError&) {
      throw;
    } catch (const std::exception& err) {
      throw ConfigError("command line: --output " + request.output + ": cannot write it (" + err.what() + ")",
                        "expected a file this user can write, on a file system with room for it",
                        "choose another path");
    }
    return tensors.size();
  };
  // The task, classes and preprocessing, beside the weights (and, for safetensors, in its metadata too).
  const std::string task = json_text(task_metadata(m));
  const auto with_task = [&](const std::function<void()>& write_weights) {
    return written([&] {
      const std::string beside = request.output + ".json";
      write_file_atomic(beside, task + "\n");
      try {
        write_weights();
      } catch (...) {
        std::error_code ec;
        fs::remove(beside, ec);  // no metadata for weights that were not written
        throw;
      }
    });
  };
  if (request.format == "safetensors") {
    // "format": "pt" is what Hugging Face's loaders expect of a PyTorch model's file.
    return with_task([&] {
      write_file_atomic(request.output, safetensors_file(tensors, {{"format", "pt"},
                                                                   {"network", network_config.plugin},
                                                                   {"trainyard", TRAINYARD_VERSION},
                                                                   {"task", task}}));
    });
  }
  if (request.format == "state_dict")
    return with_task([&] { write_file_atomic(request.output, pytorch_state_dict(tensors)); });
  // The module the network was built from, its tensors replaced by name.
  torch::jit::Module script = torch::jit::load(scripted->script_path(), c10::Device(c10::kCPU));
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
  with_task([&] { replace_file_atomic(request.output, [&](const std::string& tmp) { script.save(tmp); }); });
  return copied;
}

int64_t Runner::predict(const PredictRequest& request) const {
  LoadedModel m = load_model(request.checkpoint);
  // A detector first: its heatmaps are [B, C, h, w] too. Its inputs have the trained shape (batched).
  const bool detector = m.components.network.facets.detector != nullptr;
  const bool dense = !detector && scores_pixels(m);  // a mask per image, at any image size
  InputSet input =
      open_input(m, registry_, request.input, {}, request.input_options, "predict", "--input " + request.input, dense);
  if (detector) return predict_detections(m, input, request);
  if (dense) return predict_masks(m, input, request);
  const auto& dataset = input.dataset;
  std::vector<int64_t> order(static_cast<size_t>(dataset->size()));
  std::iota(order.begin(), order.end(), 0);
  BatchStream batches = batch_stream(*dataset, order, 0, 0, input.loader, std::make_shared<LoaderStats>());
  const auto& names = m.context.dataset.class_names;
  const int64_t k = std::max<int64_t>(1, std::min<int64_t>(request.topk, m.context.dataset.num_classes));
  std::vector<std::string> header{"index", "source", "label"};
  for (int64_t j = 1; j <= k; ++j)
    header.push_back("class_" + std::to_string(j)), header.push_back("prob_" + std::to_string(j));
  std::string csv = csv_row(header);
  auto class_name = [&](int64_t c) {
    return c < static_cast<int64_t>(names.size()) ? names[size_t(c)] : std::to_string(c);
  };
  Network& net = m.network();
  const Evaluator evaluator = m.evaluator();
  net.eval();
  at::NoGradGuard no_grad;
  int64_t rows = 0;
  while (auto batch = batches()) {
    at::Tensor probs = evaluator.forward(*batch).softmax(1).cpu();  // with the experiment's precision
    auto [p, idx] = probs.topk(k, 1);
    at::Tensor target = batch->target.cpu();
    for (int64_t i = 0; i < batch->size(); ++i) {
      const int64_t sample = batch->indices[size_t(i)];
      std::vector<std::string> row{std::to_string(sample), input.sources[size_t(sample)],
                                   input.labeled ? class_name(target[i].item<int64_t>()) : std::string()};
      for (int64_t j = 0; j < k; ++j)
        row.push_back(class_name(idx[i][j].item<int64_t>())), row.push_back(json_number(p[i][j].item<double>()));
      csv += csv_row(row);
      ++rows;
    }
  }
  write_file_atomic(request.output, csv);
  return rows;
}

}  // namespace trainyard::host
