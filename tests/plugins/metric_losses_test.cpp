// The metric-learning losses (plugins/metric_losses) against the library
// metric-learning practitioners use: pytorch-metric-learning 2.9.0 (PyPI,
// in the project's Python environment) computes the same losses, miners and
// gradients on the same float64 embeddings and labels.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <fstream>
#include <sstream>

#include "formats/metrics.h"
#include "plugins/loader.h"
#include "support/support.h"
#include "trainyard/error.h"
#include "trainyard/loss.h"

namespace trainyard::host {
namespace {

std::shared_ptr<Loss> build(const std::string& plugin, std::map<std::string, Value> set) {
  const Component& c = test::builtin_registry().get(Kind::loss, plugin);
  std::map<std::string, Value> values;
  for (const auto& spec : c.schema.specs())
    if (spec.default_value) values[spec.key] = *spec.default_value;
  for (auto& [k, v] : set) values[k] = v;
  return std::get<Factory<Loss>>(c.factory)(Options(values), Context{});
}

// Each case: the library's loss (with its miner) and ours with the same settings.
const char* kReference = R"(import sys, numpy as np, torch
from pytorch_metric_learning import distances, losses, miners
x = torch.tensor(np.loadtxt(sys.argv[1]), dtype=torch.float64)
y = torch.tensor(np.loadtxt(sys.argv[2]), dtype=torch.int64)
def distance(name):
    return distances.CosineSimilarity() if name == 'cosine' else distances.LpDistance(normalize_embeddings=True)
cases = []
for d in ['euclidean', 'cosine']:
    for mining in ['all', 'hard', 'semihard']:
        miner = None if mining == 'all' else miners.BatchHardMiner(distance=distance(d)) if mining == 'hard' else \
            miners.TripletMarginMiner(margin=0.2, type_of_triplets='semihard', distance=distance(d))
        cases.append(('triplet_margin %s %s' % (mining, d), losses.TripletMarginLoss(margin=0.2, distance=distance(d)), miner))
    pos, neg = (0.1, 0.9) if d == 'euclidean' else (0.9, 0.3)
    cases.append(('contrastive %s' % d, losses.ContrastiveLoss(pos_margin=pos, neg_margin=neg, distance=distance(d)), None))
with open(sys.argv[3], 'w') as out:
    for name, loss, miner in cases:
        e = x.clone().requires_grad_(True)
        value = loss(e, y, miner(e, y) if miner is not None else None)
        value.backward()
        out.write(name + '|' + repr(value.item()) + '|' + ' '.join(repr(v) for v in e.grad.flatten().tolist()) + '\n')
)";

TEST(MetricLosses, EqualPytorchMetricLearningInValueAndGradient) {
  const std::string dir = test::temp_dir("pml");
  // 48 embeddings of 8 values, 6 classes of 8, shuffled.
  at::manual_seed(5);
  const at::Tensor x = at::randn({48, 8}, at::kDouble);
  const at::Tensor y = at::arange(48, at::kLong).remainder(6).index_select(0, at::randperm(48, at::kLong));
  std::ofstream xs(dir + "/x.txt"), ys(dir + "/y.txt");
  xs.precision(17);
  for (int64_t i = 0; i < x.size(0); ++i) {
    for (int64_t j = 0; j < x.size(1); ++j) xs << x[i][j].item<double>() << (j + 1 < x.size(1) ? " " : "\n");
    ys << y[i].item<int64_t>() << "\n";
  }
  xs.close(), ys.close();
  test::write_file(dir + "/reference.py", kReference);
  const auto r = test::run_command(std::string(TRAINYARD_PYTHON) + " " + dir + "/reference.py " + dir + "/x.txt " + dir +
                                   "/y.txt " + dir + "/expected.txt");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  int cases = 0;
  for (const auto& line : test::read_lines(dir + "/expected.txt")) {
    std::stringstream parts(line);
    std::string name, value, gradient;
    std::getline(parts, name, '|');
    std::getline(parts, value, '|');
    std::getline(parts, gradient);
    std::stringstream words(name);
    std::string plugin, mining, distance;
    words >> plugin;
    std::map<std::string, Value> options;
    if (plugin == "triplet_margin") {
      words >> mining >> distance;
      options = {{"margin", 0.2}, {"mining", mining}, {"distance", distance}};
    } else {
      words >> distance;
      const bool cosine = distance == "cosine";
      options = {{"pos_margin", cosine ? 0.9 : 0.1}, {"neg_margin", cosine ? 0.3 : 0.9}, {"distance", distance}};
    }
    const at::Tensor e = x.clone().requires_grad_(true);
    Batch batch;
    batch.input = e;
    batch.target = y;
    const at::Tensor loss = build(plugin, options)->compute(e, batch);
    loss.backward();
    EXPECT_NEAR(loss.item<double>(), std::stod(value), 1e-10) << name;
    EXPECT_GT(std::stod(value), 0) << name << ": a case that tests nothing";
    std::vector<double> expected;
    std::stringstream g(gradient);
    for (double v; g >> v;) expected.push_back(v);
    const at::Tensor want = at::tensor(expected, at::kDouble).view_as(x);
    EXPECT_LT((e.grad() - want).abs().max().item<double>(), 1e-10) << name;
    ++cases;
  }
  EXPECT_EQ(cases, 8);
}

TEST(MetricLosses, ARunWithBatchHardTripletsOnPkBatchesLowersItsLoss) {
  const std::string exp = test::temp_dir("exp-triplet") + "/triplet.yaml", out = test::temp_dir("out-triplet");
  std::string yaml = test::synthetic_experiment("triplet");
  yaml.replace(yaml.find("{plugin: cross_entropy}"), 23, "{plugin: triplet_margin, margin: 0.2, mining: hard}");
  // A 16-dimensional embedding on the unit sphere, not one score per class (4).
  yaml.replace(yaml.find("dropout: 0.1}"), 13, "dropout: 0.1, embedding_size: 16, normalize: true}");
  // The accuracy meter reads class scores: only the loss is metered.
  yaml.replace(yaml.find("  - {plugin: topk_accuracy, k: [1, 2]}\n"), 38, "");
  yaml.replace(yaml.find("epochs: 2,"), 10, "epochs: 4,");
  test::write_file(exp, yaml);
  // P x K batches: every batch holds positives and negatives for every anchor.
  const auto r = test::trainyard("run " + exp + " --output-dir " + out +
                                 " --set loop.classes_per_batch=4 --set loop.samples_per_class=8");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<double> train, test;
  for (const auto& e : read_events(out + "/triplet/metrics.jsonl")) {
    if (e.phase == "train" && e.values.count("train_loss")) train.push_back(e.values.at("train_loss"));
    if (e.phase == "test" && e.values.count("test_loss")) test.push_back(e.values.at("test_loss"));
  }
  ASSERT_GE(train.size(), 8u);
  ASSERT_EQ(test.size(), 4u);
  EXPECT_GT(train.front(), 0.3) << "the first batches' hardest triplets violate the margin";
  EXPECT_LT(train.back(), 0.25 * train.front()) << train.front() << " ... " << train.back();
  EXPECT_LE(test.back(), train.back());  // no dropout when testing
}

TEST(MetricLosses, EmbeddingsMeetTheWiringCheckOnlyWithALossThatComparesThem) {
  const std::string exp = test::temp_dir("exp-embed") + "/embed.yaml";
  std::string yaml = test::synthetic_experiment("embed");
  yaml.replace(yaml.find("dropout: 0.1}"), 13, "dropout: 0.1, embedding_size: 16}");
  test::write_file(exp, yaml);
  // Cross-entropy scores classes: 16 outputs for 4 classes do not fit.
  auto r = test::trainyard("validate " + exp);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(test::contains(r.err, "forward returned [4, 16] for a training batch of 4 samples of [1, 4, 4]; "
                                    "expected [4, 4]: the training dataset has 4 classes")) << r.err;
  // A triplet loss takes them (the accuracy meter, which reads class scores, left out).
  yaml.replace(yaml.find("{plugin: cross_entropy}"), 23, "{plugin: triplet_margin}");
  yaml.replace(yaml.find("  - {plugin: topk_accuracy, k: [1, 2]}\n"), 38, "");
  test::write_file(exp, yaml);
  r = test::trainyard("validate " + exp);
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(MetricLosses, AClassifierHeadOrFloatTargetsAreAClearError) {
  Batch batch;
  batch.target = at::randn({4});
  try {
    build("triplet_margin", {})->compute(at::randn({4, 3}), batch);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_TRUE(test::contains(e.what(), "triplet_margin: the batch's targets are not class labels")) << e.what();
  }
  batch.target = at::zeros({4}, at::kLong);
  try {
    build("contrastive", {})->compute(at::randn({4, 3, 2}), batch);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_TRUE(test::contains(e.what(), "contrastive: the network's output has 3 dimensions; expected embeddings "
                                         "[batch, size]")) << e.what();
  }
}

}  // namespace
}  // namespace trainyard::host
