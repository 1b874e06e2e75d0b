#include "data/samplers.h"

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <utility>

#include "trainyard/random.h"

namespace trainyard::host {
namespace {

// splitmix64 (trainyard/random.h): its output is fixed by its definition,
// unlike std::shuffle's across standard libraries.
uint64_t mix(uint64_t z) { return SplitMix64::mix(z); }

// A counter-based stream: draw i is mix(i * golden ratio).
struct CounterStream {
  uint64_t state;
  uint64_t next() { return mix(state++ * 0x9e3779b97f4a7c15ull); }
  uint64_t below(uint64_t n) { return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64); }
};

std::vector<int64_t> permutation(int64_t n, uint64_t seed, int64_t epoch, int64_t pass) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  CounterStream rng{mix(mix(seed) ^ mix(static_cast<uint64_t>(epoch) + 1) ^ static_cast<uint64_t>(pass) * 0x51ed27)};
  for (int64_t i = n - 1; i > 0; --i) std::swap(p[i], p[rng.below(static_cast<uint64_t>(i + 1))]);
  return p;
}

int64_t pk_groups(int64_t samples, int64_t k, bool with_replacement) {
  return with_replacement && samples > 0 && samples < k ? 1 : samples / k;
}

// P x K: the epoch's batches over all ranks (see PkSampler).
std::vector<std::vector<int64_t>> pk_epoch_batches(const std::vector<int64_t>& labels, int64_t p, int64_t k,
                                                   bool with_replacement, uint64_t seed, int64_t epoch) {
  std::map<int64_t, std::vector<int64_t>> by_class;
  for (size_t i = 0; i < labels.size(); ++i) by_class[labels[i]].push_back(static_cast<int64_t>(i));
  CounterStream rng{mix(mix(seed ^ 0x7a3c9e11ull) ^ mix(static_cast<uint64_t>(epoch) + 1))};
  std::vector<std::vector<std::vector<int64_t>>> groups;  // per class, its groups
  for (auto& [label, samples] : by_class) {
    for (size_t i = samples.size() - 1; i > 0; --i) std::swap(samples[i], samples[rng.below(i + 1)]);
    std::vector<std::vector<int64_t>> own;
    if (with_replacement && static_cast<int64_t>(samples.size()) < k) {
      std::vector<int64_t> drawn;
      for (int64_t j = 0; j < k; ++j) drawn.push_back(samples[rng.below(samples.size())]);
      own.push_back(std::move(drawn));
    } else {
      for (size_t at = 0; at + static_cast<size_t>(k) <= samples.size(); at += static_cast<size_t>(k))
        own.emplace_back(samples.begin() + static_cast<std::ptrdiff_t>(at),
                         samples.begin() + static_cast<std::ptrdiff_t>(at + k));
    }
    groups.push_back(std::move(own));
  }
  std::vector<size_t> next(groups.size(), 0);
  std::vector<std::vector<int64_t>> batches;
  std::vector<std::pair<std::pair<size_t, uint64_t>, size_t>> order(groups.size());
  for (;;) {
    for (size_t c = 0; c < groups.size(); ++c) order[c] = {{groups[c].size() - next[c], rng.next()}, c};
    std::partial_sort(order.begin(), order.begin() + std::min<size_t>(static_cast<size_t>(p), order.size()),
                      order.end(), std::greater<>());
    if (static_cast<int64_t>(order.size()) < p || order[static_cast<size_t>(p - 1)].first.first == 0) break;
    std::vector<int64_t> batch;
    for (int64_t j = 0; j < p; ++j) {
      const size_t c = order[static_cast<size_t>(j)].second;
      const auto& g = groups[c][next[c]++];
      batch.insert(batch.end(), g.begin(), g.end());
    }
    batches.push_back(std::move(batch));
  }
  return batches;
}

}  // namespace

ShuffledSampler::ShuffledSampler(const Options& options)
    : Sampler(options.batch_size, options.drop_last), options_(options) {}

std::vector<int64_t> ShuffledSampler::epoch_order(int64_t epoch, uint64_t seed, int rank, int world_size) const {
  const int64_t n = options_.dataset_size;
  const int64_t wanted = options_.samples_per_epoch > 0 ? options_.samples_per_epoch : n;
  std::vector<int64_t> all;
  all.reserve(static_cast<size_t>(wanted));
  // Epochs longer than the dataset take successive passes, each its own permutation.
  for (int64_t pass = 0; static_cast<int64_t>(all.size()) < wanted && n > 0; ++pass) {
    std::vector<int64_t> p(static_cast<size_t>(n));
    if (options_.shuffle) {
      p = permutation(n, seed, epoch, pass);
    } else {
      std::iota(p.begin(), p.end(), 0);
    }
    const int64_t take = std::min<int64_t>(n, wanted - static_cast<int64_t>(all.size()));
    all.insert(all.end(), p.begin(), p.begin() + take);
  }
  if (world_size == 1) return all;
  std::vector<int64_t> shard;
  for (size_t i = static_cast<size_t>(rank); i < all.size(); i += static_cast<size_t>(world_size))
    shard.push_back(all[i]);
  return shard;
}

int64_t ShuffledSampler::shard_size(int rank, int world_size) const {
  const int64_t all = options_.samples_per_epoch > 0 ? options_.samples_per_epoch : options_.dataset_size;
  return (all - rank + world_size - 1) / world_size;
}

PkSampler::PkSampler(Options options)
    : Sampler(options.classes_per_batch * options.samples_per_class, false), options_(std::move(options)) {
  std::map<int64_t, int64_t> sizes;
  for (int64_t label : options_.labels) ++sizes[label];
  for (const auto& [label, n] : sizes) class_sizes_.push_back(n);
  total_batches_ =
      pk_batches(class_sizes_, options_.classes_per_batch, options_.samples_per_class, options_.with_replacement);
}

std::vector<int64_t> PkSampler::epoch_order(int64_t epoch, uint64_t seed, int rank, int world_size) const {
  const auto batches = pk_epoch_batches(options_.labels, options_.classes_per_batch, options_.samples_per_class,
                                        options_.with_replacement, seed, epoch);
  // Every rank the same number of batches: the remainder of the division is left out.
  const size_t per_rank = batches.size() / static_cast<size_t>(world_size);
  std::vector<int64_t> mine;
  for (size_t b = 0; b < per_rank; ++b) {
    const auto& batch = batches[b * static_cast<size_t>(world_size) + static_cast<size_t>(rank)];
    mine.insert(mine.end(), batch.begin(), batch.end());
  }
  return mine;
}

int64_t PkSampler::shard_size(int, int world_size) const {
  return total_batches_ / world_size * options_.classes_per_batch * options_.samples_per_class;
}

int64_t pk_batches(const std::vector<int64_t>& class_sizes, int64_t classes_per_batch, int64_t samples_per_class,
                   bool with_replacement) {
  std::vector<int64_t> left;
  for (int64_t n : class_sizes) left.push_back(pk_groups(n, samples_per_class, with_replacement));
  int64_t batches = 0;
  const size_t p = static_cast<size_t>(classes_per_batch);
  for (;;) {
    if (left.size() < p) return batches;
    std::partial_sort(left.begin(), left.begin() + static_cast<std::ptrdiff_t>(p), left.end(), std::greater<>());
    if (left[p - 1] == 0) return batches;
    for (size_t j = 0; j < p; ++j) --left[j];
    ++batches;
  }
}

}  // namespace trainyard::host
