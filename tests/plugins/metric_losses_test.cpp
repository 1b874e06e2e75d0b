// The metric-learning losses (plugins/metric_losses) against the library
// metric-learning practitioners use: pytorch-metric-learning 2.9.0 (PyPI,
// in the project's Python environment) computes the same losses, miners and
// gradients on the same float64 embeddings and labels.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <fstream>
#include <sstream>

#include "formats/metrics.h"
#include "plugins/library_loader.h"
#include "support/built_component.h"
#include "support/support.h"
#include "trainyard/error.h"
#include "trainyard/loss.h"

namespace trainyard::host {
namespace {

std::shared_ptr<Loss> build(const std::string& plugin, std::map<std::string, Value> set, int64_t classes = 0) {
  return test::build_builtin<Loss>(Kind::loss, plugin, std::move(set), classes);
}

std::vector<double> numbers(const std::string& text) {
  std::vector<double> v;
  std::stringstream in(text);
  for (double x; in >> x;) v.push_back(x);
  return v;
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
  test::write_matrix(dir + "/x.txt", x);
  test::write_matrix(dir + "/y.txt", y);
  test::write_file(dir + "/reference.py", kReference);
  const auto r = test::run_command(::trainyard::test::python() + " " + dir + "/reference.py " + dir + "/x.txt " + dir +
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

// ArcFace against the library's ArcFaceLoss with the same class centres
// (its W is [size, classes], ours [classes, size]): value, and gradients for
// the embeddings and the centres.
const char* kArcFaceReference = R"(import sys, numpy as np, torch
from pytorch_metric_learning import losses
x = torch.tensor(np.loadtxt(sys.argv[1]), dtype=torch.float64, requires_grad=True)
y = torch.tensor(np.loadtxt(sys.argv[2]), dtype=torch.int64)
w = torch.tensor(np.loadtxt(sys.argv[3]), dtype=torch.float64)
loss = losses.ArcFaceLoss(num_classes=w.shape[0], embedding_size=w.shape[1], margin=float(sys.argv[4]), scale=30)
loss.W.data = w.t().clone()
value = loss(x, y)
value.backward()
print(repr(value.item()))
print(' '.join(repr(v) for v in x.grad.flatten().tolist()))
print(' '.join(repr(v) for v in loss.W.grad.t().flatten().tolist()))
)";

TEST(MetricLosses, ArcFaceEqualsPytorchMetricLearningInValueAndGradients) {
  const std::string dir = test::temp_dir("pml-arcface");
  at::manual_seed(9);
  const at::Tensor x = at::randn({40, 8}, at::kDouble);
  const at::Tensor y = at::arange(40, at::kLong).remainder(5);
  const at::Tensor w = at::randn({5, 8}, at::kDouble);
  test::write_matrix(dir + "/x.txt", x);
  test::write_matrix(dir + "/w.txt", w);
  test::write_matrix(dir + "/y.txt", y);
  test::write_file(dir + "/reference.py", kArcFaceReference);
  for (const double margin : {28.6, 60.0}) {  // 60 degrees: some angles pass 180 - margin (the linear stand-in)
    const auto r = test::run_command(::trainyard::test::python() + " " + dir + "/reference.py " + dir + "/x.txt " +
                                     dir + "/y.txt " + dir + "/w.txt " + std::to_string(margin));
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    const auto lines = test::nonempty_lines(r.out);
    ASSERT_EQ(lines.size(), 3u) << r.out;
    auto loss = build("arcface", {{"embedding_size", int64_t{8}}, {"margin_degrees", margin}, {"scale", 30.0}}, 5);
    auto* owns = dynamic_cast<LossParameters*>(loss.get());
    ASSERT_NE(owns, nullptr);
    auto module = owns->module();
    module->to(at::kDouble);
    at::Tensor centres = module->named_parameters()["centres"];
    {
      at::NoGradGuard no_grad;
      centres.copy_(w);
    }
    const at::Tensor e = x.clone().requires_grad_(true);
    Batch batch;
    batch.input = e;
    batch.target = y;
    const at::Tensor value = loss->compute(e, batch);
    value.backward();
    EXPECT_NEAR(value.item<double>(), std::stod(lines[0]), 1e-9) << margin;
    EXPECT_LT((e.grad() - at::tensor(numbers(lines[1]), at::kDouble).view_as(x)).abs().max().item<double>(), 1e-9);
    EXPECT_LT((centres.grad() - at::tensor(numbers(lines[2]), at::kDouble).view_as(w)).abs().max().item<double>(),
              1e-9);
    EXPECT_TRUE(dynamic_cast<LossValues*>(loss.get())->last_values().count("target_angle_degrees"));
  }
}

TEST(MetricLosses, ArcFaceCentresTrainWithTheNetworkCheckpointResumeAndStayOutOfTheExport) {
  const std::string exp = test::temp_dir("exp-arcface") + "/arcface.yaml";
  std::string yaml = test::synthetic_experiment("arcface");
  yaml.replace(yaml.find("{plugin: cross_entropy}"), 23, "{plugin: arcface, embedding_size: 16, scale: 16}");
  yaml.replace(yaml.find("dropout: 0.1}"), 13, "dropout: 0.0, embedding_size: 16}");
  yaml.replace(yaml.find("  - {plugin: topk_accuracy, k: [1, 2]}\n"), 38, "");
  test::write_file(exp, yaml);
  // Straight to 2 epochs, and 1 epoch then resumed to 2: the same weights and centres, bit for bit.
  const std::string straight = test::temp_dir("arcface-straight"), resumed = test::temp_dir("arcface-resumed");
  auto r = test::trainyard("run " + exp + " --output-dir " + straight);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(test::trainyard("run " + exp + " --output-dir " + resumed + " --set loop.epochs=1").exit_code, 0);
  r = test::trainyard("run " + exp + " --output-dir " + resumed + " --allow-config-change");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string a = test::latest_checkpoint(straight + "/arcface"),
                    b = test::latest_checkpoint(resumed + "/arcface");
  EXPECT_EQ(test::compare_checkpoint_networks(a, b), "");
  const at::Tensor centres = test::checkpoint_tensor(a, "loss.centres");
  EXPECT_EQ(centres.sizes(), (at::IntArrayRef{4, 16}));
  // The centres moved from their initial values: they are trained.
  std::vector<double> angles;
  for (const auto& e : read_events(straight + "/arcface/metrics.jsonl"))
    if (e.values.count("train_target_angle_degrees")) angles.push_back(e.values.at("train_target_angle_degrees"));
  ASSERT_GE(angles.size(), 4u);
  EXPECT_LT(angles.back(), angles.front() - 10) << "embeddings move towards their class centres";
  // The export is the network alone.
  const std::string out = test::temp_dir("arcface-export") + "/model.pt";
  auto x = test::trainyard("export " + exp + " --output-dir " + straight + " --output " + out);
  ASSERT_EQ(x.exit_code, 0) << x.err;
  const auto check = test::run_command(::trainyard::test::python() +
                                       " -c \"import torch, sys; "
                                       "print(sorted(torch.load(sys.argv[1])))\" " +
                                       out);
  ASSERT_EQ(check.exit_code, 0) << check.err;
  EXPECT_FALSE(test::contains(check.out, "loss.")) << check.out;
  EXPECT_TRUE(test::contains(check.out, "layers.0.weight")) << check.out;
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
  // Cross-entropy scores classes: the network says it outputs embeddings (SDK 1.4 NetworkOutputs).
  auto r = test::trainyard("validate " + exp);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(test::nonempty_lines(r.err).size(), 1u) << r.err;
  EXPECT_TRUE(test::contains(r.err,
                             "(network 'mlp' from libmlp.so 1.0.0): outputs embeddings ([4, 16] for a training "
                             "batch of 4 samples of [1, 4, 4]); expected what loss 'cross_entropy' scores"))
      << r.err;
  // A triplet loss takes them (the accuracy meter, which reads class scores, left out).
  yaml.replace(yaml.find("{plugin: cross_entropy}"), 23, "{plugin: triplet_margin}");
  yaml.replace(yaml.find("  - {plugin: topk_accuracy, k: [1, 2]}\n"), 38, "");
  test::write_file(exp, yaml);
  r = test::trainyard("validate " + exp);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // A classification head of 4 scores has the shape of a 4-d embedding: the network's word tells them apart.
  yaml.replace(yaml.find(", embedding_size: 16"), 20, "");
  test::write_file(exp, yaml);
  r = test::trainyard("validate " + exp);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(test::nonempty_lines(r.err).size(), 1u) << r.err;
  EXPECT_TRUE(test::contains(r.err,
                             "(network 'mlp' from libmlp.so 1.0.0): outputs class scores (a classification "
                             "head, [4, 4] for a training batch of 4 samples of [1, 4, 4]); expected "
                             "embeddings for loss 'triplet_margin', which compares the samples' embeddings "
                             "with one another; give the network an embedding head"))
      << r.err;
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
    EXPECT_TRUE(test::contains(e.what(),
                               "contrastive: the network's output has 3 dimensions; expected embeddings "
                               "[batch, size]"))
        << e.what();
  }
}

}  // namespace
}  // namespace trainyard::host
