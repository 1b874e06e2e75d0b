// The LR finder: suggestions on real training, the state put back, the files.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>
#include <cmath>
#include <filesystem>

#include "config/experiment.h"
#include "plugins/library_loader.h"
#include "run/lr_finder.h"
#include "support/support.h"
#include "train/components.h"
#include "train/epoch_loop.h"

namespace trainyard::host {
namespace {

struct Finder {
  Experiment e;
  Context context;
  std::unique_ptr<EpochLoop> trainer;
  Finder() {
    const std::string path = test::temp_dir("exp") + "/lrf.yaml";
    test::write_file(path, test::synthetic_experiment("lrf"));
    e = validate_experiment(read_experiment(path, {}), test::builtin_registry());
    context.seed = e.seed;
    torch::manual_seed(e.seed);
    Components c = build_components(e, context);
    trainer = std::make_unique<EpochLoop>(e, std::move(c), context, RunPaths(test::temp_dir("never-written")));
  }
};

TEST(LrFinder, RestartModeSuggestsASensibleRateAndPutsEverythingBack) {
  Finder s;
  std::vector<at::Tensor> before;
  for (const auto& p : s.trainer->network().parameters()) before.push_back(p.detach().clone());
  torch::manual_seed(123);
  const at::Tensor draw_before = at::rand({4});  // what the generator gives next, finder or not
  torch::manual_seed(123);
  LrFinderOptions o;
  o.min_lr = 1e-4;
  o.max_lr = 10;
  o.num_runs = 11;
  o.iters_per_run = 12;
  LrFinderResult r = find_learning_rate(*s.trainer, nullptr, o, false);
  const at::Tensor draw_after = at::rand({4});
  ASSERT_GE(r.points.size(), 5u);
  ASSERT_LE(r.points.size(), 11u);
  ASSERT_TRUE(r.suggestion.has_value()) << r.problem;
  // SGD with momentum 0.9 on this problem trains well at 0.05 (the experiment's rate) and diverges above 1.
  EXPECT_GE(*r.suggestion, 1e-2);
  EXPECT_LE(*r.suggestion, 1.0);
  // Rates above 1 diverge: the first that did is the last tried.
  EXPECT_TRUE(r.diverged);
  EXPECT_TRUE(r.points.back().diverged);
  EXPECT_GE(r.points.back().lr, 1.0);
  for (size_t i = 0; i + 1 < r.points.size(); ++i) EXPECT_FALSE(r.points[i].diverged) << i;
  // Untouched: weights, optimizer state and rates, random generator.
  auto after = s.trainer->network().parameters();
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(after[i].equal(before[i])) << i;
  EXPECT_TRUE(s.trainer->optimizer().state().empty());
  EXPECT_DOUBLE_EQ(s.trainer->optimizer().param_groups()[0].options().get_lr(), 0.05);
  EXPECT_TRUE(draw_after.equal(draw_before));
}

TEST(LrFinder, SweepModeStopsWhenTheLossDivergesAndSuggestsBeforeTheMinimum) {
  Finder s;
  LrFinderOptions o;
  o.mode = "sweep";
  o.min_lr = 1e-4;
  o.max_lr = 100;
  o.iters = 120;
  LrFinderResult r = find_learning_rate(*s.trainer, nullptr, o, false);
  EXPECT_TRUE(r.diverged);
  EXPECT_LT(r.points.size(), 120u);
  ASSERT_TRUE(r.suggestion.has_value()) << r.problem;
  EXPECT_GE(*r.suggestion, 1e-3);
  EXPECT_LE(*r.suggestion, 1.0);
}

TEST(LrFinder, AFlatCurveIsCalledUnusable) {
  LrFinderResult flat;
  for (int i = 0; i < 10; ++i) flat.points.push_back({1e-7 * (i + 1), 1.3, 1.3});
  suggest_learning_rate(flat, "restart");
  EXPECT_FALSE(flat.suggestion.has_value());
  EXPECT_TRUE(test::contains(flat.problem, "unusable")) << flat.problem;
  LrFinderResult nan;
  nan.points.push_back({1e-3, std::nan(""), std::nan("")});
  nan.points.push_back({1e-2, 1.0, 1.0});
  suggest_learning_rate(nan, "sweep");
  EXPECT_FALSE(nan.suggestion.has_value());
  LrFinderResult edge;  // lowest at the largest rate: suggested, with a warning
  for (int i = 0; i < 6; ++i) edge.points.push_back({std::pow(10.0, i - 6), 2.0 - 0.2 * i, 2.0 - 0.2 * i});
  suggest_learning_rate(edge, "restart");
  ASSERT_TRUE(edge.suggestion.has_value());
  EXPECT_DOUBLE_EQ(*edge.suggestion, 1e-1);
  EXPECT_TRUE(test::contains(edge.problem, "raise --max-lr")) << edge.problem;
}

TEST(LrFinder, CommandWritesCsvSvgAndJsonAndNoRunDirectory) {
  const std::string dir = test::temp_dir("cli");
  test::write_file(dir + "/lrf.yaml", test::synthetic_experiment("lrf"));
  auto r = test::trainyard("find-lr " + dir +
                           "/lrf.yaml --min-lr 1e-4 --max-lr 10 --num-runs 6 --iters-per-run 8"
                           " --set output.dir=" +
                           dir + "/runs");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(test::contains(r.out, "find-lr: suggested learning rate")) << r.out;
  const std::string out = dir + "/runs/lrf-lr-finder";
  auto csv = test::read_lines(out + "/lr_finder.csv");
  ASSERT_EQ(csv.size(), 7u);
  EXPECT_EQ(csv[0], "lr,loss,smoothed_loss,diverged");
  EXPECT_TRUE(test::contains(csv[1], "0.0001,"));
  const std::string svg = test::read_file(out + "/lr_finder.svg");
  EXPECT_TRUE(test::contains(svg, "<svg xmlns=\"http://www.w3.org/2000/svg\""));
  EXPECT_TRUE(test::contains(svg, "<polyline points=\""));
  EXPECT_TRUE(test::contains(svg, "suggested "));
  const std::string json = test::read_file(out + "/lr_finder.json");
  EXPECT_TRUE(test::contains(json, "\"suggestion\": ") && !test::contains(json, "\"suggestion\": null")) << json;
  EXPECT_FALSE(std::filesystem::exists(dir + "/runs/lrf"));

  auto unusable = test::trainyard("find-lr " + dir +
                                  "/lrf.yaml --min-lr 1e-9 --max-lr 1e-8 --num-runs 3 --iters-per-run 2"
                                  " --output " +
                                  dir + "/flat");
  ASSERT_EQ(unusable.exit_code, 0) << unusable.err;
  EXPECT_TRUE(test::contains(unusable.out, "no suggestion")) << unusable.out;
  EXPECT_TRUE(test::contains(unusable.out, "unusable curve")) << unusable.out;
  EXPECT_TRUE(test::contains(test::read_file(dir + "/flat/lr_finder.json"), "\"suggestion\": null"));

  auto bad = test::trainyard("find-lr " + dir + "/lrf.yaml --min-lr 1 --max-lr 0.1");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(test::contains(bad.err, "expected 0 < min-lr < max-lr")) << bad.err;
}

// The README's command: on the demo's MLP the rate 1 diverges. That is a
// result: marked, nothing higher tried, outputs written, no checkpoint.
TEST(LrFinder, ADivergingRateIsAResultNotAnError) {
  const std::string dir = test::temp_dir("diverging");
  auto r = test::run_command("cd " + dir + " && " + test::trainyard_binary() + " find-lr " + test::source_dir() +
                             "/experiments/fashion_mnist_mlp.yaml --plugin-dir " + test::builtin_plugin_dir());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(test::contains(r.out, "(diverged)")) << r.out;
  EXPECT_TRUE(test::contains(r.out, "find-lr: suggested learning rate ")) << r.out;
  const std::string out = dir + "/runs/fashion_mnist_mlp-lr-finder";
  const auto csv = test::read_lines(out + "/lr_finder.csv");
  ASSERT_GE(csv.size(), 3u);
  EXPECT_EQ(csv[0], "lr,loss,smoothed_loss,diverged");
  EXPECT_TRUE(test::contains(csv.back(), ",1")) << csv.back();  // the last rate tried diverged
  for (size_t i = 1; i + 1 < csv.size(); ++i) EXPECT_TRUE(test::contains(csv[i], ",0")) << csv[i];
  const std::string json = test::read_file(out + "/lr_finder.json");
  EXPECT_TRUE(test::contains(json, "\"diverged\": true")) << json;
  EXPECT_TRUE(test::contains(json, "\"diverged_at_lr\": ")) << json;
  EXPECT_TRUE(std::filesystem::exists(out + "/lr_finder.svg"));
  // Only the three result files: no checkpoints, no run directory.
  size_t files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) files += entry.is_regular_file();
  EXPECT_EQ(files, 3u);
}

}  // namespace
}  // namespace trainyard::host
