#pragma once
// A trained model put to use: what `trainyard export` (the network for
// PyTorch) and `trainyard predict` (top-k classes for new images) ask. The
// modes themselves, with eval, are Runner's (run/runner.h), their bodies in
// run/model.cpp.
#include <cstdint>
#include <string>
#include <vector>

namespace trainyard::host {

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

/// What `trainyard export` writes (Runner::export_network).
struct ExportRequest {
  std::string checkpoint;
  std::string format;  ///< a name of export_formats()
  std::string output;
  std::string weights = "trained";  ///< trained | ema
};

/// What `trainyard predict` reads and writes (Runner::predict).
struct PredictRequest {
  std::string input;   ///< an LMDB made by trainyard convert, or a folder of images
  std::string output;  ///< the CSV to write
  std::string checkpoint;
  int64_t topk = 5;
  std::string input_options;  ///< YAML flow map over the test set's preprocessing ("" for none)
};

}  // namespace trainyard::host
