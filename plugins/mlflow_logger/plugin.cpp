// mlflow_logger: the run in MLflow's file store (`mlruns/`, by default next
// to the run directories) or on a tracking server (REST), so that mlflow.search_runs, the MLflow client and
// `mlflow ui` compare trainyard runs with the rest of a team's: the resolved
// experiment as params, every meter as metrics (train/loss, test/accuracy_top1
// at their iteration; lr and batch loss every N iterations), tags, and the
// report, config and final checkpoint as artifacts. Rank 0 writes. A resumed
// training run continues its MLflow run (its id is kept in RUN_DIR).
#include <filesystem>
#include <fstream>
#include <memory>

#include <torch/optim/optimizer.h>
#include <trainyard/callback.h>
#include <trainyard/logger_helpers.h>
#include <trainyard/plugin.h>
#include <trainyard/run_config.h>

#include "file_store.h"
#include "rest_run.h"

namespace fs = std::filesystem;

namespace {

std::string newest_checkpoint(const fs::path& folder) {
  std::string newest;
  if (fs::is_directory(folder))
    for (const auto& entry : fs::directory_iterator(folder)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("ckpt-", 0) == 0 && entry.path().extension() == ".pt" &&
          name > fs::path(newest).filename().string())
        newest = entry.path().string();
    }
  return newest;
}

struct MlflowOptions {
  std::string tracking_uri;
  std::string experiment;
  int64_t every_iters = 0;
  bool log_checkpoint = false;
};

const trainyard::TypedSchema<MlflowOptions>& typed_schema() {
  static const trainyard::TypedSchema<MlflowOptions> s = [] {
    using O = MlflowOptions;
    trainyard::TypedSchema<O> t;
    t.add("tracking_uri", &O::tracking_uri, "",
          "a tracking server (http://host:5000) or a file store (a folder, or file:PATH); empty: MLFLOW_TRACKING_URI, "
          "else OUTPUT_DIR/mlruns next to the run directories");
    t.add("experiment", &O::experiment, "", "MLflow experiment name; empty: the trainyard experiment's name");
    t.add("every_iters", &O::every_iters, 50,
          "train/lr, train/batch_loss and train/samples_per_sec every N iterations; 0: never")
        .min(0);
    t.add("log_checkpoint", &O::log_checkpoint, true, "copy the final checkpoint into the run's artifacts");
    return t;
  }();
  return s;
}

class MlflowLogger : public trainyard::Callback {
 public:
  MlflowLogger(const MlflowOptions& o, const trainyard::Context& c)
      : uri_(o.tracking_uri),
        experiment_(o.experiment),
        every_(o.every_iters),
        checkpoint_(o.log_checkpoint),
        run_dir_(c.run_dir),
        rank_(c.rank) {
    // As MLflow's own client: the option, else MLFLOW_TRACKING_URI, else a
    // file store next to the run directories.
    if (uri_.empty() && std::getenv("MLFLOW_TRACKING_URI")) uri_ = std::getenv("MLFLOW_TRACKING_URI");
    if (uri_.empty()) uri_ = (fs::path(c.run_dir).parent_path() / "mlruns").string();
    if (uri_.rfind("file:", 0) == 0) uri_ = uri_.substr(uri_.rfind("file://", 0) == 0 ? 7 : 5);
    if (experiment_.empty()) experiment_ = c.experiment;
  }
  ~MlflowLogger() override {
    if (!run_) return;
    try {  // after the host wrote the report (the trainer outlives it); then end_ ends a run that failed
      const fs::path report = fs::path(run_dir_) / "report.html";
      if (fs::exists(report)) run_->artifact(report.string(), "report.html");
    } catch (...) {}
  }
  void before_run(trainyard::Loop& loop) override {
    if (rank_ != 0 || run_) return;
    const fs::path id_file = fs::path(run_dir_) / "mlflow_run_id";
    std::string run_id;
    std::ifstream(id_file) >> run_id;
    const bool resumed = !run_id.empty();
    const std::string name = fs::path(run_dir_).filename().string();
    // A server names a new run itself; a file store's new run gets an id here.
    if (uri_.rfind("http://", 0) == 0 || uri_.rfind("https://", 0) == 0)
      run_ = std::make_unique<mlflow_logger::RestRun>(uri_, experiment_, name, run_id);
    else
      run_ = std::make_unique<mlflow_logger::FileStoreRun>(
          uri_, experiment_, name, resumed ? run_id : mlflow_logger::FileStoreRun::new_run_id());
    end_.begin();
    if (!resumed) std::ofstream(id_file) << run_->run_id() << "\n";
    if (resumed) run_->truncate_metrics_after(loop.iteration());
    for (const auto& [key, value] : trainyard::run_config_values(run_dir_))
      run_->param(key, trainyard::config_value_text(value));
    run_->tag("mlflow.source.name", "trainyard");
    run_->tag("mlflow.source.type", "LOCAL");
    run_->tag("mlflow.user", std::getenv("USER") ? std::getenv("USER") : "trainyard");
    run_->tag("trainyard.run_dir", fs::absolute(run_dir_).string());
    const fs::path config = fs::path(run_dir_) / "config.yaml";
    if (fs::exists(config)) run_->artifact(config.string(), "config.yaml");
  }
  void before_epoch(trainyard::Loop&) override { speed_.restart(); }
  void after_train_iter(trainyard::Loop& loop, const trainyard::StepResult& r) override {
    speed_.add(r.batch.size());
    if (!run_ || every_ <= 0 || loop.iteration() % every_ != 0) return;
    run_->metric("train/lr", loop.optimizer().param_groups().at(0).options().get_lr(), loop.iteration());
    run_->metric("train/batch_loss", r.loss.item<double>(), loop.iteration());
    run_->metric("train/samples_per_sec", speed_.take_per_sec(), loop.iteration());
  }
  void after_test(trainyard::Loop& loop, const trainyard::MeterValues& values) override {
    if (!run_) return;
    for (const auto& [name, value] : values) run_->metric(trainyard::grouped_name(name), value, loop.iteration());
    run_->flush();
  }
  void after_epoch(trainyard::Loop& loop) override {
    if (!run_) return;
    for (const auto& [name, value] : trainyard::phase_values(loop.values(), "train"))
      run_->metric(trainyard::grouped_name(name), value, loop.iteration());
    run_->flush();
  }
  void after_run(trainyard::Loop&) override {
    if (!run_) return;
    if (checkpoint_)
      if (const std::string last = newest_checkpoint(fs::path(run_dir_) / "checkpoints"); !last.empty())
        run_->artifact(last, "checkpoints/" + fs::path(last).filename().string());
    end_.finish();
  }

 private:
  std::string uri_, experiment_;
  int64_t every_;
  bool checkpoint_;
  std::string run_dir_;
  int rank_;
  std::unique_ptr<mlflow_logger::Tracker> run_;
  trainyard::RunEnd end_{[this](bool finished) {
    run_->finish(finished ? mlflow_logger::RunStatus::finished : mlflow_logger::RunStatus::failed);
  }};
  trainyard::Throughput speed_;
};

void register_components(trainyard::Registrar& r) {
  r.add_callback("mlflow_logger",
                 "the run in MLflow (a file store or a tracking server): the resolved experiment as params, meters as "
                 "metrics, tags, and "
                 "report, config and final checkpoint as artifacts (read with MLFLOW_ALLOW_FILE_STORE=true)",
                 typed_schema().schema(), [](const trainyard::Options& o, const trainyard::Context& c) {
                   return std::make_shared<MlflowLogger>(typed_schema().bind(o), c);
                 });
}

}  // namespace

TRAINYARD_PLUGIN("mlflow_logger", "1.0.0", "MLflow tracking (file store or REST)", register_components)
