#pragma once
// A checkpoint's network ready to use, and new inputs prepared for it: what
// `trainyard eval`, `predict`, `embed` and `search` share (run/model.cpp,
// run/catalog.cpp). Internal to run/: the CLI sees the Runner.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/experiment.h"
#include "data/loader.h"
#include "plugins/registry.h"
#include "train/components.h"
#include "train/evaluation.h"

namespace trainyard::host {

/// The components of the stage a checkpoint belongs to, its weights loaded
/// (the averaged ones with --weights ema): a network and what runs it, no
/// loop. Runner::load_model makes it: it throws ConfigError for a damaged
/// checkpoint or one of another network; with `weights` "ema" the network
/// holds the checkpoint's averaged weights (a ConfigError when the run kept
/// none).
struct LoadedModel {
  Context context;
  const Experiment* stage = nullptr;
  Components components;  ///< built and checked as a run builds them (build_checked)
  Network& network() const { return *components.network.object; }
  /// The forward in the experiment's precision, and the test pass (one
  /// process); it refers to this model, which must outlive it.
  Evaluator evaluator() const;
  /// How the evaluation split (test, else train) turns an image file into a
  /// sample (Dataset::image_preprocessing), and which entry said so.
  std::optional<std::map<std::string, Value>> image_preprocessing;
  std::string evaluation_split;  ///< "dataset.test (dataset 'fashion_mnist' from ...)"
  const Built<Dataset>& evaluation_data() const;
};

/// New samples for a loaded model: an LMDB made by `trainyard convert`, a
/// folder of images, or a list of image files, preprocessed exactly as the
/// evaluation split's samples (never guessed: a guess gives plausible, wrong
/// outputs).
struct InputSet {
  std::shared_ptr<Dataset> dataset;
  std::vector<std::string> sources;  ///< per sample: its file, or "lmdb:INDEX"
  bool labeled = false;              ///< an LMDB's labels are known; files' are not
  LoaderOptions loader;              ///< batches as the test pass makes them
  /// The input dataset's options: the evaluation split's preprocessing with --input-options over it.
  std::map<std::string, Value> preprocessing;
};

/// `command` ("predict") and `origin` ("--input DIR", "--query") name the input in errors.
/// `files`: explicit image files (for `search --query`); otherwise `input` is
/// an LMDB or a folder searched recursively. Refuses inputs of another sample
/// shape than the network's, naming both; with `any_image_size` (a network
/// that scores every pixel), only of another rank or channel count.
/// The input is prepared as `m`'s stage prepares its evaluation split.
InputSet open_input(const LoadedModel& m, const Registry& registry, const std::string& input,
                    const std::vector<std::string>& files, const std::string& input_options, const std::string& command,
                    const std::string& origin, bool any_image_size = false);

}  // namespace trainyard::host
