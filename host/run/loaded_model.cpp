#include "run/loaded_model.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "run/assembly.h"
#include "run/runner.h"
#include "run/session.h"
#include "train/checkpoint_store.h"
#include "train/guard.h"
#include "train/loader_settings.h"
#include "train/weight_average.h"
#include "trainyard/error.h"
#include "trainyard/labeled_files.h"
#include "util/files.h"
#include "util/shape.h"
#include "util/text.h"

namespace fs = std::filesystem;

namespace trainyard::host {

const Built<Dataset>& LoadedModel::evaluation_data() const {
  return components.test_data.object ? components.test_data : components.train_data;
}

Evaluator LoadedModel::evaluator() const {
  return Evaluator(components, context, stage->loop.effective_precision(),
                   test_pass_settings(stage->loop, stage->path,
                                      [this](int64_t batch) {
                                        return make_loader_options(stage->loop, stage->seed, stage->network,
                                                                   components.test_data, batch, context);
                                      }),
                   nullptr);
}

LoadedModel Runner::load_model(const std::string& checkpoint, const std::string& weights) const {
  const Experiment& e = experiment_;
  if (weights != "trained" && weights != "ema")
    throw ConfigError("command line: --weights " + weights, "expected trained or ema",
                      did_you_mean(weights, {"trained", "ema"}));
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
  m.stage = &e.stage(static_cast<size_t>(std::max<int64_t>(0, peeked.stage)));
  m.context = make_context(*m.stage);
  m.components = build_checked(*m.stage, m.context);
  const Components& c = m.components;
  const Built<Dataset>& split = c.test_data.object ? c.test_data : c.train_data;
  m.evaluation_split = split.config->key + " (" + split.config->component->label() + ")";
  if (split.facets.image_preprocessing)
    m.image_preprocessing =
        guarded(*split.config, "image_preprocessing", [&] { return split.object->image_preprocessing(); });
  std::unique_ptr<WeightAverage> average;
  if (m.stage->ema.enabled) average = std::make_unique<WeightAverage>(m.stage->ema, m.network());
  std::vector<CheckpointPart*> parts;
  if (average) parts.push_back(average.get());
  CheckpointState loaded;
  try {
    loaded = load_checkpoint(checkpoint, m.network(), *m.components.optimizer, Verify::already_done, parts);
  } catch (const Error& err) {
    throw ConfigError(err.what(), "expected a checkpoint of this experiment's network", "");
  }
  if (weights == "ema") {
    if (!average)
      throw ConfigError("command line: --weights ema: " + e.path + " keeps no averaged weights (ema.enabled is false)",
                        "expected the experiment the run was trained with, with ema.enabled: true",
                        "if the run set it on its command line, give the same --set ema.enabled=true here; "
                        "otherwise use --weights trained (the default)");
    if (loaded.parts_found.empty())
      throw ConfigError("command line: --weights ema: " + checkpoint + " holds no averaged weights",
                        "expected a checkpoint written while ema.enabled was true", "use --weights trained");
    average->copy_into(m.network());
  }
  return m;
}

InputSet open_input(const LoadedModel& m, const Registry& registry, const std::string& input,
                    const std::vector<std::string>& files_given, const std::string& input_options,
                    const std::string& command, const std::string& origin, bool any_image_size) {
  const Experiment& e = *m.stage;
  const bool is_lmdb = files_given.empty() && (fs::is_regular_file(input) || fs::exists(fs::path(input) / "data.mdb"));
  const std::string plugin = is_lmdb ? "lmdb" : "csv";
  const Component& component = registry.get(Kind::dataset, plugin);
  if (!m.image_preprocessing)
    throw ConfigError(
        command + ": " + m.evaluation_split + " does not say how an image file becomes one of its samples",
        "expected a test dataset whose plugin implements Dataset::image_preprocessing() (SDK 1.1; "
        "the built-in lmdb, image_folder, csv and fashion_mnist do)",
        "evaluate with `trainyard eval` on a split of this experiment, or give the test set a dataset "
        "plugin that says");
  std::map<std::string, Value> values;
  for (const auto& [key, value] : *m.image_preprocessing)
    if (!component.schema.find(key))
      throw ConfigError(command + ": " + m.evaluation_split + ": image_preprocessing() gives '" + key + "'",
                        "options of the built-in image datasets", "");
    else
      values[key] = value;
  InputSet set;
  std::string list;  // the files, as a csv dataset's list, while the dataset is built
  if (is_lmdb) {
    values["path"] = input;
    set.labeled = true;
  } else {
    std::vector<std::string>& files = set.sources;
    if (!files_given.empty()) {
      for (const auto& f : files_given) {
        if (!fs::is_regular_file(f))
          throw ConfigError("command line: " + origin + ": " + f + ": no such file", "expected an image file", "");
        if (!trainyard::is_image_file(f))
          throw ConfigError("command line: " + origin + ": " + f + " is not an image file",
                            "expected ." + join(trainyard::image_file_extensions(), ", .") + " (any case)", "");
        files.push_back(fs::absolute(f).string());
      }
    } else {
      for (const auto& entry : fs::recursive_directory_iterator(input))
        if (entry.is_regular_file() && trainyard::is_image_file(entry.path().string()))
          files.push_back(fs::absolute(entry.path()).string());
      std::sort(files.begin(), files.end());
      if (files.empty())
        throw ConfigError("command line: " + origin + ": no images in this folder",
                          "expected ." + join(trainyard::image_file_extensions(), ", .") + " files (any case)", "");
    }
    for (const auto& f : files)
      if (f.find_first_of(",\"\n") != std::string::npos)
        throw ConfigError("command line: " + origin + ": " + f + ": a comma, quote or newline in the path",
                          "expected paths a CSV list can hold", "rename the file");
    std::string csv = "path,label\n";
    for (const auto& f : files) csv += f + ",0\n";  // labels unknown: callers leave them empty
    list = (fs::temp_directory_path() / ("trainyard-input-" + std::to_string(::getpid()) + ".csv")).string();
    write_file_atomic(list, csv);
    values["file"] = list;
  }
  struct RemoveList {
    std::string path;
    ~RemoveList() {
      std::error_code ec;
      if (!path.empty()) fs::remove(path, ec);
    }
  } remove_list{list};
  Options validated = component_options(component.schema, values, input_options, "--input-options");
  Context context = m.context;
  context.component = "input";
  const ComponentConfig& split = e.test_data.component ? e.test_data : e.train_data;
  const auto& factory = std::get<Factory<Dataset>>(component.factory);
  if (list.empty()) {
    set.dataset = guarded(split, "construction", [&] { return factory(validated, context); });
  } else {
    // The list is ours, not the user's: a file that does not decode is named without it.
    try {
      set.dataset = factory(validated, context);
    } catch (const Error& err) {
      std::string why = err.what();
      const std::string ours = "CSV '" + list + "': ";
      if (const size_t at = why.find(ours); at != std::string::npos) why.erase(at, ours.size());
      throw ConfigError("command line: " + origin + ": " + why);
    }
  }
  // What the network was trained on: the input must have its sample shape.
  const DatasetInfo trained = m.context.dataset, given = set.dataset->info();
  if (set.dataset->size() == 0)
    throw ConfigError("command line: " + origin + ": no samples", "expected at least one sample", "");
  const auto& a = trained.sample_shape;
  const auto& b = given.sample_shape;
  const bool fits = any_image_size ? a.size() == b.size() && (a.empty() || a[0] == b[0]) : a == b;
  if (!a.empty() && !b.empty() && !fits)
    throw ConfigError("command line: " + origin + ": samples of shape " + shape_text(given.sample_shape),
                      "expected the shape the network was trained on, " + shape_text(trained.sample_shape),
                      command == "search"
                          ? "resize the image to that size, or give the experiment's test set load_size (then every "
                            "image is resized as its samples are) and embed the catalog again"
                          : "pass --input-options load_size/crop_size to match the training set's");
  if (is_lmdb)
    for (int64_t i = 0; i < set.dataset->size(); ++i) set.sources.push_back("lmdb:" + std::to_string(i));
  set.preprocessing = validated.values();
  set.loader.batch_size = e.loop.test_batch_per_device > 0 ? e.loop.test_batch_per_device : e.loop.batch_per_device;
  set.loader.device = context.device;
  // The input's own dataset (csv or lmdb), not the split's: its record, once, as it is built.
  set.loader.normalization = input_normalization(split, *set.dataset, facets_of(&component, *set.dataset));
  return set;
}

}  // namespace trainyard::host
