#pragma once
// The host's own sections of an experiment (loop, distributed, output,
// schedule, stopping, ema): typed structs, each declared by one TypedSchema, the
// mechanism plugins use. The schema validates the YAML and prints
// `trainyard describe SECTION`; its binding fills the struct.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "trainyard/options.h"

namespace trainyard::host {

struct LoopConfig {
  int64_t epochs = 1;
  int64_t batch_per_device = 64;
  int64_t test_batch_per_device = 0;    ///< 0: batch_per_device
  int64_t train_samples_per_epoch = 0;  ///< 0: one pass over the training set
  int64_t test_every_iters = 0;         ///< 0: only at the end of each epoch
  int64_t test_samples = 0;             ///< 0: the whole test set
  bool shuffle = true;
  bool drop_last = false;
  /// P x K batches (metric learning): P classes of K samples each per
  /// training batch; 0: off. Needs a dataset that reports all its labels.
  int64_t classes_per_batch = 0;
  int64_t samples_per_class = 0;
  bool pk_with_replacement = false;  ///< a class with fewer than K samples is drawn with replacement
  int64_t log_every_iters = 50;
  int64_t iter_size = 1;       ///< batches accumulated per optimizer update
  double clip_grad_norm = 0;   ///< 0: no clipping by global norm
  double clip_grad_value = 0;  ///< 0: no clipping by value
  /// "auto" (one per CPU this rank may use, but one: make_loader_options),
  /// or a count as text ("0" decodes on the training thread): decode_thread_count().
  std::string decode_threads = "auto";
  int64_t prefetch_batches = 4;
  std::string nonfinite = "error";   ///< error | skip | ignore: a NaN/inf loss or gradient
  int64_t nonfinite_max_skips = 10;  ///< skip: in a row, before stopping as with error
  /// "auto" or a count as text: updates between the host's reads of the
  /// update's checks kept on the device (update_checks_count()).
  std::string update_checks_every = "auto";
  bool cuda_graph = false;  ///< capture the step's forward, loss and backward as a CUDA graph (train/cuda_graph.h)
  std::vector<std::string> stop_signals{"SIGINT", "SIGTERM", "SIGUSR1"};  ///< stop with a checkpoint, exit 4
  std::string precision = "fp32";        ///< fp32 | bf16-mixed | fp16-mixed | auto, as written
  std::string cudnn_benchmark = "auto";  ///< auto | true | false: cuDNN's autotuner on CUDA runs
  /// What `precision` means on this machine (auto resolved where the
  /// experiment is loaded: run/session.cpp), why, and a warning when slow here.
  std::string precision_used, precision_reason, precision_warning;
  /// The precision the loop runs in: the resolved one, else as written.
  const std::string& effective_precision() const { return precision_used.empty() ? precision : precision_used; }
  /// decode_threads as a count; nothing for auto.
  std::optional<int64_t> decode_thread_count() const;
  /// update_checks_every as a count; nothing for auto (Updater: 1 on the CPU, one read per log line on a GPU).
  std::optional<int64_t> update_checks_count() const;
  double stall_timeout_secs = 1800;  ///< the watchdog ends a run with no progress this long (exit 5); 0: off
  double stop_grace_secs = 15;       ///< after a stop signal, the time allowed to reach a boundary
};

struct DistributedConfig {
  int64_t num_gpus = 0;
  int64_t num_cpus = 1;  ///< CPU processes when num_gpus is 0
  int64_t first_gpu_id = 0;
  int64_t threads_per_process = 0;  ///< 0: the node's cores shared by its processes
  std::string master_addr = "127.0.0.1";
  int64_t master_port = 29500;
  std::string rendezvous = "tcp";
  std::string rendezvous_file;
  int64_t timeout_secs = 60;
  int64_t bucket_mb = 25;
  bool sync_batch_norm = false;
};

struct StoppingConfig {
  std::string target_meter;  ///< stop once this meter reaches `target`
  double target = 0;
  std::string monitor;        ///< early stopping and best.pt follow this meter
  int64_t patience = 0;       ///< epochs without improvement before stopping; 0: never
  double min_delta = 0;       ///< smaller changes are not improvements
  std::string mode = "auto";  ///< max | min | auto (min for names with "loss")

  /// Whether `meter` is better smaller under `mode`.
  bool minimizes(const std::string& meter) const {
    return mode == "min" || (mode == "auto" && meter.find("loss") != std::string::npos);
  }
};

/// Weight averaging (train/weight_average.h): an exponential moving average
/// of the network's weights, as timm's ModelEmaV3 computes it.
struct EmaConfig {
  bool enabled = false;
  double decay = 0.9998;  ///< the average's weight on its past, per averaging step
  bool warmup = true;     ///< decay_t = min(decay, 1 - (1 + t / warmup_gamma)^-warmup_power) (timm)
  double warmup_gamma = 1.0;
  double warmup_power = 2.0 / 3.0;
  int64_t every_updates = 1;        ///< average after every N-th optimizer update
  std::string device = "same";      ///< same (the network's) | cpu
  std::string buffers = "average";  ///< average (timm) | copy (the trained network's, MMEngine's default)
  bool evaluate = false;            ///< test the averaged weights too (values test_ema_*)
};

/// output.plots entry (Playground's plots): one chart of meter values.
struct PlotSpec {
  std::string title;
  std::string x = "iteration";  ///< iteration | epoch
  std::vector<std::string> ys;  ///< value names: train_loss, test_accuracy_top1, lr, ...
};

struct OutputConfig {
  std::string dir = "runs";
  std::vector<PlotSpec> plots;  ///< empty: the default plots (loss, accuracy, learning rate)
  bool report = true;           ///< report.html and plots/ at the end of a run
};

/// `checkpoint:` when checkpoints are written, which are kept and how
/// (train/checkpoint_store.h, train/builtin_hooks.h). Its keys lived in
/// loop, stopping and output before: those still read (renamed_keys.h).
struct CheckpointConfig {
  int64_t every_iters = 0;  ///< also every N train iterations; 0: at the end of each epoch only
  double every_secs = 0;    ///< also every T seconds of wall time; 0: not by time
  int64_t keep = 3;         ///< recent checkpoints kept; 0: all
  bool keep_best = true;    ///< checkpoints/best.pt: the best epoch by stopping.monitor
  bool async = true;        ///< the training thread only snapshots; a writer thread writes
};

/// Learning-rate schedule (train/schedule.h computes the factor from it).
struct ScheduleConfig {
  std::string policy = "constant";  ///< constant | step | multistep | exp | cosine | poly | custom (an override)
  std::string unit = "iteration";   ///< iteration (each optimizer update) | epoch
  std::vector<int64_t> boundaries;  ///< step: where the rate changes
  std::vector<double> values;       ///< step: the rates, one more than boundaries
  std::vector<int64_t> milestones;  ///< multistep: multiply by gamma at each
  double gamma = 0.1;               ///< multistep, exp
  int64_t decay_steps = 1;          ///< exp: gamma per this many steps
  bool staircase = false;           ///< exp: whole decay steps only
  double min_factor = 0.0;          ///< cosine, poly: the floor, as a fraction of the start rate
  double power = 1.0;               ///< poly
  int64_t warmup_steps = 0;         ///< linear warmup from warmup_start_factor
  double warmup_start_factor = 0.0;
};

/// Each section's schema with its struct binding.
const TypedSchema<LoopConfig>& loop_section();
const TypedSchema<DistributedConfig>& distributed_section();
const TypedSchema<OutputConfig>& output_section();
const TypedSchema<CheckpointConfig>& checkpoint_section();  ///< `plots:` is checked by the host, not by the schema
const TypedSchema<StoppingConfig>& stopping_section();
const TypedSchema<ScheduleConfig>& schedule_section();
const TypedSchema<EmaConfig>& ema_section();

/// The plain schemas (validation and `trainyard describe`).
const Schema& loop_schema();
const Schema& distributed_schema();
const Schema& output_schema();
const Schema& checkpoint_schema();
const Schema& stopping_schema();
const Schema& schedule_schema();
const Schema& ema_schema();

/// Whether a run may change `key` ("loop.epochs": a section and its key)
/// when it resumes: marked where the key is declared (sections.cpp), for keys
/// that lengthen a run or change how fast or verbosely it runs, never what it
/// computes.
bool changeable_on_resume(const std::string& key);

/// The host's own sections by name (loop, distributed, ...): `describe`,
/// completion, and the resume comparison's defaults.
const std::vector<std::pair<std::string, const Schema*>>& host_sections();

/// Binds the schedule and checks what one option alone cannot (step values
/// match the boundaries, steps increase). Throws ConfigError; `where` names the section.
ScheduleConfig schedule_config(const Options& options, const std::string& where);

}  // namespace trainyard::host
