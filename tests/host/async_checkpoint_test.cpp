// checkpoint.async: the training thread snapshots, a writer thread writes.
// "During a background write" is made certain by a test hook that holds each
// write for a while (TRAINYARD_TEST_CHECKPOINT_WRITE_DELAY_MS, docs/reliability.md).
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "support/support.h"
#include "train/checkpoint.h"
#include "trainyard/error.h"

namespace fs = std::filesystem;

namespace trainyard::test {
namespace {

std::string experiment(const std::string& name, const std::string& more = "") {
  const std::string path = temp_dir("exp-" + name) + "/" + name + ".yaml";
  write_file(path, synthetic_experiment(name, more));
  return path;
}

nlohmann::json json_of(const std::string& path) { return nlohmann::json::parse(read_file(path)); }

// Every ckpt-*.pt and best.pt of the folder has a manifest and verifies against it; returns how many.
int verified_checkpoints(const std::string& dir) {
  int n = 0;
  for (const auto& f : fs::directory_iterator(dir)) {
    if (f.path().extension() != ".pt") continue;
    EXPECT_NO_THROW(host::verify_checkpoint(f.path().string())) << f.path();
    ++n;
  }
  return n;
}

// Starts `args` in the background with the writes held for `delay_ms`; once
// `started` exists, waits `after_ms`, runs `then` (a shell command) and
// waits for the process.
CommandResult during_a_write(const std::string& args, int delay_ms, const std::string& started, int after_ms,
                             const std::string& then) {
  return run_and_act(args, "-e " + started, after_ms, then,
                     "TRAINYARD_TEST_CHECKPOINT_WRITE_DELAY_MS=" + std::to_string(delay_ms) + " ");
}

TEST(AsyncCheckpoints, AsyncAndSyncHoldTheSameStateAndResumeFromEitherIsExact) {
  const std::string exp = experiment("same"), out = temp_dir("out");
  auto straight = trainyard("run " + exp + " --output-dir " + out + "/straight");
  ASSERT_EQ(straight.exit_code, 0) << straight.err;
  EXPECT_TRUE(contains(straight.out, "in the background)")) << straight.out;
  // Half the run in each mode, then the other half in the other: checkpoint.async may change on resume.
  auto sync = trainyard("run " + exp + " --output-dir " + out + "/sync --until-epoch 1 --set checkpoint.async=false");
  ASSERT_EQ(sync.exit_code, 0) << sync.err;
  EXPECT_TRUE(contains(sync.out, "on the training thread)")) << sync.out;
  auto async = trainyard("run " + exp + " --output-dir " + out + "/async --until-epoch 1");
  ASSERT_EQ(async.exit_code, 0) << async.err;
  // The same weights and optimizer state (not the same bytes: every archive has a random
  // serialization_id, and LibTorch keys the optimizer's state by addresses).
  const std::string first = "/same/checkpoints/ckpt-e0001-i00000016.pt";
  EXPECT_EQ(compare_checkpoint_networks(out + "/sync" + first, out + "/async" + first), "");
  EXPECT_EQ(compare_optimizer_states(out + "/sync" + first, out + "/async" + first), "");
  EXPECT_EQ(compare_checkpoint_networks(out + "/sync" + first, out + "/straight" + first), "");
  auto sync_then_async = trainyard("run " + exp + " --output-dir " + out + "/sync");
  ASSERT_EQ(sync_then_async.exit_code, 0) << sync_then_async.err;
  EXPECT_TRUE(contains(sync_then_async.out, "resuming from")) << sync_then_async.out;
  auto async_then_sync = trainyard("run " + exp + " --output-dir " + out + "/async --set checkpoint.async=false");
  ASSERT_EQ(async_then_sync.exit_code, 0) << async_then_sync.err;
  EXPECT_TRUE(contains(async_then_sync.out, "resuming from")) << async_then_sync.out;
  const std::string last = "/same/checkpoints/ckpt-e0002-i00000032.pt";
  for (const std::string run : {"/sync", "/async"}) {
    EXPECT_EQ(compare_checkpoint_networks(out + "/straight" + last, out + run + last), "") << run;
    EXPECT_EQ(json_of(out + "/straight/same/summary.json")["metrics"],
              json_of(out + run + "/same/summary.json")["metrics"])
        << run;
  }
  // summary.json: how long each checkpoint held the loop, and took to write.
  const auto summary = json_of(out + "/straight/same/summary.json");
  for (const char* key : {"checkpoint_blocked_s", "checkpoint_write_s"}) {
    ASSERT_TRUE(summary.contains(key)) << summary.dump();
    EXPECT_EQ(summary[key]["count"], 2) << key;
    EXPECT_GE(summary[key]["max"].get<double>(), summary[key]["mean"].get<double>()) << key;
    EXPECT_GE(summary[key]["mean"].get<double>(), 0.0) << key;
  }
}

TEST(AsyncCheckpoints, AKillDuringABackgroundWriteLeavesThePreviousCheckpointWholeAndResumable) {
  const std::string exp = experiment("crash", ""), out = temp_dir("out");
  const std::string longer = " --set loop.epochs=4";
  auto whole = trainyard("run " + exp + " --output-dir " + out + "/whole" + longer);
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  // The first checkpoint is whole once its manifest is; the second write then waits 2 s: killed in it.
  const std::string dir = out + "/killed/crash/checkpoints";
  auto r = during_a_write("run " + exp + " --output-dir " + out + "/killed" + longer, 2000,
                          dir + "/ckpt-e0001-i00000016.pt.manifest.json", 300, "kill -KILL $pid");
  EXPECT_EQ(r.exit_code, 137) << r.err;
  EXPECT_EQ(verified_checkpoints(dir), 1);
  EXPECT_FALSE(fs::exists(dir + "/ckpt-e0002-i00000032.pt"));  // no final name before the file is whole
  auto resumed = trainyard("run " + exp + " --output-dir " + out + "/killed" + longer);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_TRUE(contains(resumed.out, "resuming from " + dir + "/ckpt-e0001-i00000016.pt")) << resumed.out;
  EXPECT_EQ(
      compare_checkpoint_networks(latest_checkpoint(out + "/whole/crash"), latest_checkpoint(out + "/killed/crash")),
      "");
}

TEST(AsyncCheckpoints, SigtermDuringABackgroundWriteEndsWithWholeCheckpointsAndTheResumeIsExact) {
  const std::string exp = experiment("term"), out = temp_dir("out");
  const std::string longer = " --set loop.epochs=6";
  auto whole = trainyard("run " + exp + " --output-dir " + out + "/whole" + longer);
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  const std::string dir = out + "/stopped/term/checkpoints";
  auto r = during_a_write("run " + exp + " --output-dir " + out + "/stopped" + longer, 1500,
                          dir + "/ckpt-e0001-i00000016.pt.manifest.json", 300, "kill -TERM $pid");
  ASSERT_EQ(r.exit_code, 4) << r.out << r.err;
  EXPECT_TRUE(contains(r.err, "stopping: SIGTERM at iteration")) << r.err;
  // The write under way when the signal came, and the stop's own checkpoint after it.
  EXPECT_TRUE(fs::exists(dir + "/ckpt-e0002-i00000032.pt")) << r.out;
  EXPECT_GE(verified_checkpoints(dir), 3);
  for (const auto& f : fs::directory_iterator(dir))
    EXPECT_EQ(f.path().filename().string().find(".tmp-"), std::string::npos) << f.path();
  const std::string stop = latest_checkpoint(out + "/stopped/term");
  EXPECT_NE(stop, dir + "/ckpt-e0002-i00000032.pt");
  auto resumed = trainyard("run " + exp + " --output-dir " + out + "/stopped" + longer);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_TRUE(contains(resumed.out, "resuming from " + stop)) << resumed.out;
  EXPECT_EQ(
      compare_checkpoint_networks(latest_checkpoint(out + "/whole/term"), latest_checkpoint(out + "/stopped/term")),
      "");
}

TEST(AsyncCheckpoints, AFailedBackgroundWriteIsOneErrorLineNamingTheFileAndFailsTheRun) {
  const std::string exp = experiment("fail"), out = temp_dir("out");
  const std::string dir = out + "/fail/checkpoints";
  // While the first write is held, the checkpoint folder becomes a file: that write fails.
  auto r = during_a_write("run " + exp + " --output-dir " + out, 1500, out + "/fail/metrics.jsonl", 300,
                          "mv " + dir + " " + out + "/moved; echo x > " + dir);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_EQ(occurrences(r.err, "error:"), 1) << r.err;
  EXPECT_TRUE(contains(r.err, "checkpoint not written: " + dir + "/ckpt-e0001-i00000016.pt")) << r.err;
  EXPECT_FALSE(contains(r.out, "(loop blocked")) << r.out;  // no write claimed as done
}

}  // namespace
}  // namespace trainyard::test
