// The retrieval meter (plugins/retrieval) against pytorch-metric-learning
// 2.9.0's AccuracyCalculator on the same embeddings and labels, its values
// in a real run (with the triplet loss's mining values, SDK 1.4 LossValues),
// and across two real processes, whose rows the host gathers (SDK 1.4
// SampleMeter).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "formats/metrics.h"
#include "plugins/library_loader.h"
#include "support/support.h"
#include "trainyard/error.h"
#include "trainyard/meter.h"

namespace trainyard::host {
namespace {

std::shared_ptr<Meter> build(std::map<std::string, Value> set) {
  const Component& c = test::builtin_registry().get(Kind::meter, "retrieval");
  std::map<std::string, Value> values;
  for (const auto& spec : c.schema.specs())
    if (spec.default_value) values[spec.key] = *spec.default_value;
  for (auto& [k, v] : set) values[k] = v;
  return std::get<Factory<Meter>>(c.factory)(Options(values), Context{});
}

// The library's metrics with every sample as a query against all the others
// (reference = query: ref_includes_query), k = the largest class; recall@k
// from the library's own neighbour lists.
const char* kReference = R"(import sys, numpy as np, torch
from pytorch_metric_learning.distances import CosineSimilarity, LpDistance
from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator
from pytorch_metric_learning.utils.inference import CustomKNN
x = torch.tensor(np.loadtxt(sys.argv[1]), dtype=torch.float64)
y = torch.tensor(np.loadtxt(sys.argv[2]), dtype=torch.int64)
with open(sys.argv[3], 'w') as out:
    for name in ['euclidean', 'cosine']:
        distance = CosineSimilarity() if name == 'cosine' else LpDistance(normalize_embeddings=True)
        knn = CustomKNN(distance)
        calc = AccuracyCalculator(include=('precision_at_1', 'r_precision', 'mean_average_precision_at_r'),
                                  k='max_bin_count', knn_func=knn)
        m = calc.get_accuracy(x, y)
        _, idx = knn(x, 10, x, ref_includes_query=True)
        counts = torch.bincount(y)
        answerable = counts[y] > 1
        hit = (y[idx] == y[:, None])[answerable]
        for k in [1, 2, 10]:
            m['recall_at_%d' % k] = hit[:, :k].any(1).double().mean().item()
        out.write(name + ' ' + ' '.join('%s=%r' % kv for kv in sorted(m.items())) + '\n')
)";

TEST(Retrieval, EqualsPytorchMetricLearningsAccuracyCalculator) {
  const std::string dir = test::temp_dir("retrieval-pml");
  // 600 embeddings of 16 values in classes of 1 to 47 samples (a lone class
  // that no query can answer included), shuffled.
  at::manual_seed(11);
  std::vector<int64_t> labels;
  for (int64_t c = 0; static_cast<int64_t>(labels.size()) < 600; ++c)
    for (int64_t i = 0; i < 1 + (c * 7) % 47 && labels.size() < 600; ++i) labels.push_back(c);
  const at::Tensor y = at::tensor(labels, at::kLong).index_select(0, at::randperm(600, at::kLong));
  // Each class near its own centre, so that the metrics are neither 0 nor 1.
  const at::Tensor centres = at::randn({y.max().item<int64_t>() + 1, 16}, at::kDouble);
  const at::Tensor x = centres.index_select(0, y) + 0.9 * at::randn({600, 16}, at::kDouble);
  test::write_matrix(dir + "/x.txt", x);
  test::write_matrix(dir + "/y.txt", y);
  test::write_file(dir + "/reference.py", kReference);
  const auto r = test::run_command(::trainyard::test::python() + " " + dir + "/reference.py " + dir + "/x.txt " + dir +
                                   "/y.txt " + dir + "/expected.txt");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  int cases = 0;
  for (const auto& line : test::read_lines(dir + "/expected.txt")) {
    std::stringstream words(line);
    std::string distance, pair;
    words >> distance;
    // chunk_mb 1: 65536 distances, 109 queries a chunk, six chunks.
    auto meter = build({{"k", std::vector<int64_t>{1, 2, 10}}, {"distance", distance}, {"chunk_mb", int64_t{1}}});
    meter->reset();
    for (int64_t b = 0; b < 600; b += 64) {
      Batch batch;
      batch.target = y.narrow(0, b, std::min<int64_t>(64, 600 - b));
      batch.indices.resize(static_cast<size_t>(batch.target.size(0)));
      const at::Tensor out = x.narrow(0, b, batch.target.size(0)), loss = at::zeros({});
      meter->update({batch, out, loss});
    }
    const auto values = meter->values();
    const std::map<std::string, std::string> ours_for{{"precision_at_1", "precision_at_1"},
                                                      {"r_precision", "r_precision"},
                                                      {"mean_average_precision_at_r", "map_at_r"},
                                                      {"recall_at_1", "recall_at_1"},
                                                      {"recall_at_2", "recall_at_2"},
                                                      {"recall_at_10", "recall_at_10"}};
    int metrics = 0;
    while (words >> pair) {
      const std::string name = pair.substr(0, pair.find('='));
      const double want = std::stod(pair.substr(pair.find('=') + 1));
      ASSERT_TRUE(ours_for.count(name)) << name;
      ASSERT_TRUE(values.count(ours_for.at(name))) << ours_for.at(name);
      EXPECT_NEAR(values.at(ours_for.at(name)), want, 1e-9) << distance << " " << name;
      EXPECT_GT(want, 0.05) << name << ": a case that tests little";
      EXPECT_LT(want, 0.999) << name << ": a case that tests little";
      ++metrics;
    }
    EXPECT_EQ(metrics, 6) << line;
    ++cases;
  }
  EXPECT_EQ(cases, 2);
}

TEST(Retrieval, ClassScoresOrFloatTargetsAreAClearError) {
  auto meter = build({});
  Batch batch;
  batch.target = at::randn({4});
  const at::Tensor loss = at::zeros({});
  try {
    meter->update({batch, at::randn({4, 3}), loss});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_TRUE(test::contains(e.what(), "retrieval: the batch's targets are not class labels")) << e.what();
  }
  batch.target = at::zeros({4}, at::kLong);
  try {
    meter->update({batch, at::randn({4, 3, 2}), loss});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_TRUE(test::contains(e.what(), "retrieval: the network's output is 3-d; expected embeddings [batch, size]"))
        << e.what();
  }
}

// The triplet run of metric_losses_test with the retrieval meter on its test split.
std::string retrieval_experiment(const std::string& name) {
  std::string yaml = test::synthetic_experiment(name);
  yaml.replace(yaml.find("{plugin: cross_entropy}"), 23, "{plugin: triplet_margin, margin: 0.2, mining: semihard}");
  yaml.replace(yaml.find("dropout: 0.1}"), 13, "dropout: 0.1, embedding_size: 16, normalize: true}");
  yaml.replace(yaml.find("{plugin: topk_accuracy, k: [1, 2]}"), 34, "{plugin: retrieval, k: [1, 4], phases: [test]}");
  yaml.replace(yaml.find("epochs: 2,"), 10, "epochs: 3,");
  const std::string path = test::temp_dir("exp-" + name) + "/" + name + ".yaml";
  test::write_file(path, yaml);
  return path;
}

std::map<std::string, double> last_values(const std::string& metrics, const std::string& phase) {
  std::map<std::string, double> last;
  for (const auto& e : read_events(metrics))
    if (e.phase == phase)
      for (const auto& [k, v] : e.values) last[k] = v;
  return last;
}

TEST(Retrieval, ARunReportsRetrievalAndTheLossesMiningAndImproves) {
  const std::string exp = retrieval_experiment("retrieval"), out = test::temp_dir("out-retrieval");
  const auto r = test::trainyard("run " + exp + " --output-dir " + out +
                                 " --set loop.classes_per_batch=4 --set loop.samples_per_class=8");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<double> recall;
  for (const auto& e : read_events(out + "/retrieval/metrics.jsonl"))
    if (e.phase == "test" && e.values.count("test_recall_at_1")) recall.push_back(e.values.at("test_recall_at_1"));
  ASSERT_EQ(recall.size(), 3u);
  const auto test = last_values(out + "/retrieval/metrics.jsonl", "test");
  for (const char* name :
       {"test_recall_at_1", "test_recall_at_4", "test_precision_at_1", "test_r_precision", "test_map_at_r"})
    EXPECT_TRUE(test.count(name)) << name;
  EXPECT_EQ(test.at("test_recall_at_1"), test.at("test_precision_at_1"));
  EXPECT_GE(test.at("test_recall_at_4"), test.at("test_recall_at_1"));
  EXPECT_GT(recall.back(), 0.5) << "4 separable synthetic classes";
  // The loss's mining, as values of both phases (semihard: a share of the 32 x 7 x 24 triplets of a batch).
  const auto train = last_values(out + "/retrieval/metrics.jsonl", "train");
  for (const char* name : {"train_mined_triplets", "train_active_triplets", "train_active_fraction"})
    ASSERT_TRUE(train.count(name)) << name;
  EXPECT_GT(train.at("train_mined_triplets"), 0);
  EXPECT_LE(train.at("train_mined_triplets"), 32 * 7 * 24);
  EXPECT_LE(train.at("train_active_triplets"), train.at("train_mined_triplets"));
  EXPECT_TRUE(test.count("test_active_fraction"));
  // The end-of-run table shows them with the other values, and describe lists the meter's options.
  EXPECT_TRUE(test::contains(r.out, "\n  recall_at_1 ")) << r.out;
  EXPECT_TRUE(test::contains(r.out, "\n  mined_triplets ")) << r.out;
  const auto d = test::trainyard("describe retrieval");
  EXPECT_EQ(d.exit_code, 0) << d.err;
  EXPECT_TRUE(test::contains(d.out, "chunk_mb")) << d.out;
}

TEST(Retrieval, TwoRanksGatherEveryEmbeddingAsOneProcessEvaluatesTheSavedModel) {
  const std::string exp = retrieval_experiment("retrieval2"), out = test::temp_dir("out-retrieval2");
  // The same global P x K batch of 32 as two ranks of 16; each rank tests 64 of the 128 samples.
  // Noisier classes, so that the values are far from 1 and a rank's half would not give them.
  const std::string settings =
      " --set loop.classes_per_batch=4 --set loop.samples_per_class=4"
      " --set loop.batch_per_device=16 --set dataset.train.noise=2 --set dataset.test.noise=2";
  const auto r = test::trainyard("run " + exp + " --output-dir " + out + settings + " --nproc-per-node 2");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto two_ranks = last_values(out + "/retrieval2/metrics.jsonl", "test");
  // One process evaluates the saved (final) weights on all 128 samples.
  const auto e = test::trainyard("eval " + exp + " --output-dir " + out + " --output " + out + "/eval.json" + settings);
  ASSERT_EQ(e.exit_code, 0) << e.out << e.err;
  const auto one = nlohmann::json::parse(test::read_file(out + "/eval.json"));
  int compared = 0;
  for (const char* name : {"test_recall_at_1", "test_recall_at_4", "test_r_precision", "test_map_at_r"}) {
    ASSERT_TRUE(two_ranks.count(name)) << name;
    const auto& values = one.contains("values") ? one["values"] : one;
    ASSERT_TRUE(values.contains(name)) << one.dump();
    EXPECT_NEAR(two_ranks.at(name), values[name].get<double>(), 1e-6) << name;
    EXPECT_LT(two_ranks.at(name), 0.95) << name << ": a case that tests little";
    ++compared;
  }
  EXPECT_EQ(compared, 4);
}

TEST(Retrieval, ATrainingPhaseIsRefusedAsOneLine) {
  std::string yaml = test::read_file(retrieval_experiment("retrieval-train"));
  yaml.replace(yaml.find("phases: [test]"), 14, "phases: [train, test]");
  const std::string exp = test::temp_dir("exp-retrieval-train2") + "/r.yaml";
  test::write_file(exp, yaml);
  const auto r = test::trainyard("validate " + exp);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  ASSERT_EQ(test::nonempty_lines(r.err).size(), 1u) << r.err;
  EXPECT_TRUE(test::contains(r.err,
                             "keeps one row per sample, which a checkpoint in mid-epoch cannot hold; expected "
                             "phases: [test], got train"))
      << r.err;
}

}  // namespace
}  // namespace trainyard::host
