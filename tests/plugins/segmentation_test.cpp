// Segmentation's loss and meter (issue 51, part) against the references
// their users compare with: the miou meter against torchmetrics 1.9.0's
// MulticlassJaccardIndex(average="macro", ignore_index=...), and
// cross_entropy's ignore_index and class_weights against PyTorch's
// F.cross_entropy, in value and gradient, on dense [B, C, H, W] logits; the
// dice loss against the definition written out in PyTorch.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <opencv2/core.hpp>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <random>

#include "plugins/library_loader.h"
#include "support/built_component.h"
#include "support/data_parallel.h"
#include "support/support.h"
#include "trainyard/dataset.h"
#include "trainyard/error.h"
#include "trainyard/fields.h"
#include "trainyard/image_codec.h"
#include "trainyard/labeled_files.h"
#include "trainyard/loss.h"
#include "trainyard/meter.h"
#include "trainyard/record.h"
#include "transforms.h"

namespace trainyard::host {
namespace {

namespace fs = std::filesystem;

template <class T>
std::shared_ptr<T> build(Kind kind, const std::string& plugin, std::map<std::string, Value> set, int64_t classes) {
  return test::build_builtin<T>(kind, plugin, std::move(set), classes);
}

// The last line the script prints, and the one before it in `before` (when given).
double python_value(const std::string& script, const std::vector<std::string>& args, double* before = nullptr,
                    std::string* third_last = nullptr) {
  const std::string dir = test::temp_dir("reference");
  test::write_file(dir + "/reference.py", script);
  std::string command = test::python() + " " + dir + "/reference.py";
  for (const auto& a : args) command += " " + a;
  const auto r = test::run_command(command);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto lines = test::nonempty_lines(r.out);
  if (r.exit_code != 0 || lines.empty()) return NAN;
  if (before && lines.size() > 1) *before = std::stod(lines[lines.size() - 2]);
  if (third_last && lines.size() > 2) *third_last = lines[lines.size() - 3];
  return std::stod(lines.back());
}

const char* kJaccard = R"(import sys, numpy as np, torch
from torchmetrics.classification import MulticlassJaccardIndex
shape = [int(v) for v in sys.argv[3].split(',')]
logits = torch.tensor(np.loadtxt(sys.argv[1]), dtype=torch.float64).reshape(shape)
target = torch.tensor(np.loadtxt(sys.argv[2]), dtype=torch.int64).reshape([shape[0]] + shape[2:])
metric = MulticlassJaccardIndex(num_classes=shape[1], average='macro', ignore_index=int(sys.argv[4]))
for b in range(shape[0]):  # batch by batch, as the meter sees them
    metric.update(logits[b:b + 1], target[b:b + 1])
# compute() casts its (exact, integer) confusion matrix to float32 before
# dividing: its macro rule applied to that matrix in float64 is what a 1e-9
# comparison can use (and must agree with compute() to float32's precision).
confmat = metric.confmat.double()
ignore = int(sys.argv[4])
inter = torch.diag(confmat)
union = confmat.sum(0) + confmat.sum(1) - inter
iou = torch.where(union != 0, inter / union, torch.zeros((), dtype=torch.float64))
weights = torch.ones_like(iou)
if 0 <= ignore < confmat.shape[0]:
    weights[ignore] = 0.0
weights[confmat.sum(0) + confmat.sum(1) == 0] = 0.0
exact = (weights * iou / weights.sum()).sum()
assert abs(exact.item() - metric.compute().item()) < 1e-6
print(' '.join(str(int(v)) for v in metric.confmat.reshape(-1).tolist()))
print(repr(metric.compute().double().item()))
print(repr(exact.item()))
)";

TEST(Miou, EqualsTorchmetricsJaccardIndexOverTheWholeSetAndAcrossRanks) {
  at::manual_seed(3);
  // 6 images of 9x7, 5 classes: class 4 never occurs nor is predicted (left
  // out of the mean), class 3 is predicted but never true, 255 is void.
  const int64_t b = 6, c = 5, h = 9, w = 7;
  at::Tensor logits = at::randn({b, c, h, w}, at::kDouble);
  logits.select(1, 4).fill_(-100);
  at::Tensor target = at::randint(0, 3, {b, h, w}, at::kLong);
  target.masked_fill_(at::rand({b, h, w}) < 0.15, 255);
  const std::string dir = test::temp_dir("miou");
  test::write_matrix(dir + "/logits.txt", logits.reshape({-1}));
  test::write_matrix(dir + "/target.txt", target.reshape({-1}));
  double in_float32 = NAN;
  std::string confmat;
  const double expected =
      python_value(kJaccard, {dir + "/logits.txt", dir + "/target.txt", "6,5,9,7", "255"}, &in_float32, &confmat);

  auto whole = build<Meter>(Kind::meter, "miou", {{"ignore_index", int64_t{255}}}, c);
  auto rank0 = build<Meter>(Kind::meter, "miou", {{"ignore_index", int64_t{255}}}, c);
  auto rank1 = build<Meter>(Kind::meter, "miou", {{"ignore_index", int64_t{255}}}, c);
  const at::Tensor loss = at::zeros({});
  for (int64_t i = 0; i < b; ++i) {
    Batch batch{at::Tensor(), target.slice(0, i, i + 1), {}};
    const at::Tensor out = logits.slice(0, i, i + 1);
    whole->update({batch, out, loss});
    (i % 2 ? rank1 : rank0)->update({batch, out, loss});
  }
  // The same confusion matrix, cell by cell (then nothing out of range).
  std::string ours;
  const std::vector<double> cells = whole->accumulators();
  for (size_t i = 0; i + 1 < cells.size(); ++i) ours += (i ? " " : "") + std::to_string(static_cast<int64_t>(cells[i]));
  EXPECT_EQ(ours, confmat);
  EXPECT_EQ(cells.back(), 0);
  EXPECT_NEAR(whole->values().at("miou"), expected, 1e-9);
  EXPECT_NEAR(whole->values().at("miou"), in_float32, 1e-6);  // compute() itself, in float32
  // Two ranks' accumulators summed (the host's reduction) give one process's value.
  std::vector<double> sum = rank0->accumulators();
  const std::vector<double> other = rank1->accumulators();
  for (size_t i = 0; i < sum.size(); ++i) sum[i] += other[i];
  auto reduced = build<Meter>(Kind::meter, "miou", {{"ignore_index", int64_t{255}}}, c);
  reduced->set_accumulators(sum);
  EXPECT_EQ(reduced->values(), whole->values());
  ASSERT_EQ(whole->results().size(), 1u);
  EXPECT_EQ(whole->results()[0].rows.size(), 5u);
  EXPECT_EQ(whole->results()[0].rows[4][1], "");  // class 4: no union, no IoU
}

TEST(Miou, ALabelOutsideTheClassesAndNotIgnoredIsAnErrorNotAClamp) {
  auto meter = build<Meter>(Kind::meter, "miou", {{"ignore_index", int64_t{255}}}, 3);
  const at::Tensor target = at::tensor({0, 1, 7, 255}, at::kLong);
  const at::Tensor out = at::randn({4, 3});
  const at::Tensor loss = at::zeros({});
  meter->update({Batch{at::Tensor(), target, {}}, out, loss});
  try {
    meter->values();
    FAIL() << "a label 7 of 3 classes was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(test::contains(e.what(), "1 target labels were outside 0..2 and not ignore_index 255")) << e.what();
  }
  // An output that does not fit the target names both shapes.
  auto fresh = build<Meter>(Kind::meter, "miou", {}, 3);
  try {
    fresh->update({Batch{at::Tensor(), at::zeros({2, 4, 4}, at::kLong), {}}, at::randn({2, 3, 5, 4}), loss});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(test::contains(e.what(), "got output [2, 3, 5, 4] and target [2, 4, 4]")) << e.what();
  }
}

// Dense logits [B, C, H, W] and class ids [B, H, W] (ids below `present`,
// a fifth of them void at 255), written where a reference script reads them.
struct DenseCase {
  at::Tensor logits, target;
  std::string dir;
};
DenseCase dense_case(const std::string& name, uint64_t seed, std::vector<int64_t> shape, int64_t present) {
  at::manual_seed(seed);
  DenseCase d{at::randn(shape, at::kDouble), at::Tensor(), test::temp_dir(name)};
  d.target = at::randint(0, present, {shape[0], shape[2], shape[3]}, at::kLong);
  d.target.masked_fill_(at::rand({shape[0], shape[2], shape[3]}) < 0.2, 255);
  test::write_matrix(d.dir + "/logits.txt", d.logits.reshape({-1}));
  test::write_matrix(d.dir + "/target.txt", d.target.reshape({-1}));
  return d;
}

// The loss's value and its gradient against the logits equal the reference's
// (`expected`, and the gradient it wrote to DIR/grad.txt) in float64.
void expect_value_and_gradient(Loss& loss, const DenseCase& d, double expected) {
  const at::Tensor x = d.logits.clone().requires_grad_(true);
  const at::Tensor value = loss.compute(x, Batch{at::Tensor(), d.target, {}});
  value.backward();
  EXPECT_NEAR(value.item<double>(), expected, 1e-12);
  std::vector<double> grad;
  for (const auto& line : test::nonempty_lines(test::read_file(d.dir + "/grad.txt"))) grad.push_back(std::stod(line));
  EXPECT_LT((x.grad().reshape({-1}) - at::tensor(grad, at::kDouble)).abs().max().item<double>(), 1e-12);
}

const char* kCrossEntropy = R"(import sys, numpy as np, torch
import torch.nn.functional as F
shape = [int(v) for v in sys.argv[3].split(',')]
logits = torch.tensor(np.loadtxt(sys.argv[1]), dtype=torch.float64).reshape(shape).requires_grad_(True)
target = torch.tensor(np.loadtxt(sys.argv[2]), dtype=torch.int64).reshape([shape[0]] + shape[2:])
weight = torch.tensor([float(v) for v in sys.argv[4].split(',')], dtype=torch.float64)
loss = F.cross_entropy(logits, target, weight=weight, ignore_index=255)
loss.backward()
np.savetxt(sys.argv[5], logits.grad.reshape(-1).numpy(), fmt='%.17g')
print(repr(loss.item()))
)";

TEST(CrossEntropy, DenseLogitsWithIgnoreIndexAndClassWeightsEqualPyTorch) {
  // Void pixels: no device assert, no contribution.
  const DenseCase d = dense_case("ce", 5, {2, 3, 4, 5}, 3);
  const double expected = python_value(
      kCrossEntropy, {d.dir + "/logits.txt", d.dir + "/target.txt", "2,3,4,5", "0.5,1,2", d.dir + "/grad.txt"});
  auto loss = build<Loss>(Kind::loss, "cross_entropy",
                          {{"ignore_index", int64_t{255}}, {"class_weights", std::vector<double>{0.5, 1, 2}}}, 3);
  expect_value_and_gradient(*loss, d, expected);
  // Weights of another count than the classes are refused as the loss is built.
  EXPECT_THROW(build<Loss>(Kind::loss, "cross_entropy", {{"class_weights", std::vector<double>{1, 2}}}, 3),
               ConfigError);
}

// segmentation_models_pytorch's multiclass DiceLoss (from_logits, dims over
// the batch and the pixels, classes absent from the targets masked), written
// out in PyTorch on the same float64 logits.
const char* kDice = R"(import sys, numpy as np, torch
import torch.nn.functional as F
shape = [int(v) for v in sys.argv[3].split(',')]
logits = torch.tensor(np.loadtxt(sys.argv[1]), dtype=torch.float64).reshape(shape).requires_grad_(True)
target = torch.tensor(np.loadtxt(sys.argv[2]), dtype=torch.int64).reshape([shape[0]] + shape[2:])
b, c = shape[0], shape[1]
p = logits.softmax(1).reshape(b, c, -1)
t = target.reshape(b, -1)
keep = (t != 255)
p = p * keep.unsqueeze(1)
onehot = F.one_hot((t * keep).long(), c).permute(0, 2, 1) * keep.unsqueeze(1)
onehot = onehot.double()
inter = (p * onehot).sum((0, 2))
card = (p + onehot).sum((0, 2))
score = (2 * inter) / card.clamp_min(1e-7)
loss = ((1 - score) * (onehot.sum((0, 2)) > 0)).mean()
loss.backward()
np.savetxt(sys.argv[4], logits.grad.reshape(-1).numpy(), fmt='%.17g')
print(repr(loss.item()))
)";

TEST(Dice, EqualsTheMulticlassDiceLossInValueAndGradient) {
  const DenseCase d = dense_case("dice", 7, {3, 4, 5, 6}, 3);  // class 3 absent: adds 0
  const double expected =
      python_value(kDice, {d.dir + "/logits.txt", d.dir + "/target.txt", "3,4,5,6", d.dir + "/grad.txt"});
  auto loss = build<Loss>(Kind::loss, "dice", {{"ignore_index", int64_t{255}}}, 4);
  expect_value_and_gradient(*loss, d, expected);
  const at::Tensor& target = d.target;
  // A perfect prediction scores 0; a misfit output names both shapes.
  const at::Tensor perfect = at::one_hot(target.clamp_max(3), 4).permute({0, 3, 1, 2}).to(at::kDouble) * 1000;
  EXPECT_NEAR(loss->compute(perfect, Batch{at::Tensor(), target, {}}).item<double>(), 0.0, 1e-9);
  try {
    loss->compute(at::randn({3, 4, 6, 5}), Batch{at::Tensor(), target, {}});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(test::contains(e.what(), "got output [3, 4, 6, 5] and target [3, 5, 6]")) << e.what();
  }
}

// Segmentation end to end on data with masks: synthetic_shapes' images and
// masks (void outlines at 255) through the loader, a U-Net, cross_entropy
// with ignore_index and the miou meter, checkpointed and resumed.
TEST(Segmentation, AUnetLearnsTheShapesMasksAndAResumedRunIsTheSame) {
  const std::string exp = test::temp_dir("exp-seg") + "/shapes.yaml", out = test::temp_dir("out-seg");
  test::write_file(exp,
                   "name: shapes\n"
                   "seed: 1\n"
                   "dataset:\n"
                   "  train: {plugin: synthetic_shapes, size: 512, shape: [1, 32, 32], void_border: true, seed: 1}\n"
                   "  test: {plugin: synthetic_shapes, size: 128, shape: [1, 32, 32], void_border: true, seed: 2}\n"
                   "network: {plugin: unet, depth: 2, width: 8}\n"
                   "loss: {plugin: cross_entropy, ignore_index: 255}\n"
                   "optimizer: {plugin: adam, lr: 0.003}\n"
                   "meters:\n"
                   "  - plugin: loss\n"
                   "  - {plugin: miou, ignore_index: 255}\n"
                   "loop: {epochs: 8, batch_per_device: 32, log_every_iters: 8}\n"
                   "distributed: {threads_per_process: 1}\n");
  auto whole = test::trainyard("run " + exp + " --output-dir " + out + "/whole");
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  const auto miou = test::series(out + "/whole/shapes/metrics.jsonl", "test_miou");
  ASSERT_EQ(miou.size(), 8u);
  EXPECT_GT(miou.back(), 0.75);  // 4 classes; chance is near 0.25, all background 0.24
  EXPECT_GT(miou.back(), miou.front() + 0.1);
  const auto table = test::nonempty_lines(test::read_file(out + "/whole/shapes/meters/iou_per_class-e8.csv"));
  ASSERT_EQ(table.size(), 5u);
  EXPECT_EQ(table[0], "class,iou,true,predicted,intersection");
  // Half, then the rest: the same values, epoch by epoch.
  auto half = test::trainyard("run " + exp + " --output-dir " + out + "/halves --until-epoch 4");
  ASSERT_EQ(half.exit_code, 0) << half.err;
  auto rest = test::trainyard("run " + exp + " --output-dir " + out + "/halves");
  ASSERT_EQ(rest.exit_code, 0) << rest.err;
  EXPECT_EQ(test::series(out + "/halves/shapes/metrics.jsonl", "test_miou"), miou);
}

// Photographs and their masks as files (JPEG and grey PNG), converted to an
// LMDB by `convert --from parallel`, read with target: mask: the masks get
// the photographs' geometry (random_resized crops, flips, rotations) as class
// ids, the U-Net trains on them, and a mask of another size is one error line.
void write_scene(const std::string& dir, int count, int rows, int cols, uint64_t seed, bool jpeg_photos = false) {
  std::mt19937_64 draw(seed);
  for (int i = 0; i < count; ++i) {
    cv::Mat photo(rows, cols, CV_8UC3, cv::Scalar(40, 40, 40)), mask(rows, cols, CV_8UC1, cv::Scalar(0));
    // A bright rectangle (class 1) and a blue disc (class 2) at drawn places.
    const int x = int(draw() % (cols / 2)), y = int(draw() % (rows / 2)), w = 8 + int(draw() % 10);
    photo(cv::Rect(x, y, w, w)).setTo(cv::Scalar(220, 220, 220));
    mask(cv::Rect(x, y, w, w)).setTo(1);
    const int cx = cols / 2 + int(draw() % (cols / 3)), cy = rows / 2 + int(draw() % (rows / 3));
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c)
        if ((r - cy) * (r - cy) + (c - cx) * (c - cx) <= 36)
          photo.at<cv::Vec3b>(r, c) = {200, 60, 30}, mask.at<uint8_t>(r, c) = 2;
    const std::string name = "s" + std::to_string(i);
    test::write_file(dir + "/photos/" + name + (jpeg_photos ? ".jpg" : ".png"),
                     jpeg_photos ? image_codec::encode_jpeg(photo, 95) : image_codec::encode_png(photo));
    test::write_file(dir + "/masks/" + name + ".png", image_codec::encode_png(mask));
  }
}

TEST(Segmentation, MasksConvertedBesideTheirPhotographsFollowTheirGeometryAndTrain) {
  const std::string dir = test::temp_dir("scene");
  write_scene(dir + "/train", 48, 40, 48, 1);
  write_scene(dir + "/test", 16, 40, 48, 2);
  for (const char* split : {"train", "test"}) {
    auto r = test::trainyard(std::string("convert --from parallel --input ") + dir + "/" + split + "/photos --target " +
                             dir + "/" + split + "/masks --output " + dir + "/" + split + ".lmdb --quiet");
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  const std::string data =
      "mask_classes: 3, crop: random_resized, crop_size: [32, 32], scale: [0.5, 1.0], hflip: 0.5, rotate_degrees: 15";
  const std::string exp = dir + "/scene.yaml";
  test::write_file(exp, "name: scene\nseed: 3\ndataset:\n  train: {plugin: lmdb, path: " + dir +
                            "/train.lmdb, target: mask, " + data +
                            "}\n"
                            "  test: {plugin: lmdb, path: " +
                            dir +
                            "/test.lmdb, target: mask, mask_classes: 3, crop: center, crop_size: [32, 32]}\n"
                            "network: {plugin: unet, depth: 2, width: 8}\n"
                            "loss: {plugin: cross_entropy, ignore_index: 255}\n"
                            "optimizer: {plugin: adam, lr: 0.005}\n"
                            "meters: [{plugin: loss}, {plugin: miou, ignore_index: 255}]\n"
                            "loop: {epochs: 3, batch_per_device: 8}\n"
                            "distributed: {threads_per_process: 1}\n");
  auto r = test::trainyard("run " + exp + " --output-dir " + dir + "/runs");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto miou = test::series(dir + "/runs/scene/metrics.jsonl", "test_miou");
  ASSERT_EQ(miou.size(), 3u);
  EXPECT_GT(miou.back(), 0.34) << "above the all-background mIoU (about 0.3)";
  // A mask of another size than its photograph: one line naming the record.
  cv::Mat small(20, 24, CV_8UC1, cv::Scalar(0));
  test::write_file(dir + "/train/masks/s0.png", image_codec::encode_png(small));
  ASSERT_EQ(test::trainyard("convert --from parallel --input " + dir + "/train/photos --target " + dir +
                            "/train/masks --output " + dir + "/bad.lmdb --quiet")
                .exit_code,
            0);
  test::expect_one_error_line(
      test::trainyard("validate " + exp + " --set dataset.train.path=" + dir + "/bad.lmdb"),
      "record 0000000000 image 1 (png): a mask of 20x24 for an image of 40x48; a mask has its image's size");
  // Records without a target image (a folder of classes): target: mask says what to convert.
  test::write_file(dir + "/plain/a/s0.png", test::read_file(dir + "/train/photos/s1.png"));
  ASSERT_EQ(test::trainyard("convert --from folder --input " + dir + "/plain --output " + dir + "/plain.lmdb --quiet")
                .exit_code,
            0);
  test::expect_one_error_line(
      test::trainyard("validate " + exp + " --set dataset.train.path=" + dir + "/plain.lmdb"),
      ": target: mask, and the sample has no target image to read as its mask (convert image and mask folders with "
      "trainyard convert --from parallel");
}

// One experiment on the scene, its data given as `train` and `test` (YAML
// mappings); training on 32x32 crops, testing on whole 40x48 photographs.
std::string scene_experiment(const std::string& dir, const std::string& name, const std::string& train,
                             const std::string& test_split) {
  const std::string exp = dir + "/" + name + ".yaml";
  const std::string masks = "target: mask, mask_classes: 3";
  test::write_file(exp, "name: " + name + "\nseed: 3\ndataset:\n  train: {" + train + ", " + masks +
                            ", crop: random, crop_size: [32, 32], hflip: 0.5, rotate_degrees: 15}\n"
                            "  test: {" +
                            test_split + ", " + masks +
                            "}\n"
                            "network: {plugin: unet, depth: 2, width: 8}\n"
                            "loss: {plugin: cross_entropy, ignore_index: 255}\n"
                            "optimizer: {plugin: adam, lr: 0.005}\n"
                            "meters: [{plugin: loss}, {plugin: miou, ignore_index: 255}]\n"
                            "loop: {epochs: 2, batch_per_device: 8}\n"
                            "distributed: {threads_per_process: 1}\n");
  return exp;
}

TEST(Segmentation, MasksBesideImagesInFoldersCsvLmdbAndShardsAreTheSameSamples) {
  // JPEG photographs with PNG masks of their stem (s0.jpg, s0.png): an
  // image_folder with a masks folder, a CSV of image,mask lines and an LMDB
  // converted from the same files (--encoding keep) give the same samples,
  // so the same run to the last bit; the test split is whole photographs,
  // of another size than the training crops (a U-Net takes both).
  const std::string dir = test::temp_dir("mask-sources");
  for (const char* split : {"train", "test"}) {
    const std::string d = dir + "/" + split;
    write_scene(d, std::string(split) == "train" ? 24 : 8, 40, 48, split[1], /*jpeg_photos=*/true);
    std::string csv = "image,mask\n";  // in the folder's order (s0, s1, s10, ...): the same samples, same indices
    for (const auto& photo : sorted_image_files(d + "/photos"))
      csv += "photos/" + photo + ",masks/" + fs::path(photo).stem().string() + ".png\n";
    test::write_file(d + "/pairs.csv", csv);
    auto r = test::trainyard("convert --from parallel --input " + d + "/photos --target " + d + "/masks --output " + d +
                             ".lmdb --encoding keep --quiet");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = test::trainyard("convert --from parallel --input " + d + "/photos --target " + d + "/masks --output " + d +
                        ".shards --to webdataset --encoding keep --quiet");
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  const auto folder = [&](const char* split) {
    return "plugin: image_folder, root: " + dir + "/" + split + "/photos, masks: " + dir + "/" + split + "/masks";
  };
  const auto csv = [&](const char* split) { return "plugin: csv, file: " + dir + "/" + split + "/pairs.csv"; };
  const auto lmdb = [&](const char* split) { return "plugin: lmdb, path: " + dir + "/" + split + ".lmdb"; };
  const auto shards = [&](const char* split) {
    return "plugin: webdataset, urls: " + dir + "/" + split + ".shards/shard-000000.tar";
  };
  std::vector<std::vector<double>> runs;
  for (const auto& [name, source] : std::vector<std::pair<std::string, std::function<std::string(const char*)>>>{
           {"folder", folder}, {"csv", csv}, {"lmdb", lmdb}, {"webdataset", shards}}) {
    auto r = test::trainyard("run " + scene_experiment(dir, name, source("train"), source("test")) + " --output-dir " +
                             dir + "/runs");
    ASSERT_EQ(r.exit_code, 0) << name << "\n" << r.err;
    runs.push_back(test::series(dir + "/runs/" + name + "/metrics.jsonl", "test_miou"));
    ASSERT_EQ(runs.back().size(), 2u) << name;
  }
  EXPECT_EQ(runs[0], runs[1]) << "image_folder and csv";
  EXPECT_EQ(runs[0], runs[2]) << "image_folder and lmdb";
  EXPECT_EQ(runs[0], runs[3]) << "image_folder and webdataset (KEY.jpg, KEY.mask.png)";
  // Streamed shards read the same members; a mask_member the shards lack is named.
  const auto streamed = [&](const char* split) {
    return "plugin: webdataset, urls: 'pipe:cat " + dir + "/" + split +
           ".shards/shard-000000.tar', size: 8, shuffle_buffer: 0";
  };
  const std::string piped = scene_experiment(dir, "streamed", streamed("train"), streamed("test"));
  EXPECT_EQ(test::trainyard("validate " + piped).exit_code, 0);
  test::expect_one_error_line(
      test::trainyard("validate " + piped + " --set dataset.train.mask_member=seg.png"),
      "sample '000000000' has no mask member; expected KEY.seg.png (target: mask, mask_member)");

  // Converted with JPEG and a resize, masks stay exact: PNG, nearest neighbour (every id checked on reading).
  ASSERT_EQ(test::trainyard("convert --from parallel --input " + dir + "/train/photos --target " + dir +
                            "/train/masks --output " + dir + "/resized.lmdb --encoding jpeg --resize 20x24 --quiet")
                .exit_code,
            0);
  auto r = test::trainyard("validate " + scene_experiment(dir, "resized", lmdb("train"), lmdb("test")) +
                           " --set dataset.train.path=" + dir +
                           "/resized.lmdb --set dataset.train.crop_size=[16,16] --set dataset.test.crop=center "
                           "--set dataset.test.crop_size=[16,16]");
  EXPECT_EQ(r.exit_code, 0) << r.err;

  // A 16-bit mask keeps its ids (none scaled to 8 bits): 300 is out of range, named with its place
  // (sample 0: among those the wiring check reads).
  cv::Mat wide(40, 48, CV_16UC1, cv::Scalar(0));
  wide.at<uint16_t>(5, 7) = 300;
  test::write_file(dir + "/train/masks/s0.png", image_codec::encode_png(wide));
  const std::string exp = scene_experiment(dir, "wide", folder("train"), folder("test"));
  test::expect_one_error_line(test::trainyard("validate " + exp),
                              dir +
                                  "/train/masks/s0.png: class id 300 at row 5, column 7; expected ids 0 to 2 "
                                  "(mask_classes: 3) or ignore_index 255");
  fs::remove(dir + "/train/masks/s0.png");
  test::expect_one_error_line(
      test::trainyard("validate " + exp),
      "'s0.jpg' is in " + dir + "/train/photos but nothing of its name or stem is in " + dir + "/train/masks");
  const std::string no_masks = "plugin: image_folder, root: " + dir + "/train/photos";
  test::expect_one_error_line(
      test::trainyard("validate " + scene_experiment(dir, "no_masks", no_masks, folder("test"))),
      "target: mask without masks");
  test::write_file(dir + "/train/masks/s0.png", test::read_file(dir + "/train/masks/s2.png"));
  test::write_file(dir + "/train/masks/s1.bmp", "not read");
  test::expect_one_error_line(test::trainyard("validate " + exp),
                              "'s1.jpg' has two files of its stem in " + dir + "/train/masks: " + dir +
                                  "/train/masks/s1.bmp and " + dir + "/train/masks/s1.png");
  fs::remove(dir + "/train/masks/s1.bmp");
  test::write_file(dir + "/train/pairs.csv", "image,mask\nphotos/s0.jpg,masks/s0.png,extra\n");
  test::expect_one_error_line(
      test::trainyard("validate " + scene_experiment(dir, "bad_csv", csv("train"), csv("test"))),
      dir + "/train/pairs.csv:2: 'photos/s0.jpg,masks/s0.png,extra'");
}

// The mean over classes of IoU between masks (PNG files of class ids),
// pixels of `unknown` in the prediction left out, over all the pairs.
double mean_iou(const std::vector<std::pair<std::string, std::string>>& predicted_and_true, int classes, int unknown) {
  std::vector<int64_t> both(classes), either(classes);
  for (const auto& [predicted_file, true_file] : predicted_and_true) {
    const std::string a = test::read_file(predicted_file), b = test::read_file(true_file);
    const cv::Mat p = image_codec::decode(a.data(), a.size()), t = image_codec::decode(b.data(), b.size());
    EXPECT_EQ(p.size(), t.size()) << predicted_file;
    if (p.size() != t.size()) return 0;
    for (int r = 0; r < p.rows; ++r)
      for (int c = 0; c < p.cols; ++c) {
        const int x = p.at<uint8_t>(r, c), y = t.at<uint8_t>(r, c);
        if (x == unknown) continue;
        for (int k = 0; k < classes; ++k) {
          both[k] += x == k && y == k;
          either[k] += x == k || y == k;
        }
      }
  }
  double sum = 0;
  for (int k = 0; k < classes; ++k) sum += either[k] ? double(both[k]) / double(either[k]) : 0.0;
  return sum / classes;
}

TEST(Segmentation, PredictWritesEachMaskAtItsImageSizeAsTheTestPassScoresIt) {
  // A U-Net trained on 32x32 crops predicts whole 40x48 photographs: each
  // PNG has its photograph's size and scores the mIoU the run's last test
  // pass reported (the same checkpoint, preprocessing and argmax). Resized
  // and center-cropped instead, the crop's prediction lands back where it
  // was cut (255 around it), agreeing with the true masks there.
  const std::string dir = test::temp_dir("predict-masks");
  write_scene(dir + "/train", 48, 40, 48, 5, /*jpeg_photos=*/true);
  write_scene(dir + "/test", 8, 40, 48, 6, /*jpeg_photos=*/true);
  const auto folder = [&](const char* split) {
    return "plugin: image_folder, root: " + dir + "/" + split + "/photos, masks: " + dir + "/" + split + "/masks";
  };
  const std::string exp = scene_experiment(dir, "scene", folder("train"), folder("test"));
  auto r =
      test::trainyard("run " + exp + " --output-dir " + dir + "/runs --set loop.epochs=15 --set optimizer.lr=0.01");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const double reported = test::series(dir + "/runs/scene/metrics.jsonl", "test_miou").back();
  ASSERT_GT(reported, 0.9) << "the U-Net learns the scene (0.98 measured): then a 1-pixel misplacement shows";

  r = test::trainyard("predict " + exp + " --output-dir " + dir + "/runs --input " + dir + "/test/photos --output " +
                      dir + "/whole");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::pair<std::string, std::string>> pairs;
  for (int i = 0; i < 8; ++i)
    pairs.emplace_back(dir + "/whole/masks/s" + std::to_string(i) + ".png",
                       dir + "/test/masks/s" + std::to_string(i) + ".png");
  EXPECT_NEAR(mean_iou(pairs, 3, 255), reported, 1e-9);
  EXPECT_TRUE(test::contains(test::read_file(dir + "/whole/predictions.csv"),
                             "0," + dir + "/test/photos/s0.jpg,masks/s0.png,40,48\n"));

  // resize_short 32 makes 32x38; the center crop's 32x32 starts 3 columns in:
  // at 40x48 that is columns 4 to 43 (nearest neighbour), 255 outside them.
  r = test::trainyard("predict " + exp + " --output-dir " + dir + "/runs --input " + dir + "/test/photos --output " +
                      dir + "/cropped --input-options '{resize_short: 32, crop: center, crop_size: [32, 32]}'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string bytes = test::read_file(dir + "/cropped/masks/s0.png");
  const cv::Mat cropped = image_codec::decode(bytes.data(), bytes.size());
  ASSERT_EQ(cropped.size(), cv::Size(48, 40));
  for (int c = 0; c < 48; ++c) {
    const bool outside = c < 4 || c > 43;
    EXPECT_EQ(cropped.at<uint8_t>(20, c) == 255, outside) << "column " << c;
  }
  std::vector<std::pair<std::string, std::string>> cropped_pairs;
  for (const auto& [whole, truth] : pairs)
    cropped_pairs.emplace_back(dir + "/cropped" + whole.substr(dir.size() + 6), truth);
  // Measured: 0.943 for 0.979 reported; the same masks one column off score 0.869, two off 0.777.
  EXPECT_GT(mean_iou(cropped_pairs, 3, 255), reported - 0.08) << "the crop's masks where they were cut";

  // An LMDB keeps no original sizes; an existing folder is never written into.
  ASSERT_EQ(test::trainyard("convert --from parallel --input " + dir + "/test/photos --target " + dir +
                            "/test/masks --output " + dir + "/test.lmdb --quiet")
                .exit_code,
            0);
  test::expect_one_error_line(test::trainyard("predict " + exp + " --output-dir " + dir + "/runs --input " + dir +
                                              "/test.lmdb --output " + dir + "/from_lmdb"),
                              "is an LMDB, and the network scores every pixel");
  test::expect_one_error_line(test::trainyard("predict " + exp + " --output-dir " + dir + "/runs --input " + dir +
                                              "/test/photos --output " + dir + "/whole"),
                              "predict: --output " + dir + "/whole exists");
  EXPECT_FALSE(fs::exists(dir + "/from_lmdb"));
  // Two images of one stem would write one mask: refused before any is written.
  fs::copy_file(dir + "/test/masks/s1.png", dir + "/test/photos/s0.png");
  test::expect_one_error_line(
      test::trainyard("predict " + exp + " --output-dir " + dir + "/runs --input " + dir + "/test/photos --output " +
                      dir + "/clash"),
      dir + "/test/photos/s0.jpg and " + dir + "/test/photos/s0.png would both write masks/s0.png");
  EXPECT_FALSE(fs::exists(dir + "/clash"));

  // export writes the task beside the weights: segmentation, the classes,
  // the loss's ignore_index, the shape trained on and the test split's preprocessing.
  r = test::trainyard("export " + dir + "/runs/scene --format safetensors --output " + dir + "/unet.safetensors");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string meta = test::read_file(dir + "/unet.safetensors.json");
  for (const char* part : {"\"task\": \"segmentation\"", "\"classes\": [\"0\", \"1\", \"2\"]", "\"ignore_index\": 255",
                           "\"sample_shape\": [3, 32, 32]", "\"crop\": \"none\""})
    EXPECT_TRUE(test::contains(meta, part)) << part << "\n" << meta;
}

TEST(Coco, BoxesFollowEachSampleAsFieldsWithItsGeometry) {
  // target: boxes: each visible item's box (the bounds of its pixels in the
  // scene set) comes through the sample's crop and flips as a field; the
  // item's pixels in the instance PNG, moved as masks move, have the same
  // bounds to the pixel.
  const std::string dir = test::temp_dir("coco-boxes");
  ASSERT_EQ(std::system((test::python() + " " + test::source_dir() + "/scripts/data/make_scene_set.py " + dir +
                         "/set --train 8 --test 2 --size 64 > /dev/null")
                            .c_str()),
            0);
  std::map<std::string, Value> set{{"annotations", dir + "/set/train/instances.json"},
                                   {"target", std::string("boxes")},
                                   {"crop", std::string("random")},
                                   {"crop_size", std::vector<int64_t>{56, 52}},
                                   {"hflip", 0.5},
                                   {"vflip", 0.5},
                                   {"min_box_visible", 0.0},
                                   {"min_box_size", 0.0}};
  auto data = build<Dataset>(Kind::dataset, "coco", set, 0);
  EXPECT_EQ(data->info().num_classes, 10);  // the categories; no background class for boxes
  EXPECT_EQ(data->info().class_names.at(0), "t-shirt");
  const auto* fields = dynamic_cast<const FieldDataset*>(data.get());
  ASSERT_NE(fields, nullptr);
  image_datasets::TransformOptions moves;
  moves.crop = "random", moves.crop_size = {56, 52}, moves.hflip = 0.5, moves.vflip = 0.5;
  int64_t compared = 0;
  for (int64_t i = 0; i < 8; ++i)
    for (uint64_t seed : {3u, 17u, 40u, 77u, 91u}) {
      const FieldExample e = fields->get_with_fields(i, seed);
      ASSERT_EQ(e.example.input.sizes(), (at::IntArrayRef{3, 56, 52}));
      EXPECT_TRUE(at::equal(e.example.input, data->get_seeded(i, seed).input));
      EXPECT_EQ(e.fields.at(field_name::image_id).values.item<int64_t>(), i + 1);
      EXPECT_TRUE(at::equal(e.fields.at(field_name::original_size).values, at::tensor({64, 64}, at::kLong)));
      const at::Tensor boxes = e.fields.at(field_name::boxes).values;
      EXPECT_EQ(e.fields.at(field_name::box_labels).values.size(0), boxes.size(0));
      EXPECT_EQ(e.example.target.item<int64_t>(), boxes.size(0));  // nothing dropped (min_box_visible 0)
      // The geometry field maps the original image to the sample, as the boxes went.
      const image_datasets::SampleAffine g = image_datasets::sample_affine(cv::Size(64, 64), moves, seed);
      const at::Tensor a = e.fields.at(field_name::input_from_original).values;
      for (int r = 0; r < 2; ++r)
        for (int c = 0; c < 3; ++c) EXPECT_DOUBLE_EQ(a[r][c].item<double>(), g.affine(r, c));
      char name[16];
      std::snprintf(name, sizeof name, "%06lld", static_cast<long long>(i));
      const std::string bytes = test::read_file(dir + "/set/train/instances/" + name + ".png");
      const cv::Mat original = image_codec::decode(bytes.data(), bytes.size());
      const at::Tensor before = at::from_blob(original.data, {64, 64}, at::kShort).to(at::kLong);
      const at::Tensor instances = image_datasets::apply_mask_transforms(original, moves, seed, 0);
      const at::Tensor ids = std::get<0>(at::_unique(instances)).to(at::kLong).contiguous();
      for (int64_t u = 0; u < ids.numel(); ++u) {
        const int64_t id = ids[u].item<int64_t>();
        if (id == 0) continue;
        const at::Tensor on = instances.eq(id).nonzero();
        const double y1 = on.select(1, 0).min().item<int64_t>(), y2 = on.select(1, 0).max().item<int64_t>() + 1;
        const double x1 = on.select(1, 1).min().item<int64_t>(), x2 = on.select(1, 1).max().item<int64_t>() + 1;
        // An item the crop cut has the clipped box, not the bounds of the
        // pixels left: compared only when its whole box is in the crop.
        const at::Tensor was = before.eq(id).nonzero();
        const double ox1 = was.select(1, 1).min().item<int64_t>(), ox2 = was.select(1, 1).max().item<int64_t>() + 1;
        const double oy1 = was.select(1, 0).min().item<int64_t>(), oy2 = was.select(1, 0).max().item<int64_t>() + 1;
        bool inside = true;
        for (const double x : {ox1, ox2})
          for (const double y : {oy1, oy2}) {
            const double px = g.crop_stage(0, 0) * x + g.crop_stage(0, 1) * y + g.crop_stage(0, 2);
            const double py = g.crop_stage(1, 0) * x + g.crop_stage(1, 1) * y + g.crop_stage(1, 2);
            inside = inside && px >= 0 && px <= 52 && py >= 0 && py <= 56;
          }
        if (!inside) continue;
        const at::Tensor expected = at::tensor({x1, y1, x2, y2}, at::kFloat);
        // Some box is the item's pixels' bounds.
        EXPECT_TRUE(at::isclose(boxes, expected.unsqueeze(0), 0, 1e-4).all(1).any().item<bool>())
            << "scene " << i << " seed " << seed << " item " << id << ": " << expected << " not in " << boxes;
        ++compared;
      }
    }
  EXPECT_GT(compared, 12);

  // A box outside its image makes that image a bad record, named with the JSON and the annotation.
  const std::string one = dir + "/one";
  fs::create_directories(one);
  test::write_file(one + "/a.png", image_codec::encode_png(cv::Mat(16, 16, CV_8UC3, cv::Scalar::all(90))));
  test::write_file(one + "/coco.json",
                   "{\"images\": [{\"id\": 1, \"file_name\": \"a.png\", \"height\": 16, \"width\": 16}, "
                   "{\"id\": 7, \"file_name\": \"a.png\", \"height\": 16, \"width\": 16}], "
                   "\"categories\": [{\"id\": 3, \"name\": \"cat\"}], \"annotations\": ["
                   "{\"id\": 4, \"image_id\": 1, \"category_id\": 3, \"bbox\": [2, 2, 5, 5]}, "
                   "{\"id\": 5, \"image_id\": 7, \"category_id\": 3, \"bbox\": [10, 10, 30, 4]}]}");
  auto damaged =
      build<Dataset>(Kind::dataset, "coco", {{"annotations", one + "/coco.json"}, {"target", std::string("boxes")}}, 0);
  const auto* damaged_fields = dynamic_cast<const FieldDataset*>(damaged.get());
  EXPECT_TRUE(at::equal(damaged_fields->get_with_fields(0, 0).fields.at(field_name::boxes).values,
                        at::tensor({2.f, 2.f, 7.f, 7.f}).view({1, 4})));
  try {
    damaged_fields->get_with_fields(1, 0);
    FAIL() << "a box outside its image passed";
  } catch (const BadRecord& e) {
    EXPECT_TRUE(test::contains(e.what(), "coco.json: annotation 5: bbox [10,10,30,4], expected a finite")) << e.what();
    EXPECT_TRUE(test::contains(e.what(), "inside image 7's 16x16")) << e.what();
  }
}

// convert --from coco --coco-target boxes packs each image's boxes beside it:
// an LMDB's records (format version 2) and shards' KEY.boxes.json give the
// samples and fields the coco dataset gives for the same seeds, and the same
// training run to the last bit.
TEST(Coco, BoxesConvertedToAnLmdbAndShardsAreTheCocoDatasetsSamples) {
  const std::string dir = test::temp_dir("coco-boxes-packed");
  ASSERT_EQ(std::system((test::python() + " " + test::source_dir() + "/scripts/data/make_scene_set.py " + dir +
                         "/set --train 16 --test 4 --size 64 > /dev/null")
                            .c_str()),
            0);
  for (const char* split : {"train", "test"})
    for (const char* to : {"lmdb", "webdataset"}) {
      const auto r = test::trainyard("convert --from coco --coco-target boxes --input " + dir + "/set/" + split +
                                     "/instances.json --encoding keep --to " + to + " --output " + dir + "/" + split +
                                     "." + to + " --quiet");
      ASSERT_EQ(r.exit_code, 0) << r.err;
    }
  const std::string shards = dir + "/train.webdataset/shard-000000.tar";
  std::map<std::string, Value> moves{{"target", std::string("boxes")},
                                     {"crop", std::string("random")},
                                     {"crop_size", std::vector<int64_t>{56, 52}},
                                     {"hflip", 0.5},
                                     {"rotate_degrees", 10.0},
                                     {"min_box_visible", 0.3}};
  const auto with = [&](std::map<std::string, Value> set, const std::string& key, const Value& value) {
    set[key] = value;
    return set;
  };
  auto coco = build<Dataset>(Kind::dataset, "coco", with(moves, "annotations", dir + "/set/train/instances.json"), 0);
  auto lmdb = build<Dataset>(Kind::dataset, "lmdb", with(moves, "path", dir + "/train.lmdb"), 0);
  auto tar =
      build<Dataset>(Kind::dataset, "webdataset", with(with(moves, "urls", shards), "num_classes", int64_t{10}), 0);
  EXPECT_EQ(lmdb->info().class_names, coco->info().class_names);
  EXPECT_EQ(lmdb->info().num_classes, 10);
  EXPECT_EQ(tar->info().num_classes, 10);
  ASSERT_EQ(lmdb->size(), 16);
  ASSERT_EQ(tar->size(), 16);
  int64_t boxes_seen = 0;
  for (int64_t i = 0; i < 16; ++i)
    for (uint64_t seed : {1u, 29u, 64u}) {
      const FieldExample want = dynamic_cast<const FieldDataset&>(*coco).get_with_fields(i, seed);
      for (const auto& packed : {lmdb, tar}) {
        const FieldExample got = dynamic_cast<const FieldDataset&>(*packed).get_with_fields(i, seed);
        EXPECT_TRUE(at::equal(got.example.input, want.example.input)) << i;
        EXPECT_TRUE(at::equal(got.example.target, want.example.target)) << i;
        for (const char* name : {field_name::boxes, field_name::box_labels, field_name::box_crowd, field_name::box_area,
                                 field_name::original_size, field_name::input_from_original})
          EXPECT_TRUE(at::equal(got.fields.at(name).values, want.fields.at(name).values))
              << "sample " << i << " seed " << seed << " " << name << ": " << got.fields.at(name).values << " against "
              << want.fields.at(name).values;
        EXPECT_FALSE(got.fields.count(field_name::image_id));  // packed records carry no COCO image id
      }
      boxes_seen += want.fields.at(field_name::boxes).values.size(0);
    }
  EXPECT_GT(boxes_seen, 48);

  // --resize scales the boxes and their areas with the image.
  auto r = test::trainyard("convert --from coco --coco-target boxes --input " + dir +
                           "/set/train/instances.json --resize 32x48 --output " + dir + "/small --quiet");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto whole = build<Dataset>(
      Kind::dataset, "coco",
      {{"annotations", dir + "/set/train/instances.json"}, {"target", std::string("boxes")}, {"min_box_size", 0.0}}, 0);
  auto small = build<Dataset>(Kind::dataset, "lmdb",
                              {{"path", dir + "/small"}, {"target", std::string("boxes")}, {"min_box_size", 0.0}}, 0);
  for (int64_t i = 0; i < 4; ++i) {
    const Fields a = dynamic_cast<const FieldDataset&>(*whole).get_with_fields(i, 0).fields;
    const Fields b = dynamic_cast<const FieldDataset&>(*small).get_with_fields(i, 0).fields;
    EXPECT_TRUE(at::allclose(b.at(field_name::boxes).values,
                             a.at(field_name::boxes).values * at::tensor({0.75f, 0.5f, 0.75f, 0.5f}), 0, 1e-4));
    EXPECT_TRUE(at::allclose(b.at(field_name::box_area).values, a.at(field_name::box_area).values * 0.375, 1e-6));
    EXPECT_TRUE(at::equal(b.at(field_name::original_size).values, at::tensor({32, 48}, at::kLong)));
  }

  // A detector trains the same from the JSON, the LMDB and the shards.
  const auto experiment = [&](const std::string& name, const std::string& train, const std::string& test) {
    const std::string file = dir + "/" + name + ".yaml";
    test::write_file(file, "name: " + name + "\ndataset:\n  train: {" + train +
                               ", target: boxes, hflip: 0.5, load_size: [48, 48]}\n  test: {" + test +
                               ", target: boxes, load_size: [48, 48]}\n"
                               "network: {plugin: centernet, depth: 2, width: 8, head_width: 16}\n"
                               "loss: {plugin: centernet_loss}\noptimizer: {plugin: adam, lr: 0.005}\n"
                               "meters: [{plugin: loss}, {plugin: coco_map, phases: [test]}]\n"
                               "loop: {epochs: 2, batch_per_device: 4, test_batch_per_device: 2}\n"
                               "distributed: {threads_per_process: 1}\n");
    return file;
  };
  std::vector<std::vector<double>> runs;
  for (const auto& [name, train, test] : std::vector<std::array<std::string, 3>>{
           {"json", "plugin: coco, annotations: set/train/instances.json",
            "plugin: coco, annotations: set/test/instances.json"},
           {"lmdb", "plugin: lmdb, path: train.lmdb", "plugin: lmdb, path: test.lmdb"},
           {"shards", "plugin: webdataset, urls: train.webdataset/shard-000000.tar, num_classes: 10",
            "plugin: webdataset, urls: test.webdataset/shard-000000.tar, num_classes: 10"}}) {
    r = test::trainyard("run " + experiment(name, train, test) + " --output-dir " + dir + "/runs");
    ASSERT_EQ(r.exit_code, 0) << name << "\n" << r.err;
    std::vector<double> values = test::series(dir + "/runs/" + name + "/metrics.jsonl", "test_loss");
    for (const char* key : {"test_ap", "test_ar100", "test_ap_small"}) {
      const auto more = test::series(dir + "/runs/" + name + "/metrics.jsonl", key);
      values.insert(values.end(), more.begin(), more.end());
    }
    ASSERT_EQ(values.size(), 8u) << name;
    runs.push_back(values);
  }
  EXPECT_EQ(runs[0], runs[1]) << "the coco dataset and the LMDB";
  EXPECT_EQ(runs[0], runs[2]) << "the coco dataset and the shards";
}

// Damaged boxes in a database or a shard are bad records naming the record
// and the box; a database of boxes and one without are each refused with
// the other target.
TEST(Coco, DamagedPackedBoxesAreBadRecordsAndTheTargetMustMatchTheDatabase) {
  const std::string dir = test::temp_dir("coco-boxes-damaged");
  fs::create_directories(dir + "/in");
  test::write_file(dir + "/in/a.png", image_codec::encode_png(cv::Mat(16, 20, CV_8UC3, cv::Scalar::all(90))));
  test::write_file(dir + "/in/coco.json",
                   "{\"images\": [{\"id\": 1, \"file_name\": \"a.png\", \"height\": 16, \"width\": 20}], "
                   "\"categories\": [{\"id\": 3, \"name\": \"cat\"}, {\"id\": 4, \"name\": \"dog\"}], "
                   "\"annotations\": [{\"id\": 4, \"image_id\": 1, \"category_id\": 4, \"bbox\": [2, 2, 5, 5], "
                   "\"segmentation\": [[2, 2, 7, 2, 7, 7, 2, 7]]}]}");
  auto r = test::trainyard("convert --from coco --coco-target boxes --input " + dir + "/in/coco.json --output " + dir +
                           "/db --quiet");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::map<std::string, Value> boxes{{"path", dir + "/db"}, {"target", std::string("boxes")}};
  auto data = build<Dataset>(Kind::dataset, "lmdb", boxes, 0);
  const auto& fields = dynamic_cast<const FieldDataset&>(*data);
  const FieldExample e = fields.get_with_fields(0, 0);
  EXPECT_TRUE(at::equal(e.fields.at(field_name::boxes).values, at::tensor({2.f, 2.f, 7.f, 7.f}).view({1, 4})));
  EXPECT_EQ(e.fields.at(field_name::box_labels).values.item<int64_t>(), 1);  // dog: the second category by id

  Record record;
  record.images.push_back({ImageEncoding::png, 16, 20, 3, test::read_file(dir + "/in/a.png")});
  const auto reason = [&](std::vector<float> values) {
    record.labels = {Label::boxes(std::move(values))};
    test::put_lmdb_record(dir + "/db", 0, encode_record(record));
    try {
      fields.get_with_fields(0, 0);
    } catch (const BadRecord& bad) {
      return std::string(bad.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(reason({2, 2, 21, 7, 0, 0, 25}),
            "record 0000000000: box 0: (2, 2, 21, 7), expected a box inside the image's 16x20 pixels");
  EXPECT_EQ(reason({2, 2, 7, 7, 0, 0, 25, 7, 2, 3, 7, 0, 0, 4}),
            "record 0000000000: box 1: (7, 2, 3, 7), expected finite x1, y1, x2, y2 with x1 < x2 and y1 < y2");
  EXPECT_EQ(reason({2, NAN, 7, 7, 0, 0, 25}),
            "record 0000000000: box 0: (2, nan, 7, 7), expected finite x1, y1, x2, y2 with x1 < x2 and y1 < y2");
  EXPECT_EQ(reason({2, 2, 7, 7, 2, 0, 25}), "record 0000000000: box 0: class 2, expected a class from 0 to 1");
  EXPECT_EQ(reason({2, 2, 7, 7, 0.5f, 0, 25}),
            "record 0000000000: box 0: class 0.500000, expected a class index (0, 1, ...)");
  EXPECT_EQ(reason({2, 2, 7, 7, 0, 2, 25}), "record 0000000000: box 0: crowd flag 2.000000, expected 0 or 1");
  EXPECT_EQ(reason({2, 2, 7, 7, 0, 0, 0}), "record 0000000000: box 0: area 0.000000, expected a finite area above 0");

  // The target must match what the database holds.
  const std::string exp = dir + "/e.yaml";
  const auto validate = [&](const std::string& dataset) {
    test::write_file(exp, "name: e\ndataset:\n  train: {" + dataset +
                              "}\nnetwork: {plugin: centernet, depth: 2, width: 4, head_width: 4}\n"
                              "loss: {plugin: centernet_loss}\noptimizer: {plugin: adam}\n");
    return test::trainyard("validate " + exp);
  };
  test::expect_one_error_line(validate("plugin: lmdb, path: db"),
                              "holds boxes (format version 2), and target is image");
  r = test::trainyard("convert --from coco --input " + dir + "/in/coco.json --output " + dir + "/masks --quiet");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  test::expect_one_error_line(validate("plugin: lmdb, path: masks, target: boxes"),
                              "/masks' holds no boxes (format version 1)");
  test::expect_one_error_line(
      test::trainyard("convert --from folder --coco-target boxes --input " + dir + "/in --output " + dir + "/x"),
      "--coco-target with --from folder");
  test::expect_one_error_line(
      test::trainyard("convert --from coco --coco-target box --input " + dir + "/in/coco.json --output " + dir + "/x"),
      "--coco-target 'box'");
  // An image of another size than its JSON entry: its boxes would be in the wrong pixels.
  std::string json = test::read_file(dir + "/in/coco.json");
  json.replace(json.find("\"width\": 20"), 11, "\"width\": 24");
  test::write_file(dir + "/in/wrong.json", json);
  test::expect_one_error_line(test::trainyard("convert --from coco --coco-target boxes --input " + dir +
                                              "/in/wrong.json --output " + dir + "/x"),
                              "a.png: 16x20 pixels, and " + dir + "/in/wrong.json says image 1 is 16x24");
  EXPECT_FALSE(fs::exists(dir + "/x"));

  // A shard's KEY.boxes.json of another form, or boxes without num_classes.
  r = test::trainyard("convert --from coco --coco-target boxes --input " + dir + "/in/coco.json --to webdataset " +
                      "--output " + dir + "/shards --quiet");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string shard = dir + "/shards/shard-000000.tar";
  test::expect_one_error_line(validate("plugin: webdataset, urls: " + shard + ", target: boxes"),
                              "target: boxes with num_classes: 0");
  const std::string tar = test::read_file(shard);
  const auto at = tar.find("\"labels\": [");
  ASSERT_NE(at, std::string::npos);
  std::string damaged = tar;
  damaged[at + 1] = 'L';  // "Labels": the member's size and checksum stay right
  test::write_file(shard, damaged);
  // The first sample is read as the dataset is built (for its shape): one error line.
  test::expect_one_error_line(validate("plugin: webdataset, urls: " + shard + ", target: boxes, num_classes: 2"),
                              shard + ": 000000000.boxes.json: \"labels\" missing or not a list");
}

TEST(Coco, InstancesJsonGivesTheSceneSetsOwnMasks) {
  // The scene set's generator writes each scene's exact mask (PNG) and its
  // COCO instances JSON (boxes, RLE per visible item, categories 1-10):
  // the coco dataset rasterizes the JSON into the same class ids, pixel for
  // pixel, and a U-Net experiment on it validates.
  const std::string dir = test::temp_dir("coco");
  const int scenes = 12;
  ASSERT_EQ(std::system((test::python() + " " + test::source_dir() + "/scripts/data/make_scene_set.py " + dir +
                         "/set --train " + std::to_string(scenes) + " --test 4 --size 64 > /dev/null")
                            .c_str()),
            0);
  auto data = build<Dataset>(Kind::dataset, "coco",
                             {{"annotations", dir + "/set/train/instances.json"}, {"target", std::string("mask")}}, 0);
  ASSERT_EQ(data->size(), scenes);
  EXPECT_EQ(data->info().num_classes, 11);
  EXPECT_EQ(data->info().class_names.at(1), "t-shirt");
  for (int64_t i = 0; i < scenes; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "%06lld", static_cast<long long>(i));
    const std::string bytes = test::read_file(dir + "/set/train/masks/" + name + ".png");
    const cv::Mat truth = image_codec::decode(bytes.data(), bytes.size());
    const at::Tensor mask = data->get(i).target;
    ASSERT_EQ(mask.sizes(), (std::vector<int64_t>{64, 64}));
    const at::Tensor expected = at::from_blob(truth.data, {truth.rows, truth.cols}, at::kByte).to(at::kLong);
    EXPECT_TRUE(at::equal(mask, expected)) << "scene " << name;
  }

  // The same JSON with each RLE compressed by pycocotools' mask.encode (counts as strings): the same masks.
  const std::string compressed = dir + "/set/train/compressed.json";
  const auto encoded =
      test::run_command(test::python() +
                        " -c 'import json, sys; from pycocotools import mask as M\n"
                        "d = json.load(open(sys.argv[1]))\n"
                        "for a in d[\"annotations\"]:\n"
                        "    s = a[\"segmentation\"]; r = M.frPyObjects(s, *s[\"size\"])\n"
                        "    a[\"segmentation\"] = {\"size\": s[\"size\"], \"counts\": r[\"counts\"].decode()}\n"
                        "json.dump(d, open(sys.argv[2], \"w\"))' " +
                        dir + "/set/train/instances.json " + compressed);
  ASSERT_EQ(encoded.exit_code, 0) << encoded.out << encoded.err;
  ASSERT_TRUE(test::contains(test::read_file(compressed), "\"counts\": \""));
  auto from_strings =
      build<Dataset>(Kind::dataset, "coco", {{"annotations", compressed}, {"target", std::string("mask")}}, 0);
  for (int64_t i = 0; i < scenes; ++i)
    EXPECT_TRUE(at::equal(from_strings->get(i).target, data->get(i).target)) << "scene " << i << ", compressed RLE";

  // convert --from coco paints the same masks into an LMDB's records and into shards' KEY.mask.png.
  for (const std::string to : {"lmdb", "webdataset"}) {
    const std::string written = dir + "/converted-" + to;
    const auto c = test::trainyard("convert --from coco --input " + dir + "/set/train/instances.json --output " +
                                   written + " --to " + to + " --encoding keep --quiet");
    ASSERT_EQ(c.exit_code, 0) << c.out << c.err;
    std::map<std::string, Value> options{{"target", std::string("mask")}, {"mask_classes", int64_t{11}}};
    if (to == "lmdb")
      options["path"] = written;
    else
      options["urls"] = written + "/shard-000000.tar";
    auto converted = build<Dataset>(Kind::dataset, to, options, 0);
    ASSERT_EQ(converted->size(), scenes);
    for (int64_t i = 0; i < scenes; ++i) {
      const Example e = converted->get(i);
      EXPECT_TRUE(at::equal(e.target, data->get(i).target)) << to << " scene " << i;
      EXPECT_TRUE(at::equal(e.input, data->get(i).input)) << to << " scene " << i << ": the JPEG's own bytes";
    }
  }

  // Polygons: a pixel is the polygon's where its centre is inside, as COCO's
  // areas count (an 8x8 square); a crowd region is the ignore value over any instance.
  const std::string one = dir + "/one";
  fs::create_directories(one);
  test::write_file(one + "/a.png", image_codec::encode_png(cv::Mat(16, 16, CV_8UC3, cv::Scalar::all(90))));
  const auto json = [&](const std::string& annotations) {
    test::write_file(one + "/coco.json",
                     "{\"images\": [{\"id\": 7, \"file_name\": \"a.png\", \"height\": 16, \"width\": 16}], "
                     "\"categories\": [{\"id\": 3, \"name\": \"cat\"}, {\"id\": 9, \"name\": \"dog\"}], "
                     "\"annotations\": [" +
                         annotations + "]}");
    return one + "/coco.json";
  };
  const std::string square =
      "{\"id\": 1, \"image_id\": 7, \"category_id\": 9, \"segmentation\": [[2, 2, 10, 2, 10, 10, 2, 10]]}";
  const std::string crowd =
      "{\"id\": 2, \"image_id\": 7, \"category_id\": 3, \"iscrowd\": 1, "
      "\"segmentation\": {\"counts\": [36, 4, 216], \"size\": [16, 16]}}";
  auto small = build<Dataset>(Kind::dataset, "coco",
                              {{"annotations", json(square + ", " + crowd)}, {"target", std::string("mask")}}, 0);
  const at::Tensor m = small->get(0).target;
  EXPECT_EQ((m == 2).sum().item<int64_t>(), 64 - 4) << "dog: 8x8 pixels, 4 of them under the crowd";
  EXPECT_EQ(m[4][2].item<int64_t>(), 255) << "row 4 of column 2: the RLE runs down the columns";
  EXPECT_EQ(m[2][4].item<int64_t>(), 2) << "row 2 of column 4: not the crowd's";
  EXPECT_EQ(m[1][1].item<int64_t>(), 0);
  EXPECT_EQ(m[9][9].item<int64_t>(), 2);
  EXPECT_EQ(m[10][10].item<int64_t>(), 0);

  // Bad input: one line naming the file and the id.
  const std::string exp = dir + "/coco.yaml";
  const auto validate = [&](const std::string& file) {
    test::write_file(exp, "name: coco\ndataset:\n  train: {plugin: coco, annotations: " + file +
                              ", target: mask}\nnetwork: {plugin: unet, depth: 2, width: 4}\n"
                              "loss: {plugin: cross_entropy, ignore_index: 255}\noptimizer: {plugin: adam}\n"
                              "loop: {epochs: 1, batch_per_device: 1}\n");
    return test::trainyard("validate " + exp);
  };
  const auto fine = validate(json(square + ", " + crowd));
  EXPECT_EQ(fine.exit_code, 0) << fine.err;
  test::expect_one_error_line(validate(json("{\"id\": 4, \"image_id\": 7, \"category_id\": 9, "
                                            "\"segmentation\": [[1, 1, 5, 5]]}")),
                              one +
                                  "/coco.json: annotation 4: a polygon of 4 values; expected x, y pairs of 3 points "
                                  "or more");
  test::expect_one_error_line(validate(json(square + ", " + square)), one + "/coco.json: annotation 1 appears twice");
  // convert reads the same file the same way: one line naming it and the id, nothing written.
  test::expect_one_error_line(test::trainyard("convert --from coco --input " + json(square + ", " + square) +
                                              " --output " + dir + "/never --quiet"),
                              "convert: " + one + "/coco.json: annotation 1 appears twice");
  EXPECT_FALSE(fs::exists(dir + "/never"));
  // A compressed RLE cut inside a count (a last "P" has 0x20 set: more to come), and one of 100 pixels.
  test::expect_one_error_line(validate(json("{\"id\": 6, \"image_id\": 7, \"category_id\": 9, "
                                            "\"segmentation\": {\"counts\": \"T3P\", \"size\": [16, 16]}}")),
                              one + "/coco.json: annotation 6: a compressed RLE that ends inside a count");
  test::expect_one_error_line(validate(json("{\"id\": 6, \"image_id\": 7, \"category_id\": 9, "
                                            "\"segmentation\": {\"counts\": \"T3\", \"size\": [16, 16]}}")),
                              one + "/coco.json: annotation 6: RLE counts that add up to");
  test::expect_one_error_line(
      validate(json("{\"id\": 5, \"image_id\": 8, \"category_id\": 9, \"segmentation\": [[1, 1, 5, 5, 1, 5]]}")),
      one + "/coco.json: annotation 5 names image 8; expected an id of the images list");
  std::string huge = test::read_file(json(square));
  huge.replace(huge.find("\"height\": 16"), 12, "\"height\": 4294967312");
  test::write_file(one + "/coco.json", huge);
  test::expect_one_error_line(
      validate(one + "/coco.json"),
      one + "/coco.json: image 7: 4294967312x16; expected a height and width from 1 to 1048576");
  fs::remove(one + "/a.png");
  test::expect_one_error_line(validate(json(square)), one + "/coco.json: image 7: " + one + "/a.png does not exist");
}

}  // namespace
}  // namespace trainyard::host
