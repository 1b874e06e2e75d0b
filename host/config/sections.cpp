#include "config/sections.h"

#include <algorithm>
#include <mutex>
#include <set>

#include "trainyard/error.h"
#include "util/process.h"

namespace trainyard::host {
namespace {

std::mutex resumable_mutex;
std::set<std::string>& resumable_keys() {  // "section.key", under resumable_mutex
  static std::set<std::string> keys;
  return keys;
}

// Marks a key that a run may change when it resumes: it lengthens the run,
// or changes how fast or how verbosely it runs, never what it computes (the
// batches are the same for any number of decode threads). The mark sits
// where the key is declared; changeable_on_resume() reads it.
OptionSpec& changeable_on_resume(const char* section, OptionSpec& spec) {
  const std::lock_guard<std::mutex> lock(resumable_mutex);
  resumable_keys().insert(std::string(section) + "." + spec.key);
  return spec;
}

}  // namespace

bool changeable_on_resume(const std::string& key) {
  (void)host_sections();  // every section built: each marks its keys as it declares them
  const std::lock_guard<std::mutex> lock(resumable_mutex);
  return resumable_keys().count(key) != 0;
}

std::optional<int64_t> LoopConfig::decode_thread_count() const {
  if (decode_threads == "auto") return std::nullopt;
  return std::stoll(decode_threads);  // checked by read_sections
}

std::optional<int64_t> LoopConfig::update_checks_count() const {
  if (update_checks_every == "auto") return std::nullopt;
  return std::stoll(update_checks_every);  // checked by read_sections
}

const TypedSchema<LoopConfig>& loop_section() {
  static const TypedSchema<LoopConfig> schema = [] {
    using L = LoopConfig;
    TypedSchema<L> s;
    // Bounded so that epochs x iterations (and every step count made from them)
    // fits in 64 bits: at most 1e6 epochs of at most 1e12 samples.
    changeable_on_resume("loop", s.add("epochs", &L::epochs, 1, "number of epochs to train").range(0, 1000000));
    s.add("batch_per_device", &L::batch_per_device, 64, "training batch size on each device (process)").min(1);
    s.add("test_batch_per_device", &L::test_batch_per_device, 0, "test batch size; 0 uses batch_per_device").min(0);
    s.add("train_samples_per_epoch", &L::train_samples_per_epoch, 0,
          "samples per epoch; 0 is one pass over the training set")
        .range(0, 1e12);
    s.add("test_every_iters", &L::test_every_iters, 0, "also test every N train iterations; 0 tests only at epoch end")
        .min(0);
    s.add("test_samples", &L::test_samples, 0, "test samples per test pass; 0 is the whole test set").min(0);
    s.add("shuffle", &L::shuffle, true, "draw a new permutation of the training set every epoch from (seed, epoch)");
    s.add("drop_last", &L::drop_last, false, "drop the last incomplete training batch of an epoch");
    s.add("classes_per_batch", &L::classes_per_batch, 0,
          "P x K batches for metric learning: P classes per training batch (with samples_per_class K; "
          "batch_per_device must be P x K); 0: batches of shuffled samples")
        .min(0);
    s.add("samples_per_class", &L::samples_per_class, 0, "P x K batches: K samples of each class per batch").min(0);
    s.add("pk_with_replacement", &L::pk_with_replacement, false,
          "P x K batches: draw a class with fewer than K samples with replacement instead of refusing it");
    changeable_on_resume("loop", s.add("log_every_iters", &L::log_every_iters, 50,
                                       "write train meter values to metrics.jsonl every N iterations")
                                     .min(1));
    s.add("iter_size", &L::iter_size, 1,
          "batches whose gradients are accumulated into one optimizer update (loss scaled by 1/N)")
        .min(1);
    s.add("clip_grad_norm", &L::clip_grad_norm, 0.0,
          "scale gradients down to at most this global L2 norm; 0 does not clip")
        .min(0.0);
    s.add("clip_grad_value", &L::clip_grad_value, 0.0, "clamp every gradient to [-v, v]; 0 does not clip").min(0.0);
    changeable_on_resume(
        "loop",
        s.add("decode_threads", &L::decode_threads, "auto",
              "threads per rank that read, decode and augment samples: auto (one per CPU this rank may use, from its "
              "affinity mask, Slurm's cpus-per-task or threads_per_process and the ranks on its node, keeping one for "
              "the training thread), or 0 to 64 (0 does it on the training thread)"));
    changeable_on_resume("loop", s.add("prefetch_batches", &L::prefetch_batches, 4,
                                       "batches kept ahead of training besides the one each decode thread is making")
                                     .range(1, 1024));
    s.add("nonfinite", &L::nonfinite, "error",
          "a NaN or infinite loss or gradient: error (stop before the update, checkpoint, name the cause), skip "
          "(drop that update, count it; stop after nonfinite_max_skips in a row), or ignore")
        .one_of({"error", "skip", "ignore"});
    s.add("stop_signals", &L::stop_signals, {"SIGINT", "SIGTERM", "SIGUSR1"},
          "signals that stop the run at the next iteration with a checkpoint (exit code 4, resumable)")
        .one_of(stop_signal_names());
    s.add("nonfinite_max_skips", &L::nonfinite_max_skips, 10,
          "skip: updates dropped in a row before the run stops as with error")
        .min(1);
    changeable_on_resume(
        "loop",
        s.add(
            "update_checks_every", &L::update_checks_every, "auto",
            "updates between the host's reads of each update's checks (gradient norm, NaN/inf, loop.nonfinite's "
            "skips), which stay on the device in between: a non-finite update is skipped there by the optimizer's "
            "fused kernel and acted on at the next read, with the last good weights. auto: 1 on the CPU (a read costs "
            "nothing there), one read per train log line on a GPU (log_every_iters / iter_size updates); or a count "
            "from 1 (1: the host waits for the device at every update). fp16-mixed, --debug, find-lr and optimizers "
            "that cannot skip a step on the device read every update"));
    s.add("cuda_graph", &L::cuda_graph, false,
          "capture each training step's forward, loss and backward once as a CUDA graph and replay it (one launch "
          "instead of one per kernel; the update stays outside it): one GPU, iter_size 1, fp32 or bf16-mixed, a "
          "fixed sample shape, the update's checks kept on the device; refused with the reason otherwise. A shorter "
          "last batch runs without the graph");
    s.add("precision", &L::precision, "fp32",
          "fp32; bf16-mixed (autocast to bfloat16: GPUs from compute capability 8.0, and CPUs, where it is fast only "
          "with AVX512-BF16 or AMX-BF16); fp16-mixed (autocast to float16 with dynamic loss scaling: GPUs only); auto "
          "(bf16-mixed where bfloat16 is native, fp16-mixed on older GPUs, else fp32; the choice is printed and "
          "recorded). Losses, meters and the non-finite check see fp32")
        .one_of({"fp32", "bf16-mixed", "fp16-mixed", "auto"});
    s.add("cudnn_benchmark", &L::cudnn_benchmark, "auto",
          "cuDNN's autotuner (PyTorch's torch.backends.cudnn.benchmark): each convolution shape is timed once "
          "against cuDNN's algorithms and the fastest kept. auto: on for CUDA runs whose datasets give a fixed "
          "sample shape, off otherwise; true or false as written (a CPU run never uses cuDNN). The choice and its "
          "reason are recorded in provenance.json")
        .one_of({"auto", "true", "false"});
    changeable_on_resume("loop", s.add("stall_timeout_secs", &L::stall_timeout_secs, 1800.0,
                                       "the watchdog ends the run (exit code 5, stack traces in "
                                       "RUN_DIR/stall-rankN.txt) when no step, test batch "
                                       "or component call completes for this long; 0 turns it off")
                                     .range(0.0, 1e7));
    // 15 s: the watchdog names the hung component, writes its stacks and
    // frees the run lock well within the 30 s that Slurm (KillWait) and
    // Kubernetes (terminationGracePeriodSeconds) allow by default.
    changeable_on_resume(
        "loop",
        s.add(
             "stop_grace_secs", &L::stop_grace_secs, 15.0,
             "after a stop signal, how long the loop may take to reach its next boundary (and write its checkpoint) "
             "before the watchdog names what hangs and ends the run (exit code 5); keep it under the scheduler's grace "
             "(30 s by default in Slurm and Kubernetes)")
            .range(1.0, 1e7));
    return s;
  }();
  return schema;
}

const TypedSchema<DistributedConfig>& distributed_section() {
  static const TypedSchema<DistributedConfig> schema = [] {
    using D = DistributedConfig;
    TypedSchema<D> s;
    s.add("num_gpus", &D::num_gpus, 0, "GPUs to train on; 0 trains on the CPU").min(0);
    s.add("first_gpu_id", &D::first_gpu_id, 0, "index of the first GPU to use").min(0);
    s.add("num_cpus", &D::num_cpus, 1,
          "with num_gpus 0: CPU processes to train on (one process each, Gloo between them)")
        .range(1, 1024);
    s.add("threads_per_process", &D::threads_per_process, 0,
          "intra-op CPU threads; 0 shares the node's cores among its processes")
        .min(0);
    s.add("master_addr", &D::master_addr, "127.0.0.1", "address of rank 0 (the environment's MASTER_ADDR wins)");
    s.add("master_port", &D::master_port, 29500, "port of rank 0's store (the environment's MASTER_PORT wins)")
        .range(1, 65535);
    s.add("rendezvous", &D::rendezvous, "tcp",
          "how ranks find each other: tcp (a store on rank 0) or file (a shared file)")
        .one_of({"tcp", "file"});
    s.add("rendezvous_file", &D::rendezvous_file, "",
          "the shared file for rendezvous: file (removed when the run ends cleanly)");
    changeable_on_resume("distributed", s.add("timeout_secs", &D::timeout_secs, 60,
                                              "a rank that does not answer within this time fails the run")
                                            .range(1, 86400));
    s.add("bucket_mb", &D::bucket_mb, 25, "gradients are averaged in flat buckets of about this size").range(1, 4096);
    s.add("sync_batch_norm", &D::sync_batch_norm, false,
          "batch norm statistics over the global batch (networks that use trainyard::SyncBatchNorm2d)");
    return s;
  }();
  return schema;
}

const TypedSchema<StoppingConfig>& stopping_section() {
  static const TypedSchema<StoppingConfig> schema = [] {
    using S = StoppingConfig;
    TypedSchema<S> s;
    s.add("target_meter", &S::target_meter, "",
          "stop once this meter reaches target, e.g. test_accuracy_top1 or train_loss");
    s.add("target", &S::target, 0.0, "the value target_meter must reach (at least, or at most for a minimized meter)");
    s.add("monitor", &S::monitor, "", "meter for early stopping and best.pt, e.g. test_loss; empty: neither");
    s.add("patience", &S::patience, 0,
          "stop after this many epochs without improvement of monitor; 0 never stops early")
        .min(0);
    s.add("min_delta", &S::min_delta, 0.0, "an improvement must exceed this").min(0.0);
    s.add("mode", &S::mode, "auto", "max, min, or auto (min when the meter name contains 'loss')")
        .one_of({"auto", "max", "min"});
    return s;
  }();
  return schema;
}

const TypedSchema<OutputConfig>& output_section() {
  static const TypedSchema<OutputConfig> schema = [] {
    using O = OutputConfig;
    TypedSchema<O> s;
    s.add("dir", &O::dir, "runs", "folder holding run directories (<dir>/<name>/); relative to the working directory");
    s.add("report", &O::report, true, "write report.html and plots/*.svg in the run directory at the end of a run");
    return s;
  }();
  return schema;
}

const TypedSchema<CheckpointConfig>& checkpoint_section() {
  static const TypedSchema<CheckpointConfig> schema = [] {
    using C = CheckpointConfig;
    TypedSchema<C> s;
    s.add("every_iters", &C::every_iters, 0,
          "also checkpoint every N train iterations (a multiple of loop.iter_size); 0 only at epoch end")
        .min(0);
    s.add("every_secs", &C::every_secs, 0.0,
          "also checkpoint every T seconds of wall time (between updates); 0: not by time")
        .min(0.0);
    changeable_on_resume("checkpoint",
                         s.add("keep", &C::keep, 3, "how many recent checkpoints to keep; 0 keeps all").min(0));
    s.add("keep_best", &C::keep_best, true, "keep checkpoints/best.pt, the epoch with the best stopping.monitor value");
    changeable_on_resume("checkpoint",
                         s.add("async", &C::async, true,
                               "the training thread only copies the checkpoint's tensors to host memory and a writer "
                               "thread writes the file (one write at a time); false writes it on the training thread"));
    return s;
  }();
  return schema;
}

const TypedSchema<ScheduleConfig>& schedule_section() {
  static const TypedSchema<ScheduleConfig> schema = [] {
    using C = ScheduleConfig;
    TypedSchema<C> s;
    s.add("policy", &C::policy, "constant",
          "constant, step (piecewise), multistep, exp, cosine, poly, or custom (an additional_override replaces "
          "the schedule stage, e.g. one_cycle or cyclic)")
        .one_of({"constant", "step", "multistep", "exp", "cosine", "poly", "custom"});
    s.add("unit", &C::unit, "iteration", "step the schedule every optimizer update (iteration) or every epoch")
        .one_of({"iteration", "epoch"});
    s.add("boundaries", &C::boundaries, {}, "step: steps at which the rate changes").min(0);
    s.add("values", &C::values, {}, "step: the learning rates, one more than boundaries").min(0.0);
    s.add("milestones", &C::milestones, {}, "multistep: steps at which the rate is multiplied by gamma").min(0);
    s.add("gamma", &C::gamma, 0.1, "multistep and exp: the multiplier").range(0.0, 1.0);
    s.add("decay_steps", &C::decay_steps, 1, "exp: gamma is applied once per this many steps").min(1);
    s.add("staircase", &C::staircase, false, "exp: decay in whole steps of decay_steps");
    s.add("min_factor", &C::min_factor, 0.0, "cosine and poly: the final rate as a fraction of the starting rate")
        .range(0.0, 1.0);
    s.add("power", &C::power, 1.0, "poly: the exponent").min(0.0);
    s.add("warmup_steps", &C::warmup_steps, 0, "linear warmup over this many steps, before the schedule").min(0);
    s.add("warmup_start_factor", &C::warmup_start_factor, 0.0, "warmup starts at this fraction of the rate")
        .range(0.0, 1.0);
    return s;
  }();
  return schema;
}

const TypedSchema<EmaConfig>& ema_section() {
  static const TypedSchema<EmaConfig> schema = [] {
    using M = EmaConfig;
    TypedSchema<M> s;
    s.add("enabled", &M::enabled, false,
          "keep an exponential moving average of the network's weights (parameters, and buffers as `buffers` says) "
          "beside the trained ones, in every checkpoint; `trainyard export --weights ema` writes it");
    s.add("decay", &M::decay, 0.9998, "the average keeps this share of itself at each averaging step").range(0.0, 1.0);
    s.add("warmup", &M::warmup, true,
          "timm's warmup: the decay after t optimizer updates is min(decay, 1 - (1 + t/warmup_gamma)^-warmup_power), "
          "so early weights are forgotten fast");
    s.add("warmup_gamma", &M::warmup_gamma, 1.0, "warmup: the update count's scale").min(1e-9);
    s.add("warmup_power", &M::warmup_power, 2.0 / 3.0,
          "warmup: 2/3 reaches 0.999 near 31,000 updates, 3/4 near 10,000 (for shorter runs)")
        .min(1e-9);
    s.add("every_updates", &M::every_updates, 1,
          "average after every N-th optimizer update (the decay applies per averaging step)")
        .min(1);
    s.add("device", &M::device, "same",
          "where the average lives: same (the network's device) or cpu (saves GPU memory; each step copies the "
          "weights to the CPU)")
        .one_of({"same", "cpu"});
    s.add("buffers", &M::buffers, "average",
          "batch norm statistics and other buffers: average (averaged like the weights, timm's ModelEmaV3; integer "
          "buffers copied) or copy (the averaged weights use the trained network's current buffers, MMEngine's "
          "default)")
        .one_of({"average", "copy"});
    s.add("evaluate", &M::evaluate, false,
          "each test also runs the test meters on the averaged weights: values test_ema_* beside test_*");
    return s;
  }();
  return schema;
}

const Schema& loop_schema() { return loop_section().schema(); }
const Schema& distributed_schema() { return distributed_section().schema(); }
const Schema& output_schema() { return output_section().schema(); }
const Schema& checkpoint_schema() { return checkpoint_section().schema(); }
const Schema& stopping_schema() { return stopping_section().schema(); }
const Schema& schedule_schema() { return schedule_section().schema(); }
const Schema& ema_schema() { return ema_section().schema(); }

const std::vector<std::pair<std::string, const Schema*>>& host_sections() {
  static const std::vector<std::pair<std::string, const Schema*>> sections = {{"loop", &loop_schema()},
                                                                              {"distributed", &distributed_schema()},
                                                                              {"output", &output_schema()},
                                                                              {"checkpoint", &checkpoint_schema()},
                                                                              {"schedule", &schedule_schema()},
                                                                              {"stopping", &stopping_schema()},
                                                                              {"ema", &ema_schema()}};
  return sections;
}

ScheduleConfig schedule_config(const Options& options, const std::string& where) {
  ScheduleConfig s = schedule_section().bind(options);
  if (s.policy == "step" && s.values.size() != s.boundaries.size() + 1)
    throw ConfigError(where + ": policy step has " + std::to_string(s.boundaries.size()) + " boundaries and " +
                          std::to_string(s.values.size()) + " values",
                      "expected one more value than boundaries",
                      "e.g. boundaries: [1000, 2000], values: [0.1, 0.01, 0.001]");
  if (!std::is_sorted(s.boundaries.begin(), s.boundaries.end()) ||
      !std::is_sorted(s.milestones.begin(), s.milestones.end()))
    throw ConfigError(where + ": boundaries and milestones must be increasing", "expected sorted steps", "");
  return s;
}

}  // namespace trainyard::host
