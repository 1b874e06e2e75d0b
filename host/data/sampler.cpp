#include "data/sampler.h"

#include <algorithm>
#include <string>

#include "trainyard/error.h"

namespace trainyard::host {

Sampler::Sampler(int64_t batch_size, bool drop_last)
    : batch_size_(std::max<int64_t>(1, batch_size)), drop_last_(drop_last) {}

void Sampler::shard(int rank, int world_size) {
  if (world_size < 1 || rank < 0 || rank >= world_size)
    throw Error("sampler: rank " + std::to_string(rank) + " of " + std::to_string(world_size) +
                " ranks; expected 0 <= rank < world_size");
  rank_ = rank, world_size_ = world_size;
  drawn_ = false;
}

void Sampler::reset(int64_t epoch, uint64_t seed) { restore({epoch, 0, seed}); }

void Sampler::restore(const SamplerState& state) {
  if (!drawn_ || state.epoch != epoch_ || state.seed != seed_) {
    order_ = epoch_order(state.epoch, state.seed, rank_, world_size_);
    drawn_ = true;
  }
  epoch_ = state.epoch, seed_ = state.seed, position_ = state.position;
}

int64_t Sampler::batches_per_epoch() const {
  const int64_t n = shard_size(rank_, world_size_);
  return drop_last_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
}

std::vector<int64_t> Sampler::next() {
  const auto size = static_cast<int64_t>(order_.size());
  const int64_t batches = drop_last_ ? size / batch_size_ : (size + batch_size_ - 1) / batch_size_;
  if (!drawn_ || position_ >= batches) return {};
  const int64_t begin = position_ * batch_size_, end = std::min(size, begin + batch_size_);
  ++position_;
  return {order_.begin() + static_cast<std::ptrdiff_t>(begin), order_.begin() + static_cast<std::ptrdiff_t>(end)};
}

}  // namespace trainyard::host
