#pragma once
// The built-in samplers: the dataset in order or shuffled, and P x K batches
// for metric learning. make_sampler() (host/train/loader_settings.cpp)
// chooses one from the loop's settings.
#include <cstdint>
#include <vector>

#include "data/sampler.h"

namespace trainyard::host {

/// Every sample once per pass, in a Fisher-Yates permutation drawn with
/// splitmix64 from (seed, epoch, pass), or in the dataset's order. An epoch
/// longer than the dataset takes several passes, each its own permutation.
/// Rank r of W takes positions r, r + W, ... of the epoch's order: every
/// sample of a pass is in exactly one shard.
class ShuffledSampler final : public Sampler {
 public:
  struct Options {
    int64_t dataset_size = 0;
    int64_t samples_per_epoch = 0;  ///< 0: one pass over the dataset
    int64_t batch_size = 1;
    bool shuffle = true;  ///< false: 0, 1, 2, ... every pass
    bool drop_last = false;
  };
  explicit ShuffledSampler(const Options& options);

 protected:
  std::vector<int64_t> epoch_order(int64_t epoch, uint64_t seed, int rank, int world_size) const override;
  int64_t shard_size(int rank, int world_size) const override;

 private:
  Options options_;
};

/// P x K batches: each batch P classes of K samples. Each class's samples
/// are shuffled and cut into groups of K (with replacement, a class under K
/// samples gives one group drawn with replacement); then, batch after batch,
/// the P classes with the most groups left (ties broken at random) give one
/// group each, so the number of batches depends on the class sizes only.
/// Rank r of W takes the epoch's batches r, r + W, ...; the remainder of
/// total_batches() / W is left out, so every rank has as many.
class PkSampler final : public Sampler {
 public:
  struct Options {
    std::vector<int64_t> labels;  ///< every sample's class, in index order
    int64_t classes_per_batch = 0;
    int64_t samples_per_class = 0;
    bool with_replacement = false;
  };
  explicit PkSampler(Options options);
  /// The epoch's batches over all ranks (pk_batches() of the class sizes).
  int64_t total_batches() const { return total_batches_; }
  /// Each class's sample count, by ascending label.
  const std::vector<int64_t>& class_sizes() const { return class_sizes_; }

 protected:
  std::vector<int64_t> epoch_order(int64_t epoch, uint64_t seed, int rank, int world_size) const override;
  int64_t shard_size(int rank, int world_size) const override;

 private:
  Options options_;
  std::vector<int64_t> class_sizes_;
  int64_t total_batches_ = 0;
};

/// P x K: how many batches of P classes an epoch holds over all ranks, given
/// each class's sample count (a class of n samples gives n / K groups of K;
/// with replacement, one group when n < K). The same for every epoch.
int64_t pk_batches(const std::vector<int64_t>& class_sizes, int64_t classes_per_batch, int64_t samples_per_class,
                   bool with_replacement);

}  // namespace trainyard::host
