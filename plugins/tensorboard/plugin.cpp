// tensorboard: scalars for TensorBoard (every meter, the learning rate,
// throughput), written by rank 0 to RUN_DIR/tensorboard/ (or `dir`).
#include <chrono>
#include <filesystem>
#include <memory>

#include <torch/optim/optimizer.h>
#include <trainyard/callback.h>
#include <trainyard/plugin.h>

#include "event_writer.h"

namespace {

using Clock = std::chrono::steady_clock;

class TensorBoard : public trainyard::Callback {
 public:
  TensorBoard(const trainyard::Options& o, const trainyard::Context& c)
      : dir_(o.get<std::string>("dir")), every_(o.get<int64_t>("every_iters")), rank_(c.rank) {
    if (dir_.empty()) dir_ = (std::filesystem::path(c.run_dir) / "tensorboard").string();
  }
  void before_run(trainyard::Loop&) override {
    if (rank_ == 0 && !writer_) writer_ = std::make_unique<tensorboard::EventWriter>(dir_);
  }
  void before_epoch(trainyard::Loop&) override { since_ = Clock::now(), samples_ = 0; }
  void after_train_iter(trainyard::Loop& loop, const trainyard::StepResult& r) override {
    samples_ += r.batch.size();
    if (!writer_ || every_ <= 0 || loop.iteration() % every_ != 0) return;
    const double secs = std::chrono::duration<double>(Clock::now() - since_).count();
    writer_->scalars(loop.iteration(), {{"train/batch_loss", r.loss.item<double>()},
                                        {"train/lr", loop.optimizer().param_groups().at(0).options().get_lr()},
                                        {"train/samples_per_sec", secs > 0 ? double(samples_) / secs : 0.0}});
    since_ = Clock::now(), samples_ = 0;
  }
  void after_test(trainyard::Loop& loop, const trainyard::MeterValues& values) override {
    if (writer_) writer_->scalars(loop.iteration(), values);
  }
  void after_epoch(trainyard::Loop& loop) override {
    if (!writer_) return;
    trainyard::MeterValues train;
    for (const auto& [k, v] : loop.values())
      if (k.rfind("train_", 0) == 0) train[k] = v;
    writer_->scalars(loop.iteration(), train);
  }

 private:
  std::string dir_;
  int64_t every_, rank_;
  std::unique_ptr<tensorboard::EventWriter> writer_;
  Clock::time_point since_ = Clock::now();
  int64_t samples_ = 0;
};

void register_components(trainyard::Registrar& r) {
  trainyard::Schema s;
  s.add("dir", "", "folder for the event files; empty: RUN_DIR/tensorboard");
  s.add("every_iters", 50, "train/batch_loss, train/lr and train/samples_per_sec every N iterations; 0: never").min(0);
  r.add_callback("tensorboard",
                 "TensorBoard event files: every meter at each test pass and epoch end, learning rate and "
                 "throughput every N iterations",
                 s, [](const trainyard::Options& o, const trainyard::Context& c) {
                   return std::make_shared<TensorBoard>(o, c);
                 });
}

}  // namespace

TRAINYARD_PLUGIN("tensorboard", "1.0.0", "TensorBoard scalar summaries (no TensorFlow needed)", register_components)
