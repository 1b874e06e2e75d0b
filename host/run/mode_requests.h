#pragma once
// What the Runner's modes (run/runner.h) ask and answer: their requests and
// results, and the tables the command line reads (export formats, a
// catalog's description). Plain data, a leaf of run/: the files that hold
// the modes' bodies include the Runner, and the Runner includes this.
//
//   mode            request            result / table
//   export          ExportRequest      export_formats()
//   predict         PredictRequest
//   embed, search   EmbedRequest, SearchRequest, CatalogInfo (read_catalog_info)
//   iterate                            IterateResult
//   find-lr         LrFinderOptions    LrFinderResult
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace trainyard::host {

// export and predict (bodies in run/model.cpp)

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
  std::string output;  ///< the CSV to write; a new folder for a segmentation network or a detector
  std::string checkpoint;
  int64_t topk = 5;
  std::string input_options;  ///< YAML flow map over the test set's preprocessing ("" for none)
};

// embed and search: a catalog of embeddings and its nearest items for a query
// image (bodies in run/catalog.cpp; the catalog's format is in
// docs/workflow.md, "Embed and search")

/// What `trainyard embed` reads and writes (Runner::embed).
struct EmbedRequest {
  std::string checkpoint;
  std::string input;          ///< an LMDB or a folder of images; "" embeds the experiment's test split (else train)
  std::string input_options;  ///< YAML flow map over the preprocessing ("" for none)
  std::string output;         ///< the catalog folder; must not exist yet
  /// How the experiment was loaded, recorded so that search builds the same network.
  std::string experiment_file;
  std::vector<std::string> sets, plugin_dirs;
};

/// What catalog.json says (checked against the arrays beside it when read).
struct CatalogInfo {
  std::string dir;
  std::string experiment_file, checkpoint, source, input, input_options;
  std::vector<std::string> sets, plugin_dirs;
  int64_t items = 0, embedding_size = 0;
};

/// Throws ConfigError naming the file when the folder is not a complete catalog.
CatalogInfo read_catalog_info(const std::string& dir);

/// What `trainyard search` looks up (Runner::search).
struct SearchRequest {
  std::vector<std::string> queries;  ///< image files
  int64_t top_k = 10;
  std::string distance = "euclidean";  ///< euclidean (smaller is nearer) or cosine (larger is nearer)
  std::string checkpoint;              ///< the catalog's unless given
  std::string output_dir;              ///< search.csv and search.html go here
};

// iterate (body in run/inspect.cpp)

/// What `trainyard iterate` measured (Runner::iterate): the training split's
/// input pipeline alone (decode threads, loader), no network.
struct IterateResult {
  int64_t samples = 0, batches = 0;
  double seconds = 0;          ///< from the loader's start to its last batch
  int64_t steady_samples = 0;  ///< after the first batch (threads started, caches warm)
  double steady_seconds = 0;
  int64_t decode_threads = 0;
  int64_t bad_records = 0;
};

// find-lr (body in run/lr_finder.cpp: pixelz' LR finder, Smith's range test;
// the modes restart and sweep are described in run/lr_finder.h)

struct LrFinderOptions {
  std::string mode = "restart";  ///< restart | sweep
  double min_lr = 1e-6, max_lr = 1.0;
  int64_t num_runs = 12;        ///< restart
  int64_t iters_per_run = 20;   ///< restart: optimizer updates per run
  int64_t iters = 100;          ///< sweep: optimizer updates in all
  double smoothing = 0.98;      ///< sweep: moving-average weight of the past
  double diverge_factor = 4.0;  ///< stop once the (smoothed) loss exceeds this times its minimum
};

struct LrFinderPoint {
  double lr = 0;
  double loss = 0;        ///< restart: mean over the run's last quarter; sweep: the update's loss
  double smoothed = 0;    ///< sweep: the moving average (restart: = loss)
  bool diverged = false;  ///< the loss turned non-finite or exceeded diverge_factor x the best
};

struct LrFinderResult {
  std::vector<LrFinderPoint> points;
  std::optional<double> suggestion;  ///< empty when the curve is unusable
  std::string rule;                  ///< how the suggestion was chosen
  std::string problem;               ///< why there is no suggestion, or what to be careful about
  bool diverged = false;             ///< a rate diverged: the finder stopped there
};

}  // namespace trainyard::host
