// tensorboard: TensorBoard event files, written by rank 0 to
// RUN_DIR/tensorboard/ (or `dir`): every meter grouped by phase (train/loss,
// test/accuracy_top1), the learning rate every iteration, batch loss and
// throughput every N iterations, optionally histograms of the parameters at
// each test pass, and the run's hyper-parameters (its resolved experiment,
// flattened) for TensorBoard's HPARAMS tab.
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <trainyard/callback.h>
#include <trainyard/error.h>
#include <trainyard/logger_helpers.h>
#include <trainyard/network.h>
#include <trainyard/plugin.h>
#include <trainyard/run_config.h>

#include "event_writer.h"

namespace {

// train_loss -> train/loss, for the values of one phase.
std::map<std::string, double> grouped(const trainyard::MeterValues& values, const std::string& phase) {
  std::map<std::string, double> out;
  for (const auto& [name, value] : trainyard::phase_values(values, phase)) out[trainyard::grouped_name(name)] = value;
  return out;
}

struct TensorBoardOptions {
  std::string dir;
  int64_t every_iters = 0;
  bool hparams = false, histograms = false;
};

const trainyard::TypedSchema<TensorBoardOptions>& typed_schema() {
  static const trainyard::TypedSchema<TensorBoardOptions> s = [] {
    using O = TensorBoardOptions;
    trainyard::TypedSchema<O> t;
    t.add("dir", &O::dir, "", "folder for the event files; empty: RUN_DIR/tensorboard");
    t.add("every_iters", &O::every_iters, 50, "train/batch_loss and train/samples_per_sec every N iterations; 0: never")
        .min(0);
    t.add("hparams", &O::hparams, true,
          "record the run's hyper-parameters (its resolved experiment) for the HPARAMS tab");
    t.add("histograms", &O::histograms, false, "histograms of every parameter at each test pass (parameters/NAME)");
    return t;
  }();
  return s;
}

class TensorBoard : public trainyard::Callback {
 public:
  TensorBoard(const TensorBoardOptions& o, const trainyard::Context& c)
      : dir_(o.dir),
        run_dir_(c.run_dir),
        every_(o.every_iters),
        hparams_(o.hparams),
        histograms_(o.histograms),
        rank_(c.rank) {
    if (dir_.empty())
      dir_ = (std::filesystem::path(c.run_dir) / "tensorboard").string();
    else if (c.rank == 0)
      check_writable(dir_);
  }
  // A `dir` that cannot be written is the user's to fix, so it is a ConfigError
  // (exit 2) found now, before training: not a filesystem error at before_run.
  // Nothing is created here. (The default, inside the run directory, is the
  // host's to check.)
  static void check_writable(const std::string& dir) {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::path existing = fs::absolute(dir, ec).lexically_normal();
    while (!fs::exists(existing, ec) && existing.has_parent_path() && existing != existing.parent_path())
      existing = existing.parent_path();
    const std::string what = "dir " + dir;
    if (!fs::is_directory(existing, ec))
      throw trainyard::ConfigError(what + ": " + existing.string() + " is not a folder",
                                   "expected a folder for the event files (or a path where one can be created)",
                                   "choose another dir");
    if (::access(existing.c_str(), W_OK | X_OK) != 0)
      throw trainyard::ConfigError(what + ": cannot write in " + existing.string() + " (" + std::strerror(errno) + ")",
                                   "expected a folder this user can write the event files in",
                                   "choose another dir or fix its permissions");
  }
  void before_run(trainyard::Loop&) override {
    if (rank_ != 0 || writer_) return;
    writer_ = std::make_unique<tensorboard::EventWriter>(dir_);
    if (!hparams_) return;
    hparams_values_ = trainyard::run_config_values(run_dir_);
    if (hparams_values_.empty()) return;  // not under `trainyard run`: no hyper-parameters to tell
    writer_->event(tensorboard::hparams_start_event(wall_time(), hparams_values_));
    session_.begin();
  }
  void before_epoch(trainyard::Loop&) override { speed_.restart(); }
  void after_train_iter(trainyard::Loop& loop, const trainyard::StepResult& r) override {
    speed_.add(r.batch.size());
    if (!writer_) return;
    std::map<std::string, double> values{{"train/lr", loop.optimizer().param_groups().at(0).options().get_lr()}};
    if (every_ > 0 && loop.iteration() % every_ == 0) {
      values["train/batch_loss"] = r.loss.item<double>();
      values["train/samples_per_sec"] = speed_.take_per_sec();
    }
    writer_->scalars(loop.iteration(), values);
  }
  void after_test(trainyard::Loop& loop, const trainyard::MeterValues& values) override {
    if (!writer_) return;
    const auto test = grouped(values, "test");
    writer_->scalars(loop.iteration(), test);
    for (const auto& [tag, v] : test) metric_tags_[tag] = true;
    if (histograms_)
      for (const auto& item : loop.network().named_parameters()) {
        const at::Tensor flat = item.value().detach().to(at::kDouble).cpu().contiguous().view({-1});
        writer_->histogram(loop.iteration(), "parameters/" + item.key(),
                           std::vector<double>(flat.data_ptr<double>(), flat.data_ptr<double>() + flat.numel()));
      }
    writer_->flush();
  }
  void after_epoch(trainyard::Loop& loop) override {
    if (!writer_) return;
    const auto train = grouped(loop.values(), "train");
    writer_->scalars(loop.iteration(), train);
    for (const auto& [tag, v] : train) metric_tags_[tag] = true;
    writer_->flush();
  }
  void after_run(trainyard::Loop&) override {
    if (!writer_) return;
    session_.finish();
    writer_->flush();
  }

 private:
  static double wall_time() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  }
  std::string dir_, run_dir_;
  int64_t every_;
  bool hparams_, histograms_;
  int64_t rank_;
  std::unique_ptr<tensorboard::EventWriter> writer_;
  std::map<std::string, trainyard::ConfigValue> hparams_values_;
  std::map<std::string, bool> metric_tags_;
  // The hyper-parameter session: finished with its metrics' tags, or marked failed when the run ends by an error.
  trainyard::RunEnd session_{[this](bool finished) {
    if (finished) {
      std::vector<std::string> metrics;
      for (const auto& [tag, seen] : metric_tags_) metrics.push_back(tag);
      writer_->event(tensorboard::hparams_experiment_event(wall_time(), hparams_values_, metrics));
    }
    writer_->event(tensorboard::hparams_end_event(wall_time(), finished));
    writer_->flush();
  }};
  trainyard::Throughput speed_;
};

void register_components(trainyard::Registrar& r) {
  r.add_callback("tensorboard",
                 "TensorBoard event files: meters as train/... and test/..., the learning rate every iteration, "
                 "loss and throughput every N iterations, hyper-parameters, optional parameter histograms",
                 typed_schema().schema(), [](const trainyard::Options& o, const trainyard::Context& c) {
                   return std::make_shared<TensorBoard>(typed_schema().bind(o), c);
                 });
}

}  // namespace

TRAINYARD_PLUGIN("tensorboard", "1.1.0", "TensorBoard scalars, histograms and hyper-parameters (no TensorFlow needed)",
                 register_components)
