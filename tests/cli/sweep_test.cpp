// Search spaces, successive halving (ASHA) and a sweep killed and run again.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <set>
#include <sstream>

#include "support/support.h"
#include "sweep/halving.h"
#include "sweep/space.h"
#include "trainyard/error.h"

namespace fs = std::filesystem;

namespace trainyard::host {
namespace {

TEST(Sweep, SpacesParseAndTheSameSeedDrawsTheSameTrials) {
  const SpaceAxis lr = parse_space("optimizer.lr=loguniform(1e-4,1e-1)");
  EXPECT_EQ(lr.key, "optimizer.lr");
  EXPECT_EQ(lr.kind, SpaceAxis::Kind::loguniform);
  const SpaceAxis width = parse_space("network.hidden_sizes=choice([64],[128, 64])");
  EXPECT_EQ(width.choices, (std::vector<std::string>{"[64]", "[128, 64]"}));
  const SpaceAxis batch = parse_space("loop.batch_per_device=int(16,18)");
  const SpaceAxis m = parse_space("optimizer.momentum=uniform(0.8, 0.99)");
  for (const char* bad : {"optimizer.lr", "optimizer.lr=normal(0,1)", "optimizer.lr=loguniform(0,1)",
                          "optimizer.lr=uniform(1,0)", "optimizer.lr=int(1.5,4)", "optimizer.lr=uniform(a,b)",
                          "optimizer.lr=choice(a,,b)", "optimizer.lr=uniform(1,2"})
    EXPECT_THROW(parse_space(bad), ConfigError) << bad;

  const auto trials = sample_space("exp", {lr, width, batch, m}, 400, 7);
  ASSERT_EQ(trials.size(), 400u);
  EXPECT_EQ(trials[3].name.rfind("exp--t003--optimizer.lr=", 0), 0u) << trials[3].name;
  int below_median = 0;
  std::set<std::string> batches;
  for (const auto& t : trials) {
    const double v = std::stod(t.values[0].second);
    EXPECT_GE(v, 1e-4);
    EXPECT_LE(v, 1e-1);
    if (v < std::pow(10.0, -2.5)) ++below_median;  // log-uniform: half below the geometric middle
    EXPECT_TRUE(t.values[1].second == "[64]" || t.values[1].second == "[128, 64]");
    batches.insert(t.values[2].second);
    const double mom = std::stod(t.values[3].second);
    EXPECT_TRUE(mom >= 0.8 && mom <= 0.99) << mom;
  }
  EXPECT_GT(below_median, 160);
  EXPECT_LT(below_median, 240);
  EXPECT_EQ(batches, (std::set<std::string>{"16", "17", "18"}));  // both ends reached
  const auto again = sample_space("exp", {lr, width, batch, m}, 400, 7);
  const auto other = sample_space("exp", {lr, width, batch, m}, 400, 8);
  EXPECT_EQ(again[123].name, trials[123].name);
  EXPECT_NE(other[123].name, trials[123].name);
}

TEST(Halving, PromotesTheTopOfEachRungWithoutWaitingForTheRung) {
  // 9 trials, rungs at 1, 3 and 9 epochs; trial t's value is t (greater is
  // better) at every rung; they start in this order.
  const std::vector<size_t> order{4, 7, 1, 8, 2, 5, 0, 6, 3};
  Halving h(1, 9, 3, /*maximize=*/true, 9, order);
  EXPECT_EQ(h.rungs(), (std::vector<int64_t>{1, 3, 9}));
  int64_t epochs = 0;
  std::vector<std::pair<size_t, size_t>> jobs;
  for (auto job = h.next(); job; job = h.next()) {  // one worker: each job completes before the next
    jobs.emplace_back(job->trial, job->rung);
    epochs += h.rungs()[job->rung] - (job->rung ? h.rungs()[job->rung - 1] : 0);
    h.completed(job->trial, job->rung, static_cast<double>(job->trial));
  }
  // The first promotion comes as soon as a rung has 3 results, not when all 9
  // are in: the best of trials 4, 7 and 1.
  ASSERT_GE(jobs.size(), 4u);
  EXPECT_EQ(jobs[3], (std::pair<size_t, size_t>{7, 1}));
  // Every trial started once; the best reaches the last rung; far fewer epochs than 9 x 9.
  std::set<size_t> started;
  for (const auto& [t, r] : jobs)
    if (r == 0) started.insert(t);
  EXPECT_EQ(started.size(), 9u);
  EXPECT_EQ(h.completed_rung(8), 2);
  EXPECT_EQ(h.completed_rung(0), 0);
  EXPECT_LT(epochs, 81 / 2);
  // In sorted order (worst first), every newcomer is the best so far and is promoted: why sweeps shuffle.
  Halving sorted(1, 9, 3, /*maximize=*/true, 9);
  int64_t sorted_epochs = 0;
  for (auto job = sorted.next(); job; job = sorted.next()) {
    sorted_epochs += sorted.rungs()[job->rung] - (job->rung ? sorted.rungs()[job->rung - 1] : 0);
    sorted.completed(job->trial, job->rung, static_cast<double>(job->trial));
  }
  EXPECT_GT(sorted_epochs, epochs);
  EXPECT_EQ(seeded_order(9, 3), seeded_order(9, 3));
  EXPECT_NE(seeded_order(9, 3), seeded_order(9, 4));
  // Minimizing turns the order around.
  Halving low(1, 4, 2, /*maximize=*/false, 2);
  auto a = low.next(), b = low.next();
  ASSERT_TRUE(a && b);
  low.completed(a->trial, 0, 5.0);
  low.completed(b->trial, 0, 1.0);
  auto promoted = low.next();
  ASSERT_TRUE(promoted);
  EXPECT_EQ(promoted->trial, b->trial);
  EXPECT_EQ(promoted->rung, 1u);
}

// The synthetic experiment trained 4 epochs, ranked by test loss.
std::string experiment(const std::string& name) {
  const std::string path = test::temp_dir("exp-" + name) + "/" + name + ".yaml";
  std::string yaml = test::synthetic_experiment(name);
  yaml.replace(yaml.find("epochs: 2,"), 10, "epochs: 4,");
  test::write_file(path, yaml + "stopping: {monitor: test_loss}\n");
  return path;
}

const std::string kGrid = " --grid optimizer.lr=0.002,0.005,0.01,0.02,0.05,0.1,0.2,0.4 --grid optimizer.momentum=0,0.9";

// rank,run,status,epochs of each row of sweep.csv.
std::vector<std::string> table(const std::string& csv) {
  std::vector<std::string> rows;
  for (const auto& line : test::read_lines(csv)) {
    std::stringstream cells(line);
    std::string rank, run, status, epochs;
    std::getline(cells, rank, ','), std::getline(cells, run, ','), std::getline(cells, status, ',');
    std::getline(cells, epochs, ',');
    rows.push_back(rank + "," + run + "," + status + "," + epochs);
  }
  return rows;
}

int64_t epochs_trained(const std::string& out) {
  const auto at = out.find(" epochs trained");
  if (at == std::string::npos) return -1;
  const auto start = out.rfind(' ', at - 1);
  return std::stoll(out.substr(start + 1, at - start - 1));
}

TEST(Sweep, UntilEpochStopsAndTheNextRunContinuesTheSameSchedule) {
  // A cosine schedule over 4 epochs: stopped after 1 and continued, it ends where a straight run does.
  const std::string exp = experiment("until");
  const std::string straight = test::temp_dir("straight"), split = test::temp_dir("split");
  const std::string cosine = " --set schedule.policy=cosine";
  ASSERT_EQ(test::trainyard("run " + exp + cosine + " --output-dir " + straight).exit_code, 0);
  const auto first = test::trainyard("run " + exp + cosine + " --output-dir " + split + " --until-epoch 1");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_TRUE(test::contains(first.out, "trainyard: done: 1/4 epochs")) << first.out;
  EXPECT_TRUE(
      test::contains(test::read_file(split + "/until/summary.json"), "\"stopped\": \"--until-epoch 1 reached\""));
  const auto rest = test::trainyard("run " + exp + cosine + " --output-dir " + split);
  ASSERT_EQ(rest.exit_code, 0) << rest.err;
  EXPECT_EQ(test::compare_checkpoint_networks(test::latest_checkpoint(straight + "/until"),
                                              test::latest_checkpoint(split + "/until")),
            "");
}

TEST(Sweep, AMisspeltHalvingMetricIsRefusedBeforeAnyTrialTrains) {
  // Was: every trial's first rung trained, then an end with no line at all.
  const std::string exp = experiment("metric"), out = test::temp_dir("metric-out");
  const auto r = test::trainyard("sweep " + exp + " --grid optimizer.lr=0.01,0.1 --halving --metric test_acuracy_top1" +
                                 " --output-dir " + out);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_EQ(test::nonempty_lines(r.err).size(), 1u) << r.err;
  EXPECT_TRUE(test::contains(r.err,
                             "error: command line: --metric test_acuracy_top1: no value 'test_acuracy_top1' in what "
                             "a trial reports at a rung (its test values); expected one of test_accuracy_top1, "))
      << r.err;
  EXPECT_TRUE(test::contains(r.err, "did you mean 'test_accuracy_top1'?")) << r.err;
  EXPECT_TRUE(fs::is_empty(out)) << "a trial started: " << r.out;
  // A name close to none is refused as well, with an example.
  const auto far =
      test::trainyard("sweep " + exp + " --grid optimizer.lr=0.01,0.1 --halving --metric zzz --output-dir " + out);
  EXPECT_EQ(far.exit_code, 2) << far.err;
  EXPECT_TRUE(test::contains(far.err, "no value 'zzz'")) << far.err;
  EXPECT_TRUE(fs::is_empty(out));
}

TEST(Sweep, HalvingStopsTheTrialsAGridRunsToTheEndAndFindsTheSameBest) {
  const std::string exp = experiment("sh");
  const std::string grid_out = test::temp_dir("grid"), halving_out = test::temp_dir("halving");
  const auto grid = test::trainyard("sweep " + exp + kGrid + " --parallel 2 --output-dir " + grid_out);
  ASSERT_EQ(grid.exit_code, 0) << grid.out << grid.err;
  EXPECT_EQ(epochs_trained(grid.out), 16 * 4) << grid.out;
  const auto halving =
      test::trainyard("sweep " + exp + kGrid + " --parallel 2 --halving --reduction 2 --output-dir " + halving_out);
  ASSERT_EQ(halving.exit_code, 0) << halving.out << halving.err;
  EXPECT_TRUE(test::contains(halving.out, "successive halving by test_loss (min), rungs at epochs 1 2 4"))
      << halving.out;
  // Synchronous halving would train 16 x 1 + 8 x 1 + 4 x 2 = 32 epochs; ASHA promotes a little more eagerly.
  const int64_t trained = epochs_trained(halving.out);
  EXPECT_GE(trained, 32) << halving.out;
  EXPECT_LE(trained, 40) << halving.out;
  const auto g = table(grid_out + "/sh-sweep/sweep.csv"), h = table(halving_out + "/sh-sweep/sweep.csv");
  ASSERT_EQ(g.size(), 17u);
  ASSERT_EQ(h.size(), 17u);
  EXPECT_EQ(g[0], "rank,run,status,epochs");
  // The same best trial, trained to the end by both.
  const std::string best = g[1].substr(0, g[1].find(",finished"));
  EXPECT_EQ(h[1].substr(0, h[1].find(",finished")), best) << h[1] << " vs " << g[1];
  EXPECT_TRUE(test::contains(h[1], ",finished,4")) << h[1];
  int stopped = 0;
  for (const auto& row : h) stopped += test::contains(row, ",stopped at 1 epochs,1") ? 1 : 0;
  EXPECT_GE(stopped, 6) << "most trials stop at the first rung";
  EXPECT_TRUE(test::contains(halving.out, "best: " + best.substr(best.find(',') + 1))) << halving.out;
}

TEST(Sweep, AHalvingSweepKilledAndRunAgainEndsAsOneThatWasNot) {
  const std::string exp = experiment("kill");
  const std::string straight = test::temp_dir("straight"), killed = test::temp_dir("killed");
  const std::string args = kGrid + " --halving --reduction 2";
  ASSERT_EQ(test::trainyard("sweep " + exp + args + " --output-dir " + straight).exit_code, 0);
  // Killed with SIGKILL after its third result: its runs stop (a checkpoint, exit 4) when it dies.
  const std::string script = killed + "/kill.sh";
  test::write_file(script, "set -u\n" + test::trainyard_binary() + " sweep " + exp + args + " --output-dir " + killed +
                               " > " + killed +
                               "/first.log 2>&1 &\n"
                               "pid=$!\n"
                               "for i in $(seq 600); do [ $(grep -c '^sweep: \\[' " +
                               killed +
                               "/first.log) -ge 3 ] && break; sleep 0.1; done\n"
                               "kill -9 $pid; wait $pid\n"
                               "for i in $(seq 300); do [ -z \"$(find " +
                               killed + " -name '*.lock')\" ] && break; sleep 0.1; done\n");
  ASSERT_EQ(test::run_command("bash " + script).exit_code, 0);
  EXPECT_FALSE(test::contains(test::read_file(killed + "/first.log"), "sweep: done")) << "killed before the end";
  const auto again = test::trainyard("sweep " + exp + args + " --output-dir " + killed);
  ASSERT_EQ(again.exit_code, 0) << again.out << again.err;
  EXPECT_EQ(table(killed + "/kill-sweep/sweep.csv"), table(straight + "/kill-sweep/sweep.csv"));
}

}  // namespace
}  // namespace trainyard::host
