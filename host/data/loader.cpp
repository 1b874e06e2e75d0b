#include "data/loader.h"

#include <algorithm>
#include <memory>
#include <numeric>

namespace trainyard::host {
namespace {

// splitmix64: a small, well-mixed generator whose output is fixed by its
// definition (std::shuffle's algorithm is not, across standard libraries).
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t below(uint64_t n) { return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64); }
};

std::vector<int64_t> permutation(int64_t n, uint64_t seed, int64_t epoch, int64_t pass) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  SplitMix64 rng{seed * 0x100000001b3ull ^ (static_cast<uint64_t>(epoch) << 20) ^ static_cast<uint64_t>(pass)};
  rng.next();
  for (int64_t i = n - 1; i > 0; --i) std::swap(p[i], p[rng.below(static_cast<uint64_t>(i + 1))]);
  return p;
}

}  // namespace

std::vector<int64_t> EpochPlan::indices(int64_t epoch) const {
  const int64_t wanted = samples_per_epoch > 0 ? samples_per_epoch : dataset_size;
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(wanted));
  // Epochs longer than the dataset take successive passes, each its own permutation.
  for (int64_t pass = 0; static_cast<int64_t>(out.size()) < wanted && dataset_size > 0; ++pass) {
    std::vector<int64_t> p(static_cast<size_t>(dataset_size));
    if (shuffle) {
      p = permutation(dataset_size, seed, epoch, pass);
    } else {
      std::iota(p.begin(), p.end(), 0);
    }
    int64_t take = std::min<int64_t>(dataset_size, wanted - static_cast<int64_t>(out.size()));
    out.insert(out.end(), p.begin(), p.begin() + take);
  }
  return out;
}

int64_t EpochPlan::batches_per_epoch() const {
  const int64_t n = samples_per_epoch > 0 ? samples_per_epoch : dataset_size;
  return drop_last ? n / batch_size : (n + batch_size - 1) / batch_size;
}

BatchStream batch_stream(const Dataset& dataset, std::vector<int64_t> indices, int64_t batch_size,
                         int64_t first_batch, bool drop_last, c10::Device device) {
  auto order = std::make_shared<std::vector<int64_t>>(std::move(indices));
  auto next = std::make_shared<size_t>(static_cast<size_t>(first_batch * batch_size));
  return [&dataset, order, next, batch_size, drop_last, device]() -> std::optional<Batch> {
    const size_t start = *next, total = order->size();
    if (start >= total) return std::nullopt;
    const size_t end = std::min(total, start + static_cast<size_t>(batch_size));
    if (drop_last && end - start < static_cast<size_t>(batch_size)) return std::nullopt;
    *next = end;
    std::vector<int64_t> ids(order->begin() + static_cast<std::ptrdiff_t>(start),
                             order->begin() + static_cast<std::ptrdiff_t>(end));
    Batch batch = dataset.get_batch(ids);
    if (device.type() != c10::DeviceType::CPU) {
      batch.input = batch.input.to(device, /*non_blocking=*/true);
      batch.target = batch.target.to(device, /*non_blocking=*/true);
    }
    return batch;
  };
}

}  // namespace trainyard::host
