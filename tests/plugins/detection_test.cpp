// Detection: the coco_map meter against pycocotools and faster-coco-eval.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "formats/metrics.h"
#include "support/built_component.h"
#include "support/support.h"
#include "trainyard/error.h"
#include "trainyard/fields.h"
#include "trainyard/loss.h"
#include "trainyard/meter.h"
#include "trainyard/network.h"

namespace trainyard::host {
namespace {

// One image's ground truth and detections, in original pixels.
struct Scene {
  int64_t id = 0;
  int width = 0, height = 0;
  std::vector<std::array<double, 4>> truth;  ///< x1, y1, x2, y2
  std::vector<int64_t> truth_labels, crowd;
  std::vector<std::array<double, 4>> found;
  std::vector<int64_t> found_labels;
  std::vector<double> scores;
};

// Seeded scenes with every case COCOeval distinguishes: small, medium and
// large boxes, crowd regions, misses, false positives, wrong classes, tied
// scores, an image with more than 100 detections, images without ground truth.
std::vector<Scene> scenes(int count) {
  std::mt19937_64 rng(51);
  auto uniform = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); };
  std::vector<Scene> out;
  for (int i = 0; i < count; ++i) {
    Scene s;
    s.id = 1000 + 7 * i;
    s.width = 320, s.height = 240;
    const int boxes = i % 9 == 4 ? 0 : static_cast<int>(uniform(1, 7));
    for (int k = 0; k < boxes; ++k) {
      const double w = std::exp(uniform(std::log(6.0), std::log(200.0))), h = w * uniform(0.5, 1.5);
      const double x = uniform(0, s.width - std::min(w, s.width - 1.0)),
                   y = uniform(0, s.height - std::min(h, s.height - 1.0));
      s.truth.push_back({x, y, std::min<double>(s.width, x + w), std::min<double>(s.height, y + h)});
      s.truth_labels.push_back(static_cast<int64_t>(uniform(0, 3)));
      s.crowd.push_back(uniform(0, 1) < 0.08);
      if (uniform(0, 1) < 0.75) {  // found, with some error in place and class
        const double j = uniform(0, 0.25) * w;
        auto b = s.truth.back();
        for (double& v : b) v += uniform(-j, j);
        b[0] = std::clamp(b[0], 0.0, s.width - 2.0), b[1] = std::clamp(b[1], 0.0, s.height - 2.0);
        b[2] = std::clamp(b[2], b[0] + 1, double(s.width)), b[3] = std::clamp(b[3], b[1] + 1, double(s.height));
        s.found.push_back(b);
        s.found_labels.push_back(uniform(0, 1) < 0.1 ? (s.truth_labels.back() + 1) % 3 : s.truth_labels.back());
        s.scores.push_back(std::round(uniform(0.05, 1) * 50) / 50);  // ties across and within images
      }
    }
    const int false_positives = i == 3 ? 120 : static_cast<int>(uniform(0, 4));
    for (int k = 0; k < false_positives; ++k) {
      const double x = uniform(0, s.width - 20), y = uniform(0, s.height - 20);
      s.found.push_back({x, y, x + uniform(4, 19), y + uniform(4, 19)});
      s.found_labels.push_back(static_cast<int64_t>(uniform(0, 3)));
      s.scores.push_back(std::round(uniform(0.01, 0.9) * 50) / 50);
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::string number(double v) {
  std::ostringstream o;
  o.precision(17);
  o << v;
  return o.str();
}

std::string xywh(const std::array<double, 4>& b) {
  return "[" + number(b[0]) + ", " + number(b[1]) + ", " + number(b[2] - b[0]) + ", " + number(b[3] - b[1]) + "]";
}

// The batch's fields as a detection dataset and the host give them: ground
// truth in input pixels (the original scaled by 0.5) with the geometry to map
// it back, detections already in original pixels.
Fields batch_fields(const std::vector<Scene>& part) {
  std::vector<Fields> samples;
  std::vector<int64_t> indices;
  for (const Scene& s : part) {
    Fields f;
    const auto n = static_cast<int64_t>(s.truth.size()), m = static_cast<int64_t>(s.found.size());
    std::vector<float> truth, found, scores;
    for (const auto& b : s.truth)
      for (double v : b) truth.push_back(static_cast<float>(v * 0.5));
    for (const auto& b : s.found)
      for (double v : b) found.push_back(static_cast<float>(v));
    for (double v : s.scores) scores.push_back(static_cast<float>(v));
    f[field_name::boxes] = ragged(at::tensor(truth, at::kFloat).view({n, 4}));
    f[field_name::box_labels] = ragged(at::tensor(s.truth_labels, at::kLong));
    f[field_name::box_crowd] = ragged(at::tensor(s.crowd, at::kLong));
    f[field_name::image_id] = meta(at::scalar_tensor(s.id, at::kLong));
    f[field_name::input_from_original] = meta(at::tensor({0.5, 0.0, 0.0, 0.0, 0.5, 0.0}, at::kDouble).view({2, 3}));
    f[field_name::detected_boxes] = ragged(at::tensor(found, at::kFloat).view({m, 4}));
    f[field_name::detected_labels] = ragged(at::tensor(s.found_labels, at::kLong));
    f[field_name::detected_scores] = ragged(at::tensor(scores, at::kFloat));
    samples.push_back(std::move(f));
    indices.push_back(static_cast<int64_t>(indices.size()));
  }
  return collate_fields(samples, indices);
}

void feed(Meter& meter, const std::vector<Scene>& part) {
  const Fields f = batch_fields(part);
  Batch batch{at::zeros({static_cast<int64_t>(part.size()), 1}), at::zeros({static_cast<int64_t>(part.size())}), {}};
  for (size_t k = 0; k < part.size(); ++k) batch.indices.push_back(static_cast<int64_t>(k));
  const at::Tensor none = at::zeros({});
  dynamic_cast<FieldMeter&>(meter).update_with_fields({batch, batch.input, none}, f);
}

std::vector<double> parse_list(const std::string& line) {
  std::vector<double> v;
  std::string cleaned = line;
  for (char& c : cleaned)
    if (c == '[' || c == ']' || c == ',') c = ' ';
  std::istringstream in(cleaned);
  for (double x; in >> x;) v.push_back(x);
  return v;
}

TEST(CocoMap, TheTwelveStatisticsEqualPycocotoolsAndFasterCocoEval) {
  const std::vector<Scene> all = scenes(60);
  // The files pycocotools reads: float32 boxes as the meter sees them.
  const std::string dir = test::temp_dir("coco-map");
  std::ofstream truth(dir + "/truth.json"), results(dir + "/results.json");
  truth
      << "{\"categories\": [{\"id\": 1, \"name\": \"a\"}, {\"id\": 2, \"name\": \"b\"}, {\"id\": 3, \"name\": \"c\"}], "
         "\"images\": [";
  for (size_t i = 0; i < all.size(); ++i)
    truth << (i ? ", " : "") << "{\"id\": " << all[i].id << ", \"width\": " << all[i].width
          << ", \"height\": " << all[i].height << "}";
  truth << "], \"annotations\": [";
  results << "[";
  int64_t annotation = 0, result = 0;
  for (const Scene& s : all) {
    for (size_t k = 0; k < s.truth.size(); ++k) {
      std::array<double, 4> b;
      for (int c = 0; c < 4; ++c) b[c] = static_cast<double>(static_cast<float>(s.truth[k][c] * 0.5)) * 2;
      ++annotation;
      truth << (annotation > 1 ? ", " : "") << "{\"id\": " << annotation << ", \"image_id\": " << s.id
            << ", \"category_id\": " << s.truth_labels[k] + 1 << ", \"bbox\": " << xywh(b)
            << ", \"area\": " << number((b[2] - b[0]) * (b[3] - b[1])) << ", \"iscrowd\": " << s.crowd[k] << "}";
    }
    for (size_t k = 0; k < s.found.size(); ++k) {
      std::array<double, 4> b;
      for (int c = 0; c < 4; ++c) b[c] = static_cast<double>(static_cast<float>(s.found[k][c]));
      results << (result++ ? ", " : "") << "{\"image_id\": " << s.id << ", \"category_id\": " << s.found_labels[k] + 1
              << ", \"bbox\": " << xywh(b) << ", \"score\": " << number(static_cast<float>(s.scores[k])) << "}";
    }
  }
  truth << "]}";
  results << "]";
  truth.close();
  results.close();
  const auto r =
      test::run_command(test::python() + " " + test::source_dir() + "/tests/plugins/coco_eval_reference.py " + dir +
                        "/truth.json " + dir + "/results.json");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto lines = test::nonempty_lines(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  const std::vector<double> pycocotools = parse_list(lines[0]), faster = parse_list(lines[1]);
  ASSERT_EQ(pycocotools.size(), 12u);

  // One process, in batches of 8.
  auto meter = test::build_builtin<Meter>(Kind::meter, "coco_map", {}, 3);
  meter->reset();
  for (size_t i = 0; i < all.size(); i += 8)
    feed(*meter, std::vector<Scene>(all.begin() + i, all.begin() + std::min(all.size(), i + 8)));
  const auto values = meter->values();
  const char* names[12] = {"ap",  "ap50", "ap75",  "ap_small", "ap_medium", "ap_large",
                           "ar1", "ar10", "ar100", "ar_small", "ar_medium", "ar_large"};
  for (int s = 0; s < 12; ++s) {
    EXPECT_NEAR(values.at(names[s]), pycocotools[s], 1e-4) << names[s] << " against pycocotools";
    EXPECT_NEAR(values.at(names[s]), faster[s], 1e-4) << names[s] << " against faster-coco-eval";
  }
  EXPECT_GT(values.at("ap50"), 0.3);  // a real mixture of hits and misses, not all zeros
  EXPECT_LT(values.at("ap"), 0.9);

  // Two ranks: each holds half the batches; the host gives one the rows of
  // both (SampleMeter, rank order) before values(): the same statistics.
  auto first = test::build_builtin<Meter>(Kind::meter, "coco_map", {}, 3);
  auto second = test::build_builtin<Meter>(Kind::meter, "coco_map", {}, 3);
  for (size_t i = 0; i < all.size(); i += 8)
    feed(i / 8 % 2 ? *second : *first, std::vector<Scene>(all.begin() + i, all.begin() + std::min(all.size(), i + 8)));
  auto& rows = dynamic_cast<SampleMeter&>(*first);
  rows.set_rows(at::cat({rows.rows(), dynamic_cast<SampleMeter&>(*second).rows()}));
  for (const auto& [name, value] : first->values()) EXPECT_DOUBLE_EQ(value, values.at(name)) << name;
}

// An output that says exactly where two boxes are: each centre cell's
// heatmap logit high in its class (all else low), the size and offset there.
struct Exact {
  at::Tensor output;
  Fields fields;
};
Exact exact_output(int64_t classes) {
  // Input 32x32: a grid of 8x8 cells of 4 pixels.
  const std::vector<std::array<float, 4>> boxes{{4, 6, 20, 14}, {16, 16, 30, 31}};
  const std::vector<int64_t> labels{2, 0};
  at::Tensor out = at::full({1, classes + 4, 8, 8}, -12.0f);
  out.narrow(1, classes, 4).zero_();
  for (size_t i = 0; i < boxes.size(); ++i) {
    const auto& b = boxes[i];
    const double cx = (b[0] + b[2]) / 2 / 4, cy = (b[1] + b[3]) / 2 / 4;
    const auto col = static_cast<int64_t>(cx), row = static_cast<int64_t>(cy);
    out[0][labels[i]][row][col] = 12.0f;
    out[0][classes][row][col] = (b[2] - b[0]) / 4;
    out[0][classes + 1][row][col] = (b[3] - b[1]) / 4;
    out[0][classes + 2][row][col] = static_cast<float>(cx - col);
    out[0][classes + 3][row][col] = static_cast<float>(cy - row);
  }
  Exact e{out, {}};
  e.fields[field_name::boxes] = ragged(at::tensor(std::vector<float>{4, 6, 20, 14, 16, 16, 30, 31}).view({2, 4}));
  e.fields[field_name::box_labels] = ragged(at::tensor(labels, at::kLong));
  e.fields = collate_fields({e.fields}, {0});
  return e;
}

TEST(CenterNet, DecodeReadsBoxesBackFromPeaksSizesAndOffsets) {
  auto net = test::build_builtin<Network>(Kind::network, "centernet", {{"depth", int64_t{2}}, {"width", int64_t{4}}}, 3,
                                          {3, 32, 32});
  const auto* detector = dynamic_cast<const Detector*>(net.get());
  ASSERT_NE(detector, nullptr);
  const Batch batch{at::zeros({1, 3, 32, 32}), at::zeros({1}), {0}};
  EXPECT_EQ(net->forward(batch).sizes(), (at::IntArrayRef{1, 7, 8, 8}));  // 3 heatmaps, size, offset at stride 4
  const Exact exact = exact_output(3);
  const Fields found = detector->decode(exact.output, batch);
  // Two peaks above the 0.01 threshold (sigmoid(-12) is below it), highest first.
  ASSERT_EQ(found.at(field_name::detected_boxes).counts.item<int64_t>(), 2);
  const at::Tensor boxes = found.at(field_name::detected_boxes).values;
  const at::Tensor labels = found.at(field_name::detected_labels).values;
  for (int64_t i = 0; i < 2; ++i) {
    const int64_t which = labels[i].item<int64_t>() == 2 ? 0 : 1;
    EXPECT_TRUE(at::allclose(boxes[i], exact.fields.at(field_name::boxes).values[which], 0, 1e-4))
        << boxes[i] << " against " << exact.fields.at(field_name::boxes).values[which];
  }
  EXPECT_NEAR(found.at(field_name::detected_scores).values[0].item<float>(), 1 / (1 + std::exp(-12.0)), 1e-6);
}

TEST(CenterNet, LossIsSmallAtTheExactOutputAndItsL1PartsAreMeansPerObject) {
  auto loss = test::build_builtin<Loss>(Kind::loss, "centernet_loss", {}, 3);
  auto* with_fields = dynamic_cast<FieldLoss*>(loss.get());
  ASSERT_NE(with_fields, nullptr);
  const Batch batch{at::zeros({1, 3, 32, 32}), at::zeros({1}), {0}};
  const Exact exact = exact_output(3);
  const double at_exact = with_fields->compute_with_fields(exact.output, batch, exact.fields).item<double>();
  // The focal part only: the heatmap's Gaussian shoulders around each peak cost a little.
  EXPECT_LT(at_exact, 0.5);
  // Every size 1 cell too large: 2 objects x 2 values x 1 cell x 0.1 / 2 objects.
  at::Tensor wrong = exact.output.clone();
  wrong.narrow(1, 3, 2).add_(at::where(exact.output.narrow(1, 3, 2).ne(0), 1.0f, 0.0f));
  const double at_wrong = with_fields->compute_with_fields(wrong, batch, exact.fields).item<double>();
  EXPECT_NEAR(at_wrong - at_exact, 0.2, 1e-5);
  // Without boxes: one error naming what is missing.
  EXPECT_THROW(with_fields->compute_with_fields(exact.output, batch, {}), ConfigError);
}

// A small detector trained on two ranks: the ranks' coco_map is what one
// process's eval gives on the saved weights, and predict's results.json,
// scored by pycocotools against the test set's JSON, gives it too (boxes
// back through the resize to each image's pixels, COCO's ids).
TEST(Detection, TwoRanksEvalAndPredictsResultsInPycocotoolsGiveOneMap) {
  const std::string dir = test::temp_dir("detect-ranks");
  ASSERT_EQ(std::system((test::python() + " " + test::source_dir() + "/scripts/data/make_scene_set.py " + dir +
                         "/set --train 48 --test 8 --size 64 > /dev/null")
                            .c_str()),
            0);
  const std::string exp = dir + "/detect.yaml";
  // load_size: the boxes go back through a 64 -> 48 resize.
  test::write_file(exp,
                   "name: detect\n"
                   "dataset:\n"
                   "  train: {plugin: coco, annotations: set/train/instances.json, target: boxes, hflip: 0.5,"
                   " load_size: [48, 48]}\n"
                   "  test: {plugin: coco, annotations: set/test/instances.json, target: boxes, load_size: [48, 48]}\n"
                   "network: {plugin: centernet, depth: 2, width: 8, head_width: 16}\n"
                   "loss: {plugin: centernet_loss}\n"
                   "optimizer: {plugin: adam, lr: 0.005}\n"
                   "meters: [{plugin: loss}, {plugin: coco_map, phases: [test]}]\n"
                   "loop: {epochs: 12, batch_per_device: 4, test_batch_per_device: 2}\n"
                   "distributed: {threads_per_process: 1}\n");
  const std::string out = dir + "/out";
  const auto r = test::trainyard("run " + exp + " --output-dir " + out + " --nproc-per-node 2");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::map<std::string, double> two_ranks;
  for (const auto& e : read_events(out + "/detect/metrics.jsonl"))
    if (e.phase == "test")
      for (const auto& [k, v] : e.values) two_ranks[k] = v;
  const auto e = test::trainyard("eval " + exp + " --output-dir " + out + " --output " + dir + "/eval.json");
  ASSERT_EQ(e.exit_code, 0) << e.out << e.err;
  const auto one = nlohmann::json::parse(test::read_file(dir + "/eval.json"));
  const auto& values = one.contains("values") ? one["values"] : one;
  const char* names[12] = {"ap",  "ap50", "ap75",  "ap_small", "ap_medium", "ap_large",
                           "ar1", "ar10", "ar100", "ar_small", "ar_medium", "ar_large"};
  for (const char* name : names) {
    const std::string key = std::string("test_") + name;
    ASSERT_TRUE(two_ranks.count(key)) << key;
    ASSERT_TRUE(values.contains(key)) << one.dump();
    EXPECT_NEAR(two_ranks.at(key), values[key].get<double>(), 1e-9) << key << ": 2 ranks against 1 process";
  }
  // A model that finds something, so that the values compared are not all
  // zeros. Its level depends on the CPU's kernels (this tiny model's 12
  // epochs reached AR@100 0.018 on an AVX2-only AMD EPYC, more on AVX-512),
  // so the bar is any match at all.
  EXPECT_GT(values["test_ar100"].get<double>(), 0.0) << "a model that finds something";
  const std::string summary = test::read_file(out + "/detect/summary.json");
  for (const char* name : {"test_ap\"", "test_ap50", "test_ap75", "test_ap_small", "test_ar100", "test_ar_large"})
    EXPECT_TRUE(test::contains(summary, name)) << name << " not in " << summary;

  const auto p = test::trainyard("predict " + exp + " --output-dir " + out + " --input " + dir +
                                 "/set/test/images --output " + dir + "/pred");
  ASSERT_EQ(p.exit_code, 0) << p.out << p.err;
  const auto c =
      test::run_command(test::python() + " " + test::source_dir() + "/tests/plugins/coco_eval_reference.py " + dir +
                        "/set/test/instances.json " + dir + "/pred/results.json");
  ASSERT_EQ(c.exit_code, 0) << c.out << c.err;
  const std::vector<double> pycocotools = parse_list(test::nonempty_lines(c.out).at(0));
  ASSERT_EQ(pycocotools.size(), 12u) << c.out;
  for (int s = 0; s < 12; ++s)
    EXPECT_NEAR(pycocotools[s], values[std::string("test_") + names[s]].get<double>(), 1e-4)
        << names[s] << ": predict's results.json in pycocotools against eval's coco_map";
  // images.json lists the images (COCO's ids, their own sizes) for loadRes; the CSV has a row per detection.
  const auto listing = nlohmann::json::parse(test::read_file(dir + "/pred/images.json"));
  const auto truth = nlohmann::json::parse(test::read_file(dir + "/set/test/instances.json"));
  ASSERT_EQ(listing["images"].size(), truth["images"].size());
  EXPECT_EQ(listing["images"][0]["id"], truth["images"][0]["id"]);
  EXPECT_EQ(listing["images"][0]["width"], 64);
  EXPECT_EQ(listing["categories"][3]["id"], truth["categories"][3]["id"]);
  const auto results = nlohmann::json::parse(test::read_file(dir + "/pred/results.json"));
  EXPECT_EQ(test::nonempty_lines(test::read_file(dir + "/pred/predictions.csv")).size(), results.size() + 1);
  // An existing folder is refused, as is an LMDB input.
  const auto again = test::trainyard("predict " + exp + " --output-dir " + out + " --input " + dir +
                                     "/set/test/images --output " + dir + "/pred");
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_TRUE(test::contains(again.err, "error: predict: --output " + dir + "/pred exists")) << again.err;

  // Images no annotation file lists are numbered 1 to N in path order; images.json lets loadRes read them.
  std::filesystem::create_directories(dir + "/new");
  std::filesystem::copy_file(dir + "/set/test/images/000003.jpg", dir + "/new/b.jpg");
  std::filesystem::copy_file(dir + "/set/test/images/000005.jpg", dir + "/new/a.jpg");
  const auto n = test::trainyard("predict " + exp + " --output-dir " + out + " --input " + dir + "/new --output " +
                                 dir + "/pred-new");
  ASSERT_EQ(n.exit_code, 0) << n.out << n.err;
  const auto fresh = nlohmann::json::parse(test::read_file(dir + "/pred-new/images.json"));
  ASSERT_EQ(fresh["images"].size(), 2u);
  EXPECT_EQ(fresh["images"][0]["file_name"], "a.jpg");
  EXPECT_EQ(fresh["images"][0]["id"], 1);
  const auto loaded = test::run_command(test::python() +
                                        " -c 'import sys; from pycocotools.coco import COCO; "
                                        "print(len(COCO(sys.argv[1]).loadRes(sys.argv[2]).getAnnIds()))' " +
                                        dir + "/pred-new/images.json " + dir + "/pred-new/results.json");
  ASSERT_EQ(loaded.exit_code, 0) << loaded.out << loaded.err;
  EXPECT_EQ(test::nonempty_lines(loaded.out).back(),
            std::to_string(nlohmann::json::parse(test::read_file(dir + "/pred-new/results.json")).size()));

  // export names the task, the classes' COCO ids and the decode's threshold beside the weights.
  const auto x = test::trainyard("export " + exp + " --output-dir " + out + " --format safetensors --output " + dir +
                                 "/detector.safetensors");
  ASSERT_EQ(x.exit_code, 0) << x.out << x.err;
  const auto task = nlohmann::json::parse(test::read_file(dir + "/detector.safetensors.json"));
  EXPECT_EQ(task["task"], "detection");
  EXPECT_EQ(task["category_ids"].size(), 10u);
  EXPECT_EQ(task["category_ids"][0], truth["categories"][0]["id"]);
  EXPECT_TRUE(task.contains("score_threshold"));
}

}  // namespace
}  // namespace trainyard::host
