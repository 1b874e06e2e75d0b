// The Runner in-process: which checkpoint a run resumes from, what it refuses
// before writing anything, and how --fresh keeps the old run. (The CLI tests
// keep one end-to-end run of each command; the run logic is tested here.)
#include <gtest/gtest.h>

#include <filesystem>

#include "run/experiment_file.h"
#include "run/runner.h"
#include "run/session.h"
#include "support/support.h"
#include "trainyard/error.h"

namespace fs = std::filesystem;

namespace trainyard::host {
namespace {

struct InProcessRun {
  RunOutcome outcome;
  std::string out, err;
};

// One `trainyard run` without the binary: the experiment loaded and run by a
// Runner in this process, its console output captured.
InProcessRun run_in_process(const std::string& experiment, const std::vector<std::string>& sets, RunRequest request) {
  Registry registry;
  Experiment e = load_experiment(experiment, sets, {test::builtin_plugin_dir()}, registry);
  InProcessRun r;
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  try {
    r.outcome = Runner(e, registry).train(request);
  } catch (...) {
    r.out = testing::internal::GetCapturedStdout();
    r.err = testing::internal::GetCapturedStderr();
    throw;
  }
  r.out = testing::internal::GetCapturedStdout();
  r.err = testing::internal::GetCapturedStderr();
  return r;
}

std::string experiment(const std::string& name) {
  const std::string path = test::temp_dir("exp") + "/" + name + ".yaml";
  test::write_file(path, test::synthetic_experiment(name));
  return path;
}

RunRequest into(const std::string& output_dir) {
  RunRequest request;
  request.output_dir = output_dir;
  request.command_line = {"trainyard", "run"};
  return request;
}

TEST(Runner, ResumesFromTheNewestCheckpointThatVerifies) {
  const std::string exp = experiment("newest"), out = test::temp_dir("out");
  InProcessRun first = run_in_process(exp, {}, into(out));
  EXPECT_EQ(first.outcome.epochs_done, 2);
  EXPECT_EQ(first.outcome.total_epochs, 2);
  EXPECT_EQ(first.outcome.run_dir, out + "/newest");
  EXPECT_FALSE(first.outcome.report.empty());
  const std::string checkpoints = out + "/newest/checkpoints/";
  fs::resize_file(checkpoints + "ckpt-e0002-i00000032.pt", 100);  // damaged: the older one must be used

  InProcessRun longer = run_in_process(exp, {"loop.epochs=3"}, into(out));
  EXPECT_TRUE(test::contains(longer.err, "bytes, the manifest says")) << longer.err;
  EXPECT_TRUE(test::contains(longer.err, "trying an older checkpoint")) << longer.err;
  EXPECT_TRUE(test::contains(longer.out, "resuming from " + checkpoints + "ckpt-e0001-i00000016.pt")) << longer.out;
  EXPECT_EQ(longer.outcome.epochs_done, 3);
  EXPECT_EQ(longer.outcome.iteration, 48);
  EXPECT_TRUE(fs::exists(checkpoints + "ckpt-e0003-i00000048.pt"));
}

TEST(Runner, RefusesAChangedConfigBeforeWritingAnythingUnlessAllowed) {
  const std::string exp = experiment("changed"), out = test::temp_dir("out");
  run_in_process(exp, {"loop.epochs=1"}, into(out));
  const std::string saved = test::read_file(out + "/changed/config.yaml");
  try {
    run_in_process(exp, {"loop.epochs=2", "optimizer.lr=0.5"}, into(out));
    FAIL() << "a changed learning rate resumed";
  } catch (const ConfigError& err) {
    EXPECT_TRUE(test::contains(err.what(), "belongs to another configuration")) << err.what();
    EXPECT_TRUE(test::contains(err.what(), "optimizer.lr 0.05 -> 0.5")) << err.what();
  }
  EXPECT_EQ(test::read_file(out + "/changed/config.yaml"), saved);  // nothing written
  EXPECT_FALSE(fs::exists(out + "/changed/checkpoints/ckpt-e0002-i00000032.pt"));

  RunRequest allowed = into(out);
  allowed.allow_config_change = true;
  InProcessRun forced = run_in_process(exp, {"loop.epochs=2", "optimizer.lr=0.5"}, allowed);
  EXPECT_TRUE(test::contains(forced.out, "optimizer.lr: 0.05 -> 0.5 (not allowed on resume)")) << forced.out;
  EXPECT_EQ(forced.outcome.epochs_done, 2);
  EXPECT_NE(test::read_file(out + "/changed/config.yaml"), saved);
}

TEST(Runner, ACheckpointOfAnotherNetworkIsRefusedAndTheRunLeftAsItWas) {
  const std::string exp = experiment("foreign"), out = test::temp_dir("out");
  run_in_process(exp, {"loop.epochs=1"}, into(out));
  const std::string saved = test::read_file(out + "/foreign/config.yaml");
  try {
    run_in_process(exp, {"loop.epochs=2", "network.hidden_sizes=[16]"}, into(out));
    FAIL() << "a checkpoint of another network was resumed";
  } catch (const ConfigError& err) {
    EXPECT_TRUE(test::contains(err.what(), "belongs to another configuration")) << err.what();
    EXPECT_TRUE(test::contains(err.what(), "network.hidden_sizes")) << err.what();
    EXPECT_TRUE(test::contains(err.what(), "--fresh")) << err.what();
  }
  EXPECT_EQ(test::read_file(out + "/foreign/config.yaml"), saved);
}

TEST(Runner, FreshStartsOverAndKeepsThePreviousRunDirectory) {
  const std::string exp = experiment("again"), out = test::temp_dir("out");
  run_in_process(exp, {"loop.epochs=1"}, into(out));
  RunRequest fresh = into(out);
  fresh.fresh = true;
  InProcessRun r = run_in_process(exp, {"loop.epochs=1"}, fresh);
  EXPECT_FALSE(test::contains(r.out, "resuming from")) << r.out;
  EXPECT_TRUE(test::contains(r.out, "--fresh: previous run kept in " + out + "/again.replaced-")) << r.out;
  int kept = 0;
  for (const auto& entry : fs::directory_iterator(out))
    if (entry.path().filename().string().rfind("again.replaced-", 0) == 0) {
      ++kept;
      EXPECT_TRUE(fs::exists(entry.path() / "checkpoints" / "ckpt-e0001-i00000016.pt"));
    }
  EXPECT_EQ(kept, 1);
  EXPECT_TRUE(fs::exists(out + "/again/checkpoints/ckpt-e0001-i00000016.pt"));
}

}  // namespace
}  // namespace trainyard::host
