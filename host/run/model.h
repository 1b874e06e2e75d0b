#pragma once
// A trained model put to use: `trainyard eval` (the test meters on a
// checkpoint) and `trainyard predict` (top-k classes for new images).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/experiment.h"
#include "trainyard/loop.h"

namespace trainyard::host {

/// A run's directory: OUTPUT_DIR/NAME, OUTPUT_DIR being `output_dir`
/// (--output-dir) when given, else the experiment's output.dir.
std::string run_directory(const Experiment& experiment, const std::string& output_dir);

/// The checkpoint to read: `explicit_path` when given (it must exist), else
/// the latest of the run's checkpoints in `output_dir` ("" for output.dir).
/// Throws ConfigError when there is none.
std::string checkpoint_to_read(const std::optional<std::string>& explicit_path, const Experiment& experiment,
                               const std::string& output_dir);

/// `trainyard eval`: the test meters over the test split (else the train
/// split) on the checkpoint's weights, in the stage the checkpoint belongs to.
/// `weights`: trained, or ema (the `ema:` average the checkpoint holds).
MeterValues evaluate(const Experiment& experiment, const std::string& checkpoint,
                     const std::string& weights = "trained");

/// One way `trainyard export` writes a network: its --format name and what
/// the file is (one line, for --help).
struct ExportFormat {
  const char* name;
  const char* description;
};
/// Every export format, in the order help lists them: the one table that
/// export's check and its error, `trainyard export --help` and the shell
/// completion of `--format` read.
const std::vector<ExportFormat>& export_formats();
/// The names of export_formats(): {"state_dict", "safetensors", "torchscript"}.
std::vector<std::string> export_format_names();

struct ExportRequest {
  std::string checkpoint;
  std::string format;  ///< a name of export_formats()
  std::string output;
  std::string weights = "trained";  ///< trained | ema
};
/// Writes the checkpoint's network for PyTorch. state_dict: a file Python's
/// torch.load reads as {name: tensor}, the names of the network's parameters
/// and buffers (module paths joined by '.', as nn.Module.state_dict() names
/// them). safetensors: the same tensors and names in a safetensors file
/// (safetensors.torch.load_file reads it). torchscript: for a network built from a TorchScript module
/// (network.plugin: torchscript), that module with the trained values.
/// Returns the number of tensors written.
size_t export_model(const Experiment& experiment, const ExportRequest& request);

struct PredictRequest {
  std::string input;   ///< an LMDB made by trainyard convert, or a folder of images
  std::string output;  ///< the CSV to write
  std::string checkpoint;
  int64_t topk = 5;
  std::string input_options;  ///< YAML flow map over the test set's preprocessing ("" for none)
};

/// Writes one CSV row per input sample (index, source, label, top-k classes
/// and probabilities), preprocessed like the test set. Returns the rows written.
int64_t predict(const Experiment& experiment, const Registry& registry, const PredictRequest& request);

}  // namespace trainyard::host
