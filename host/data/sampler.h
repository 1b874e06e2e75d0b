#pragma once
// The order in which training visits its dataset: a Sampler turns (seed,
// epoch, rank, world size) into this rank's batches of sample indices. The
// loop asks for nothing else, so a new way of sampling is a new Sampler
// (host/data/), chosen in make_sampler() (host/train/loader_settings.cpp).
#include <cstdint>
#include <vector>

namespace trainyard::host {

/// Where a sampler stands: which epoch's order it serves and how many of
/// this rank's batches of it are done. A checkpoint keeps `epoch` and
/// `position` (its LoopPosition "epoch" and "position" entries); the seed
/// is the experiment's. Restored into a fresh sampler with the same
/// settings and shard, it gives the same remaining batches.
struct SamplerState {
  int64_t epoch = 0;
  int64_t position = 0;  ///< this rank's batches of the epoch already served
  uint64_t seed = 0;
  bool operator==(const SamplerState&) const = default;
};

/// This rank's batches of every epoch. The public calls are the loop's and
/// are the same for every sampler; an implementation writes only
/// epoch_order() and shard_size(), pure functions of their arguments (a
/// sampler that draws at random draws from (seed, epoch) alone, never from
/// a global generator: resume and every rank depend on it).
///
/// Example:
///   ShuffledSampler sampler({.dataset_size = 1000, .batch_size = 32});
///   sampler.shard(rank, world_size);
///   sampler.reset(epoch, seed);
///   while (auto batch = sampler.next(); !batch.empty()) train_on(batch);
class Sampler {
 public:
  /// Batches cut `batch_size` entries at a time from the shard's order; the
  /// last, shorter one is left out with `drop_last`.
  Sampler(int64_t batch_size, bool drop_last);
  virtual ~Sampler() = default;

  /// Serves `rank`'s share of every epoch split over `world_size` ranks (the
  /// implementation decides the split; the shares are disjoint). Call
  /// before reset(); the default is rank 0 of 1.
  void shard(int rank, int world_size);
  /// Starts `epoch` at its first batch.
  void reset(int64_t epoch, uint64_t seed);
  /// The next batch of the epoch; empty after its last.
  std::vector<int64_t> next();
  SamplerState state() const { return {epoch_, position_, seed_}; }
  /// Continues where `state` was taken (the epoch's order rebuilt from its
  /// seed and epoch, then `position` batches skipped without being read).
  void restore(const SamplerState& state);

  /// This rank's samples of the current epoch, in order, batch after batch
  /// (batch b: entries b * batch_size() on): what the loader reads, from
  /// batch state().position on (batch_stream(dataset, sampler, ...)).
  const std::vector<int64_t>& order() const { return order_; }
  int64_t batch_size() const { return batch_size_; }
  bool drop_last() const { return drop_last_; }
  /// This rank's batches in every epoch (the same for every epoch).
  int64_t batches_per_epoch() const;
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }

 protected:
  /// `rank`'s samples of `epoch` out of `world_size`, in order.
  virtual std::vector<int64_t> epoch_order(int64_t epoch, uint64_t seed, int rank, int world_size) const = 0;
  /// How many samples epoch_order() gives `rank` (for every epoch), without drawing them.
  virtual int64_t shard_size(int rank, int world_size) const = 0;

 private:
  int64_t batch_size_;
  bool drop_last_;
  int rank_ = 0, world_size_ = 1;
  int64_t epoch_ = 0, position_ = 0;
  uint64_t seed_ = 0;
  bool drawn_ = false;  ///< order_ holds (epoch_, seed_)'s order for this shard
  std::vector<int64_t> order_;
};

}  // namespace trainyard::host
