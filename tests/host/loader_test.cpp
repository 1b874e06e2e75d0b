// The host's loader: the same batches whatever the number of decode threads,
// shards that partition the epoch, seeking, and the bad-record policy.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/Config.h>
#include <ATen/Parallel.h>
#include <map>
#include <mutex>
#include <numeric>
#include <set>
#include <sstream>
#include <thread>

#include "data/loader.h"
#include "data/normalize.h"
#include "data/samplers.h"
#include "trainyard/error.h"

namespace trainyard::host {
namespace {

// Sample i is [i, seed % 100000]; samples in `bad` are damaged records.
class Numbers : public Dataset {
 public:
  explicit Numbers(int64_t n, std::set<int64_t> bad = {}) : n_(n), bad_(std::move(bad)) {}
  int64_t size() const override { return n_; }
  Example get(int64_t i) const override { return get_seeded(i, 0); }
  Example get_seeded(int64_t i, uint64_t seed) const override {
    if (bad_.count(i)) throw BadRecord("record " + std::to_string(i) + ": cannot decode png image 0");
    return {at::tensor({double(i), double(seed % 100000)}, at::kDouble), at::scalar_tensor(i % 3, at::kLong)};
  }
  DatasetInfo info() const override { return {n_, 3, {2}, {}}; }

 private:
  int64_t n_;
  std::set<int64_t> bad_;
};

std::vector<at::Tensor> read_all(BatchStream stream) {
  std::vector<at::Tensor> out;
  while (auto b = stream()) out.push_back(at::cat({b->input.flatten(), b->target.to(at::kDouble)}));
  return out;
}

// The training order of `epoch` (seed 11, batches of 8) for `rank` of `world`.
ShuffledSampler sampler(int64_t n, int64_t epoch, int rank = 0, int world = 1) {
  ShuffledSampler s({.dataset_size = n, .batch_size = 8});
  s.shard(rank, world);
  s.reset(epoch, 11);
  return s;
}
std::vector<int64_t> order(int64_t n, int64_t epoch, int rank = 0, int world = 1) {
  return sampler(n, epoch, rank, world).order();
}

LoaderOptions options(int threads) {
  LoaderOptions o;
  o.batch_size = 8;
  o.threads = threads;
  o.prefetch = 3;
  o.seed = 11;
  return o;
}

TEST(Loader, BatchesAreIdenticalForAnyNumberOfDecodeThreads) {
  Numbers data(203);
  auto reference = read_all(batch_stream(data, order(203, 2), 2, 0, options(0)));
  ASSERT_EQ(reference.size(), 26u);  // 25 full batches and one of 3
  for (int threads : {1, 2, 4}) {
    auto batches = read_all(batch_stream(data, order(203, 2), 2, 0, options(threads)));
    ASSERT_EQ(batches.size(), reference.size()) << threads;
    for (size_t i = 0; i < batches.size(); ++i) EXPECT_TRUE(batches[i].equal(reference[i])) << threads << " " << i;
  }
}

// Numbers that notes at::get_num_threads() on the thread making each batch.
class ThreadCountingNumbers : public Numbers {
 public:
  using Numbers::Numbers;
  Batch get_batch(const std::vector<int64_t>& indices, const std::vector<uint64_t>& seeds) const override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      seen_.push_back(at::get_num_threads());
    }
    return Numbers::get_batch(indices, seeds);
  }
  std::vector<int> seen() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return seen_;
  }

 private:
  mutable std::mutex mutex_;
  mutable std::vector<int> seen_;
};

// ATen's OpenMP backend: each decode thread would otherwise start its own
// team of at::get_num_threads() OpenMP threads for every parallel operator.
TEST(Loader, DecodeThreadsRunAtenSingleThreadedAndLeaveTheTrainingThreadsCount) {
#if !AT_PARALLEL_OPENMP
  GTEST_SKIP() << "ATen's parallel backend is not OpenMP: one pool for all threads";
#endif
  const int before = at::get_num_threads();
  at::set_num_threads(2);
  ThreadCountingNumbers threaded(64), on_caller(64);
  const auto batches = read_all(batch_stream(threaded, order(64, 0), 0, 0, options(2)));
  const auto reference = read_all(batch_stream(on_caller, order(64, 0), 0, 0, options(0)));
  ASSERT_EQ(threaded.seen().size(), 8u);
  for (int n : threaded.seen()) EXPECT_EQ(n, 1);   // decode threads
  for (int n : on_caller.seen()) EXPECT_EQ(n, 2);  // no decode threads: the caller's own count
  EXPECT_EQ(at::get_num_threads(), 2);             // the training thread's
  int fresh = 0;
  std::thread([&] { fresh = at::get_num_threads(); }).join();
  EXPECT_EQ(fresh, 2);  // ATen's global count, which new threads take, is unchanged
  ASSERT_EQ(batches.size(), reference.size());
  for (size_t i = 0; i < batches.size(); ++i) EXPECT_TRUE(batches[i].equal(reference[i])) << i;
  at::set_num_threads(before);
}

TEST(Loader, AugmentationSeedsDependOnSeedEpochAndIndexOnly) {
  Numbers data(16);
  auto epoch1 = read_all(batch_stream(data, {3}, 1, 0, options(0)));
  auto again = read_all(batch_stream(data, {5, 3}, 1, 0, options(2)));
  EXPECT_EQ(epoch1[0][1].item<double>(), again[0][3].item<double>());  // sample 3, whatever its batch and thread
  auto epoch2 = read_all(batch_stream(data, {3}, 2, 0, options(0)));
  EXPECT_NE(epoch1[0][1].item<double>(), epoch2[0][1].item<double>());
}

TEST(Loader, EpochOrderIsAPermutationThatChangesEachEpoch) {
  auto a = order(100, 0), b = order(100, 1);
  EXPECT_NE(a, b);
  std::sort(a.begin(), a.end());
  for (int64_t i = 0; i < 100; ++i) EXPECT_EQ(a[size_t(i)], i);
  EXPECT_EQ(order(100, 1), b);  // the same for the same (seed, epoch)
}

TEST(Loader, ShardsAreDisjointAndCompleteForWorldSizesOneTwoThree) {
  for (int world : {1, 2, 3}) {
    std::multiset<int64_t> seen;
    int64_t batches = 0;
    for (int rank = 0; rank < world; ++rank) {
      auto shard = order(100, 4, rank, world);
      seen.insert(shard.begin(), shard.end());
      batches += sampler(100, 4, rank, world).batches_per_epoch();
      EXPECT_EQ(int64_t(shard.size()), (100 - rank + world - 1) / world);
    }
    EXPECT_EQ(seen.size(), 100u) << world;
    for (int64_t i = 0; i < 100; ++i) EXPECT_EQ(seen.count(i), 1u) << world << " " << i;
    EXPECT_GE(batches, 13);
  }
}

// P x K batches over unbalanced classes (20, 23, ..., 35 samples), P = 3, K = 4.
std::vector<int64_t> pk_labels(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> labels;
  for (size_t c = 0; c < sizes.size(); ++c)
    for (int64_t i = 0; i < sizes[c]; ++i) labels.push_back(static_cast<int64_t>(c));
  // Interleaved, as a real dataset's classes are spread over its indices.
  std::vector<int64_t> spread(labels.size());
  for (size_t i = 0; i < labels.size(); ++i) spread[(i * 37) % labels.size()] = labels[i];
  return spread;
}
PkSampler pk_sampler(int rank, int world, bool with_replacement = false,
                     std::vector<int64_t> sizes = {20, 23, 26, 29, 32, 35}) {
  PkSampler p({.labels = pk_labels(sizes),
               .classes_per_batch = 3,
               .samples_per_class = 4,
               .with_replacement = with_replacement});
  p.shard(rank, world);
  return p;
}
std::vector<int64_t> pk_order(int rank, int world, int64_t epoch) {
  PkSampler p = pk_sampler(rank, world);
  p.reset(epoch, 11);
  return p.order();
}

TEST(Loader, PkBatchesHoldPClassesOfKSamplesAndShardByBatchWithoutOverlap) {
  PkSampler one = pk_sampler(0, 1);
  const std::vector<int64_t> labels = pk_labels({20, 23, 26, 29, 32, 35});
  EXPECT_EQ(one.total_batches(), 13);  // 5+5+6+7+8+8 groups of 4, three classes a batch
  EXPECT_EQ(one.batch_size(), 12);
  for (int64_t epoch : {0, 1, 2}) {
    const auto order = pk_order(0, 1, epoch);
    ASSERT_EQ(static_cast<int64_t>(order.size()), one.batches_per_epoch() * 12) << "epoch " << epoch;
    EXPECT_EQ(std::set<int64_t>(order.begin(), order.end()).size(), order.size()) << "a sample twice in an epoch";
    for (size_t b = 0; b < order.size(); b += 12) {
      std::map<int64_t, int> per_class;
      for (size_t i = b; i < b + 12; ++i) ++per_class[labels[static_cast<size_t>(order[i])]];
      ASSERT_EQ(per_class.size(), 3u) << "batch " << b / 12;
      for (const auto& [label, n] : per_class) EXPECT_EQ(n, 4) << "class " << label;
    }
  }
  EXPECT_EQ(pk_order(0, 1, 1), pk_order(0, 1, 1));
  EXPECT_NE(pk_order(0, 1, 0), pk_order(0, 1, 1));
  // Two ranks: every other batch of the same epoch order; equal counts, no overlap.
  const auto whole = pk_order(0, 1, 4), r0 = pk_order(0, 2, 4), r1 = pk_order(1, 2, 4);
  ASSERT_EQ(r0.size(), 6u * 12);
  ASSERT_EQ(r1.size(), r0.size());
  EXPECT_EQ(pk_sampler(1, 2).batches_per_epoch(), 6);
  for (size_t b = 0; b < 6; ++b)
    for (size_t i = 0; i < 12; ++i) {
      EXPECT_EQ(r0[b * 12 + i], whole[(2 * b) * 12 + i]);
      EXPECT_EQ(r1[b * 12 + i], whole[(2 * b + 1) * 12 + i]);
    }
  // A class under K samples: drawn with replacement when allowed.
  PkSampler small = pk_sampler(0, 1, true, {2, 8, 8});
  EXPECT_EQ(small.total_batches(), 1);  // groups 1, 2, 2: one batch of three classes
  small.reset(0, 11);
  const auto drawn = small.order();
  ASSERT_EQ(drawn.size(), 12u);
  const std::vector<int64_t> small_labels = pk_labels({2, 8, 8});
  std::map<int64_t, int> per_class;
  for (int64_t i : drawn) ++per_class[small_labels[static_cast<size_t>(i)]];
  EXPECT_EQ(per_class, (std::map<int64_t, int>{{0, 4}, {1, 4}, {2, 4}}));
}

TEST(Loader, SeekReturnsTheSameBatchesAsReadingFromTheStart) {
  Numbers data(100);
  auto all = read_all(batch_stream(data, order(100, 3), 3, 0, options(2)));
  auto tail = read_all(batch_stream(data, order(100, 3), 3, 5, options(2)));
  ASSERT_EQ(tail.size(), all.size() - 5);
  for (size_t i = 0; i < tail.size(); ++i) EXPECT_TRUE(tail[i].equal(all[i + 5]));
}

TEST(Loader, DropLastDropsTheIncompleteBatch) {
  Numbers data(20);
  LoaderOptions o = options(1);
  o.drop_last = true;
  EXPECT_EQ(read_all(batch_stream(data, order(20, 0), 0, 0, o)).size(), 2u);
}

TEST(Loader, BadRecordIsANamedErrorByDefault) {
  Numbers data(40, {17});
  for (int threads : {0, 2}) {
    try {
      read_all(batch_stream(data, order(40, 0), 0, 0, options(threads)));
      FAIL() << "no error";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("sample 17: record 17: cannot decode png image 0"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("on_bad_record: skip"), std::string::npos) << e.what();
    }
  }
}

TEST(Loader, SkippedBadRecordsAreCountedAndLeftOut) {
  std::set<int64_t> bad = {3, 4, 5, 6, 7, 8, 9, 10, 30};
  Numbers data(40, bad);
  LoaderOptions o = options(2);
  o.skip_bad_records = true;
  auto stats = std::make_shared<LoaderStats>();
  int64_t samples = 0;
  BatchStream stream = batch_stream(data, order(40, 0), 0, 0, o, stats);
  while (auto b = stream()) {
    samples += b->size();
    for (int64_t i : b->indices) EXPECT_EQ(bad.count(i), 0u);
  }
  EXPECT_EQ(samples, 40 - 9);
  EXPECT_EQ(stats->bad_records.load(), 9);
}

TEST(Loader, MoreBadRecordsThanMaxBadFractionAllowsStopTheEpochWithANamedError) {
  const std::set<int64_t> bad = {3, 4, 5, 6, 7, 8, 9, 10, 30};  // 9 of 40
  Numbers data(40, bad);
  LoaderOptions o = options(2);
  o.skip_bad_records = true;
  o.max_bad_fraction = 0.1;  // 4 of the epoch's 40
  try {
    read_all(batch_stream(data, order(40, 0), 0, 0, o, std::make_shared<LoaderStats>()));
    FAIL() << "9 bad records of 40 passed a cap of 10%";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("bad records in epoch 0"), std::string::npos) << what;
    EXPECT_NE(what.find("max_bad_fraction 0.1 of the epoch's 40 samples (4)"), std::string::npos) << what;
  }
  o.max_bad_fraction = 0.25;  // 10: the 9 are skipped
  auto stats = std::make_shared<LoaderStats>();
  int64_t samples = 0;
  BatchStream stream = batch_stream(data, order(40, 0), 0, 0, o, stats);
  while (auto batch = stream()) samples += batch->size();
  EXPECT_EQ(samples, 40 - 9);
  EXPECT_EQ(stats->bad_records.load(), 9);
  EXPECT_NE(stats->first_bad().find("cannot decode png image 0"), std::string::npos) << stats->first_bad();
}

// Sample i: 8-bit pixels {3, 4, 5}, value (i * 37 + c * 11 + k) % 256.
class Pixels : public Dataset {
 public:
  int64_t size() const override { return 21; }
  Example get(int64_t i) const override {
    at::Tensor p = (at::arange(60, at::kLong) + i * 37).view({3, 4, 5});
    p += at::arange(3, at::kLong).view({3, 1, 1}) * 11;
    return {p.remainder(256).to(at::kByte), at::scalar_tensor(i % 2, at::kLong)};
  }
  DatasetInfo info() const override { return {21, 2, {3, 4, 5}, {}}; }
};

TEST(Loader, EightBitInputsBecomeNormalizedFloatsAsTheConsumerTakesThem) {
  Pixels data;
  const InputNormalization imagenet{{0.485, 0.456, 0.406}, {0.229, 0.224, 0.225}};
  const at::Tensor mean = at::tensor(imagenet.mean, at::kDouble).view({3, 1, 1});
  const at::Tensor std = at::tensor(imagenet.std, at::kDouble).view({3, 1, 1});
  for (bool channels_last : {false, true}) {
    LoaderOptions o = options(2);
    o.normalization = imagenet;
    o.channels_last = channels_last;
    int64_t rows = 0;
    BatchStream stream = batch_stream(data, order(21, 0), 0, 0, o);
    while (auto b = stream()) {
      ASSERT_EQ(b->input.scalar_type(), at::kFloat);
      EXPECT_EQ(b->input.is_contiguous(at::MemoryFormat::ChannelsLast), channels_last);
      for (int64_t k = 0; k < b->size(); ++k) {
        const at::Tensor expected = (data.get(b->indices[size_t(k)]).input.to(at::kDouble) / 255 - mean) / std;
        EXPECT_LT((b->input[k].to(at::kDouble) - expected).abs().max().item<double>(), 1e-5);
      }
      rows += b->size();
    }
    EXPECT_EQ(rows, 21);
  }
  // Without mean and std: values / 255. Not contiguous: ATen's kernels, same values.
  const at::Tensor batch = at::stack({data.get(0).input, data.get(1).input});
  const at::Tensor plain = normalize_pixels(batch, {});
  EXPECT_LT((plain - batch.to(at::kFloat) / 255).abs().max().item<double>(), 1e-6);
  const at::Tensor strided = batch.transpose(2, 3);
  EXPECT_TRUE(normalize_pixels(strided, {}).allclose(strided.to(at::kFloat) / 255));
}

TEST(Loader, NormalizationStatisticsForAnotherChannelCountAreANamedError) {
  Pixels data;
  LoaderOptions o = options(0);
  o.normalization = InputNormalization{{0.5}, {0.25}};  // one channel's, for three
  try {
    read_all(batch_stream(data, order(21, 0), 0, 0, o));
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("1 means and 1 stds for inputs of 3 channels"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace trainyard::host

namespace trainyard::host {
namespace {

// Sample i carries i % 3 boxes drawn from its seed, their labels and its
// original size (SDK 1.5 fields); `broken` samples have a box with x2 < x1.
class Boxes : public Dataset, public FieldDataset {
 public:
  explicit Boxes(int64_t n, std::set<int64_t> broken = {}) : n_(n), broken_(std::move(broken)) {}
  int64_t size() const override { return n_; }
  Example get(int64_t i) const override { return get_seeded(i, 0); }
  Example get_seeded(int64_t i, uint64_t seed) const override { return get_with_fields(i, seed).example; }
  DatasetInfo info() const override { return {n_, 4, {3, 8, 8}, {}}; }
  FieldExample get_with_fields(int64_t i, uint64_t seed) const override {
    const int64_t n = i % 3;
    FieldExample e{{at::full({3, 8, 8}, float(i)), at::scalar_tensor(n, at::kLong)}, {}};
    const double x = static_cast<double>(seed % 4);
    std::vector<float> xyxy;
    for (int64_t k = 0; k < n; ++k) xyxy.insert(xyxy.end(), {float(x), float(k), float(x + 2), float(k + 3)});
    if (broken_.count(i) && n > 0) std::swap(xyxy[0], xyxy[2]);
    e.fields[field_name::boxes] = ragged(at::tensor(xyxy, at::kFloat).view({n, 4}));
    e.fields[field_name::box_labels] = ragged(at::full({n}, (i + 1) % 4, at::kLong));
    e.fields[field_name::original_size] = meta(at::tensor(std::vector<int64_t>{16 + i, 20}, at::kLong));
    return e;
  }

 private:
  int64_t n_;
  std::set<int64_t> broken_;
};

// A batch and its fields as one row of numbers per sample, for comparing passes.
std::vector<std::string> read_with_fields(const Dataset& data, const std::vector<int64_t>& indices, int64_t first,
                                          LoaderOptions o) {
  o.fields = dynamic_cast<const FieldDataset*>(&data);
  BatchStream stream = batch_stream(data, indices, 3, first, o);
  std::vector<std::string> rows;
  while (auto b = stream()) {
    const Fields& f = o.fields_beside->of(*b);
    const Field& boxes = f.at(field_name::boxes);
    EXPECT_EQ(boxes.counts.sum().item<int64_t>(), boxes.values.size(0));
    for (int64_t k = 0; k < b->size(); ++k) {
      std::ostringstream row;
      row << b->indices[static_cast<size_t>(k)] << ":" << sample_values(boxes, k).sum().item<double>() << ","
          << sample_values(f.at(field_name::box_labels), k).sum().item<int64_t>() << ","
          << sample_values(f.at(field_name::original_size), k)[0].item<int64_t>();
      rows.push_back(row.str());
    }
  }
  return rows;
}

TEST(LoaderFields, FieldsTravelWithTheirSamplesForAnyThreadsAndFromAnyPosition) {
  const Boxes data(40);
  std::vector<int64_t> indices(40);
  std::iota(indices.begin(), indices.end(), 0);
  std::reverse(indices.begin(), indices.end());
  const auto whole = read_with_fields(data, indices, 0, options(0));
  ASSERT_EQ(whole.size(), 40u);
  EXPECT_EQ(whole[0].substr(0, 3), "39:");
  EXPECT_EQ(read_with_fields(data, indices, 0, options(3)), whole);
  // Resumed at batch 2 (of 8): the same samples with the same fields as the uninterrupted pass.
  const auto resumed = read_with_fields(data, indices, 2, options(2));
  EXPECT_EQ(resumed, std::vector<std::string>(whole.begin() + 16, whole.end()));
  // A batch the loader did not hand out (an override's own) has no fields.
  LoaderOptions o = options(0);
  o.fields = &data;
  BatchStream stream = batch_stream(data, indices, 0, 0, o);
  const Batch handed = *stream();
  EXPECT_EQ(o.fields_beside->of(handed).size(), 3u);
  const Batch own{handed.input.clone(), handed.target, handed.indices};
  EXPECT_TRUE(o.fields_beside->of(own).empty());
}

TEST(LoaderFields, ABoxWithX2BelowX1IsABadRecordUnderThePolicy) {
  const Boxes data(16, {4});
  std::vector<int64_t> indices(16);
  std::iota(indices.begin(), indices.end(), 0);
  LoaderOptions o = options(0);
  o.fields = &data;
  try {
    BatchStream stream = batch_stream(data, indices, 0, 0, o);
    while (stream()) {}
    FAIL() << "a box with x2 < x1 passed";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("sample 4: box 0 is ("), std::string::npos) << what;
    EXPECT_NE(what.find("; expected finite (x1, y1, x2, y2) with x1 < x2 and y1 < y2 inside the input's 8x8"),
              std::string::npos)
        << what;
  }
  o.skip_bad_records = true;
  auto stats = std::make_shared<LoaderStats>();
  BatchStream stream = batch_stream(data, indices, 0, 0, o, stats);
  int64_t samples = 0;
  while (auto b = stream()) {
    samples += b->size();
    EXPECT_EQ(o.fields_beside->of(*b).at(field_name::boxes).counts.size(0), b->size());
  }
  EXPECT_EQ(samples, 15);
  EXPECT_EQ(stats->bad_records.load(), 1);
}

}  // namespace
}  // namespace trainyard::host
