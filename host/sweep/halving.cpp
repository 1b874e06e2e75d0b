#include "sweep/halving.h"

#include <algorithm>
#include <random>

namespace trainyard::host {

Halving::Halving(int64_t min_epochs, int64_t max_epochs, int64_t reduction, bool maximize, size_t trials,
                 std::vector<size_t> start_order)
    : reduction_(reduction), maximize_(maximize), trials_(trials), order_(std::move(start_order)) {
  if (order_.empty())
    for (size_t t = 0; t < trials; ++t) order_.push_back(t);
  for (int64_t r = min_epochs; r < max_epochs; r *= reduction) rungs_.push_back(r);
  rungs_.push_back(max_epochs);
}

std::optional<Halving::Job> Halving::next() {
  // Promotions first, from the highest rung down (ASHA's get_job).
  for (size_t k = rungs_.size() - 1; k-- > 0;) {
    // Every trial that completed rung k, by its value there, best first.
    std::vector<size_t> done;
    for (size_t t = 0; t < trials_.size(); ++t)
      if (!trials_[t].failed && trials_[t].completed >= static_cast<int64_t>(k)) done.push_back(t);
    auto better = [&](size_t a, size_t b) {
      const double va = trials_[a].at[k], vb = trials_[b].at[k];
      return va != vb ? (maximize_ ? va > vb : va < vb) : a < b;  // ties: the earlier trial
    };
    std::sort(done.begin(), done.end(), better);
    const size_t top = done.size() / static_cast<size_t>(reduction_);
    for (size_t i = 0; i < top; ++i) {
      Trial& t = trials_[done[i]];
      if (t.target == static_cast<int64_t>(k)) {  // completed rung k, not yet promoted
        t.target = static_cast<int64_t>(k) + 1;
        return Job{done[i], k + 1};
      }
    }
  }
  while (next_new_ < order_.size() && trials_[order_[next_new_]].started) ++next_new_;
  if (next_new_ < order_.size()) {
    const size_t id = order_[next_new_++];
    trials_[id].started = true;
    trials_[id].target = 0;
    return Job{id, 0};
  }
  return std::nullopt;
}

void Halving::completed(size_t trial, size_t rung, double value) {
  Trial& t = trials_[trial];
  t.started = true;
  t.completed = static_cast<int64_t>(rung);
  t.target = std::max<int64_t>(t.target, static_cast<int64_t>(rung));
  t.value = value;
  t.at.resize(rung + 1, value);
  t.at[rung] = value;
}

void Halving::failed(size_t trial) {
  trials_[trial].started = true;
  trials_[trial].failed = true;
}

void Halving::restore_started(size_t trial, size_t rung) {
  trials_[trial].started = true;
  trials_[trial].target = static_cast<int64_t>(rung);
}

std::vector<size_t> seeded_order(size_t n, uint64_t seed) {
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::mt19937_64 draw(seed);
  // Fisher-Yates on raw 64-bit draws: the same order on every platform.
  for (size_t i = n; i > 1; --i) std::swap(order[i - 1], order[static_cast<size_t>(draw() % i)]);
  return order;
}

}  // namespace trainyard::host
