// The Sampler interface and its two built-in implementations: the same order
// as the epoch plans before them (pinned by hashes of their output), batches
// that cut that order, exact mid-epoch state, and shards that partition it.
#include <gtest/gtest.h>

#include <set>

#include "data/samplers.h"
#include "trainyard/error.h"

namespace trainyard::host {
namespace {

// FNV-1a over the indices' bytes: pins an order without listing it.
uint64_t fingerprint(const std::vector<int64_t>& indices) {
  uint64_t h = 1469598103934665603ull;
  for (int64_t x : indices)
    for (int b = 0; b < 8; ++b) {
      h ^= (static_cast<uint64_t>(x) >> (8 * b)) & 0xff;
      h *= 1099511628211ull;
    }
  return h;
}

std::vector<std::vector<int64_t>> drain(Sampler& s) {
  std::vector<std::vector<int64_t>> batches;
  for (auto b = s.next(); !b.empty(); b = s.next()) batches.push_back(std::move(b));
  return batches;
}

std::vector<int64_t> flat(const std::vector<std::vector<int64_t>>& batches) {
  std::vector<int64_t> all;
  for (const auto& b : batches) all.insert(all.end(), b.begin(), b.end());
  return all;
}

ShuffledSampler shuffled(int64_t n, int rank = 0, int world = 1, int64_t samples_per_epoch = 0,
                         bool drop_last = false) {
  ShuffledSampler s(
      {.dataset_size = n, .samples_per_epoch = samples_per_epoch, .batch_size = 8, .drop_last = drop_last});
  s.shard(rank, world);
  return s;
}

// Classes of 20, 23, ..., 35 samples, spread over the indices as a real
// dataset's are; P = 3, K = 4.
std::vector<int64_t> labels() {
  const std::vector<int64_t> sizes = {20, 23, 26, 29, 32, 35};
  std::vector<int64_t> in_order, spread;
  for (size_t c = 0; c < sizes.size(); ++c)
    for (int64_t i = 0; i < sizes[c]; ++i) in_order.push_back(static_cast<int64_t>(c));
  spread.resize(in_order.size());
  for (size_t i = 0; i < in_order.size(); ++i) spread[(i * 37) % in_order.size()] = in_order[i];
  return spread;
}

PkSampler pk(int rank = 0, int world = 1) {
  PkSampler s({.labels = labels(), .classes_per_batch = 3, .samples_per_class = 4});
  s.shard(rank, world);
  return s;
}

std::vector<int64_t> order_of(Sampler&& s, int64_t epoch, uint64_t seed) {
  s.reset(epoch, seed);
  return s.order();
}

// The hashes below are of EpochPlan::indices() before the Sampler replaced
// it (the same settings): the order must not change under a run that resumes
// from an older checkpoint or compares with an older run.
TEST(Sampler, ShuffledGivesTheEpochPlansOrderForTwoSeedsAndTwoEpochs) {
  EXPECT_EQ(fingerprint(order_of(shuffled(103), 0, 11)), 0xdd31abed64177f84ull);
  EXPECT_EQ(fingerprint(order_of(shuffled(103), 3, 11)), 0x4ad5efc99dcd6c24ull);
  EXPECT_EQ(fingerprint(order_of(shuffled(103), 0, 12345)), 0x4a2a366221b60484ull);
  EXPECT_EQ(fingerprint(order_of(shuffled(103), 3, 12345)), 0x81338bc17bcbda64ull);
  // Two passes and a half of the dataset, each its own permutation.
  EXPECT_EQ(fingerprint(order_of(shuffled(103, 0, 1, 250), 3, 11)), 0x8598081c1f37edd9ull);
  EXPECT_NE(order_of(shuffled(103), 0, 11), order_of(shuffled(103), 3, 11));
  EXPECT_NE(order_of(shuffled(103), 0, 11), order_of(shuffled(103), 0, 12345));
  // shuffle: false is the dataset's order, every epoch.
  ShuffledSampler plain({.dataset_size = 5, .batch_size = 2, .shuffle = false});
  plain.reset(7, 11);
  EXPECT_EQ(plain.order(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
}

TEST(Sampler, PkGivesTheEpochPlansBatchesForTwoSeedsAndTwoEpochs) {
  EXPECT_EQ(pk().total_batches(), 13);
  EXPECT_EQ(pk().batch_size(), 12);
  EXPECT_EQ(fingerprint(order_of(pk(), 0, 11)), 0x755caf796c4bea24ull);
  EXPECT_EQ(fingerprint(order_of(pk(), 1, 11)), 0x152cb76be0593a94ull);
  EXPECT_EQ(fingerprint(order_of(pk(), 0, 7)), 0x763883ef1bf9e5bdull);
  EXPECT_EQ(fingerprint(order_of(pk(), 1, 7)), 0xe2b8361f43bd9028ull);
  EXPECT_NE(order_of(pk(), 0, 11), order_of(pk(), 1, 11));
}

TEST(Sampler, NextCutsTheOrderIntoBatchesOfBatchSize) {
  for (bool drop_last : {false, true}) {
    ShuffledSampler s = shuffled(103, 0, 1, 0, drop_last);
    s.reset(2, 11);
    const auto batches = drain(s);
    ASSERT_EQ(static_cast<int64_t>(batches.size()), s.batches_per_epoch()) << drop_last;
    EXPECT_EQ(batches.size(), drop_last ? 12u : 13u);  // 12 of 8, and one of 7 unless dropped
    EXPECT_EQ(batches.back().size(), drop_last ? 8u : 7u);
    const auto all = flat(batches);
    EXPECT_TRUE(std::equal(all.begin(), all.end(), s.order().begin()));
    EXPECT_TRUE(s.next().empty());  // and stays empty
    EXPECT_EQ(s.state(), (SamplerState{2, static_cast<int64_t>(batches.size()), 11}));
  }
  PkSampler p = pk();
  p.reset(0, 11);
  const auto batches = drain(p);
  ASSERT_EQ(batches.size(), 13u);
  for (const auto& b : batches) EXPECT_EQ(b.size(), 12u);
}

TEST(Sampler, StateSavedMidEpochRestoresIntoAFreshSamplerWithTheSameRemainingBatches) {
  auto check = [](auto make, const char* what) {
    auto running = make();
    running.reset(5, 99);
    for (int i = 0; i < 3; ++i) running.next();
    const SamplerState saved = running.state();
    EXPECT_EQ(saved, (SamplerState{5, 3, 99})) << what;
    const auto rest = drain(running);
    ASSERT_FALSE(rest.empty()) << what;
    auto fresh = make();  // never reset: a process that resumes from a checkpoint
    fresh.restore(saved);
    EXPECT_EQ(drain(fresh), rest) << what;
    // A sampler that went on to another epoch comes back as well.
    auto moved_on = make();
    moved_on.reset(6, 99);
    moved_on.restore(saved);
    EXPECT_EQ(drain(moved_on), rest) << what;
  };
  check([] { return shuffled(103, 1, 2); }, "shuffled, rank 1 of 2");
  check([] { return shuffled(103, 0, 1, 250); }, "shuffled, several passes");
  check([] { return pk(1, 2); }, "P x K, rank 1 of 2");
}

TEST(Sampler, ShardsOverTwoRanksPartitionTheEpochAsBefore) {
  // Sample by sample: rank r takes positions r, r + 2, ... of the one-rank order.
  const auto whole = order_of(shuffled(103), 3, 11);
  const auto r0 = order_of(shuffled(103, 0, 2), 3, 11), r1 = order_of(shuffled(103, 1, 2), 3, 11);
  ASSERT_EQ(r0.size(), 52u);
  ASSERT_EQ(r1.size(), 51u);
  for (size_t i = 0; i < whole.size(); ++i) EXPECT_EQ(whole[i], (i % 2 ? r1 : r0)[i / 2]) << i;
  EXPECT_EQ(shuffled(103, 0, 2).batches_per_epoch(), 7);
  EXPECT_EQ(shuffled(103, 1, 2).batches_per_epoch(), 7);
  EXPECT_EQ(fingerprint(r0), 0xe3796d4c6a9fb8feull);
  EXPECT_EQ(fingerprint(r1), 0xa793a9d147912199ull);
  std::multiset<int64_t> seen(r0.begin(), r0.end());
  seen.insert(r1.begin(), r1.end());
  EXPECT_EQ(seen, std::multiset<int64_t>(whole.begin(), whole.end()));
  // P x K, batch by batch: rank r takes batches r, r + 2, ...; the 13th is left out.
  PkSampler one = pk(), first = pk(0, 2), second = pk(1, 2);
  one.reset(4, 11), first.reset(4, 11), second.reset(4, 11);
  const auto all = drain(one), b0 = drain(first), b1 = drain(second);
  ASSERT_EQ(b0.size(), 6u);
  ASSERT_EQ(b1.size(), 6u);
  for (size_t b = 0; b < 6; ++b) {
    EXPECT_EQ(all[2 * b], b0[b]) << b;
    EXPECT_EQ(all[2 * b + 1], b1[b]) << b;
  }
  EXPECT_EQ(fingerprint(flat(b0)), 0x88795d3b397edb62ull);
  EXPECT_EQ(fingerprint(flat(b1)), 0x73ff54c1cf25d8eaull);
}

TEST(Sampler, ARankOutsideTheWorldIsRefused) {
  ShuffledSampler s({.dataset_size = 10});
  EXPECT_THROW(s.shard(2, 2), Error);
  EXPECT_THROW(s.shard(0, 0), Error);
}

}  // namespace
}  // namespace trainyard::host
