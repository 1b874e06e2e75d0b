// csv_logger: every logged value in one CSV file (RUN_DIR/metrics.csv by
// default), a row per event: the learning rate and batch loss every N
// iterations, the train meters at each epoch's end, the test meters at each
// test pass. Written by rank 0 (the ranks agree on every value). Lightning's
// CSVLogger and MMEngine's are the models; pandas, spreadsheets and R read it.
#include <filesystem>
#include <memory>

#include <torch/optim/optimizer.h>
#include <trainyard/callback.h>
#include <trainyard/logger_helpers.h>
#include <trainyard/plugin.h>

#include "csv_log.h"

namespace {

struct CsvLoggerOptions {
  std::string file;
  int64_t every_iters = 0;
};

const trainyard::TypedSchema<CsvLoggerOptions>& typed_schema() {
  static const trainyard::TypedSchema<CsvLoggerOptions> s = [] {
    using O = CsvLoggerOptions;
    trainyard::TypedSchema<O> t;
    t.add("file", &O::file, "", "the CSV file; empty: RUN_DIR/metrics.csv");
    t.add("every_iters", &O::every_iters, 50,
          "a train_step row (batch_loss, lr, samples_per_sec) every N iterations; 0: never")
        .min(0);
    return t;
  }();
  return s;
}

class CsvLogger : public trainyard::Callback {
 public:
  CsvLogger(const CsvLoggerOptions& o, const trainyard::Context& c)
      : path_(o.file), every_(o.every_iters), rank_(c.rank) {
    if (path_.empty()) path_ = (std::filesystem::path(c.run_dir) / "metrics.csv").string();
  }
  void before_run(trainyard::Loop& loop) override {
    // A resumed run continues its file, without the rows past its checkpoint.
    if (rank_ == 0 && !log_) log_ = std::make_unique<csv_logger::CsvLog>(path_, loop.iteration());
  }
  void before_epoch(trainyard::Loop&) override { speed_.restart(); }
  void after_train_iter(trainyard::Loop& loop, const trainyard::StepResult& r) override {
    speed_.add(r.batch.size());
    if (!log_ || every_ <= 0 || loop.iteration() % every_ != 0) return;
    log_->add({"train_step",
               loop.epoch(),
               loop.iteration(),
               {{"batch_loss", r.loss.item<double>()},
                {"lr", loop.optimizer().param_groups().at(0).options().get_lr()},
                {"samples_per_sec", speed_.take_per_sec()}}});
  }
  void after_test(trainyard::Loop& loop, const trainyard::MeterValues& values) override {
    if (log_) log_->add({"test", loop.epoch(), loop.iteration(), {values.begin(), values.end()}});
  }
  void after_epoch(trainyard::Loop& loop) override {
    if (log_) log_->add({"train", loop.epoch(), loop.iteration(), trainyard::phase_values(loop.values(), "train")});
  }

 private:
  std::string path_;
  int64_t every_, rank_;
  std::unique_ptr<csv_logger::CsvLog> log_;
  trainyard::Throughput speed_;
};

void register_components(trainyard::Registrar& r) {
  r.add_callback("csv_logger",
                 "every logged value in one CSV: a row per event (phase, epoch, iteration, then a column per value "
                 "name, empty where a row has none)",
                 typed_schema().schema(), [](const trainyard::Options& o, const trainyard::Context& c) {
                   return std::make_shared<CsvLogger>(typed_schema().bind(o), c);
                 });
}

}  // namespace

TRAINYARD_PLUGIN("csv_logger", "1.0.0", "CSV file of every logged value", register_components)
