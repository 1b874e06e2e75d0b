#pragma once
/// Dataset components: a finite, indexable collection of samples.
///
/// The host owns batching, shuffling, sharding and resuming: a dataset only
/// answers "how many" and "give me sample i". get(), get_seeded() and
/// get_batch() may be called from several threads at once and must not change
/// the dataset.
///
/// Determinism: the host's loader asks for samples with a seed per sample,
/// seed = hash(experiment seed, epoch, index), through get_batch() (whose
/// default calls get_seeded() for each sample). A dataset that augments
/// derives every random choice from that seed, so a sample is the same
/// whichever thread decodes it and however many threads there are. A dataset
/// that does not augment overrides get() only; get_seeded() then ignores the
/// seed.
///
/// Example (no augmentation):
///   class Squares : public trainyard::Dataset {
///    public:
///     int64_t size() const override { return 100; }
///     trainyard::Example get(int64_t i) const override {
///       return {torch::full({1}, float(i)), torch::tensor(int64_t(i % 2))};
///     }
///     trainyard::DatasetInfo info() const override { return {100, 2, {1}, {"even", "odd"}}; }
///   };
///
/// Example (augmentation: random flips from the sample's seed):
///   trainyard::Example get(int64_t i) const override { return get_seeded(i, 0); }
///   trainyard::Example get_seeded(int64_t i, uint64_t seed) const override {
///     std::mt19937_64 rng(seed);
///     return {flip_if(rng() & 1, image(i)), label(i)};
///   }

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "trainyard/batch.h"
#include "trainyard/context.h"
#include "trainyard/options.h"

namespace trainyard {

/// Per-channel statistics on pixel values scaled to [0, 1]; both empty: the
/// host only scales by 1/255. (Dataset::input_normalization)
struct InputNormalization {
  std::vector<double> mean;
  std::vector<double> std;
};

class Dataset {
 public:
  virtual ~Dataset();
  virtual int64_t size() const = 0;
  /// Sample `index` without augmentation (or as with seed 0).
  virtual Example get(int64_t index) const = 0;
  /// Sample `index` under augmentation seed `seed`. The default ignores the
  /// seed and returns get(index). (A separate name rather than an overload of
  /// get(), so that overriding one never hides the other.)
  virtual Example get_seeded(int64_t index, uint64_t seed) const;
  /// Several samples at once; seeds[k] is the seed of indices[k]. The default
  /// stacks get_seeded(); a dataset held in memory overrides it with one
  /// gather. A BadRecord thrown here makes the host retry sample by sample.
  /// The batch's tensors may already be on the run's device (complete when
  /// get_batch returns: the image datasets' `decode: gpu`); the host then
  /// neither pins nor copies them.
  virtual Batch get_batch(const std::vector<int64_t>& indices, const std::vector<uint64_t>& seeds) const;
  virtual DatasetInfo info() const = 0;
  /// How an image file becomes one of this dataset's samples, as options of
  /// the built-in image datasets (`color`, `load_size`, `crop`, `crop_size`,
  /// `mean`, `std`; docs/experiment-yaml.md): `trainyard predict` decodes new
  /// images and preprocesses them with these, exactly as this dataset's test
  /// samples were. std::nullopt (the default): this dataset cannot say, and
  /// predict refuses rather than guess. Since SDK 1.1: a host calls it only
  /// on plugins built with SDK 1.1 or later.
  virtual std::optional<std::map<std::string, Value>> image_preprocessing() const;
  /// For a dataset whose inputs are 8-bit pixels (uint8, {C, H, W} per
  /// sample): how the host makes them the network's float inputs, once per
  /// batch on the device that runs the network (on a GPU after the pinned,
  /// non-blocking copy, which then moves a quarter of the bytes):
  ///   input = (uint8 / 255 - mean[c]) / std[c]
  /// Decode threads stay in uint8 (a 256-image 224x224 batch is 38 MB, not
  /// 154 MB). std::nullopt (the default): inputs reach the network as the
  /// dataset returns them. Since SDK 1.2: a host calls it only on plugins
  /// built with SDK 1.2 or later.
  ///
  /// Example (ImageNet statistics):
  ///   std::optional<trainyard::InputNormalization> input_normalization() const override {
  ///     return trainyard::InputNormalization{{0.485, 0.456, 0.406}, {0.229, 0.224, 0.225}};
  ///   }
  virtual std::optional<InputNormalization> input_normalization() const;

  /// Since SDK 1.2: true for a dataset read in order rather than by index
  /// (tar shards streamed through a pipe from object storage). The host then
  /// asks each rank for its positions 0, 1, 2, ... of a pass, in order (in
  /// batches, from several decode threads: get_batch() and get_seeded() with
  /// the position as the index), and neither permutes nor shards them: the
  /// dataset decides which samples a rank's positions are, from its Context
  /// (rank, world_size, seed) and the epoch. size() is the samples of one
  /// epoch over all ranks. Default: false (indexed).
  virtual bool streamed() const;
  /// Streamed datasets only: called before each pass (a training epoch; a
  /// test pass is epoch 0), from one thread while no get runs. The pass
  /// starts at this rank's position `first`: a resumed epoch must give
  /// positions first, first + 1, ... exactly as an uninterrupted pass would.
  virtual void begin_pass(int64_t epoch, int64_t first) const;
};

/// Since SDK 1.3, optional: a dataset that holds every label without
/// decoding a sample (in memory, or read from an index while it is built)
/// also derives from AllLabels. The host then checks the whole range against
/// the training dataset's class count before anything is written; otherwise
/// a bad label deep in the data stops the run only when a batch reaches it,
/// after the run directory was made. Found with dynamic_cast: a dataset that
/// does not derive from it is checked batch by batch, as before.
///
/// Example (labels held as a tensor):
///   class Tiny : public trainyard::Dataset, public trainyard::AllLabels {
///     ...
///     at::Tensor all_labels() const override { return labels_; }
///   };
class AllLabels {
 public:
  virtual ~AllLabels();
  /// Every sample's class index in index order (1-d, integer): sample i's at i.
  virtual at::Tensor all_labels() const = 0;
};

}  // namespace trainyard
