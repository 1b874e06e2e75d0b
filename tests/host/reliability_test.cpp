// Interruptions: stop signals, kill -9 at random moments, a full disk.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <random>

#include <nlohmann/json.hpp>

#include "support/support.h"

namespace fs = std::filesystem;

namespace trainyard::test {
namespace {

// 200 epochs of 16 iterations of a small MLP: a few seconds, long enough to interrupt.
std::string long_experiment(const std::string& name, const std::string& more = "") {
  std::string yaml = synthetic_experiment(name, more);
  yaml.replace(yaml.find("dropout: 0.1"), 12, "dropout: 0.2");
  yaml.replace(yaml.find("epochs: 2,"), 10, "epochs: 120,");
  const std::string path = temp_dir("exp-" + name) + "/" + name + ".yaml";
  write_file(path, yaml);
  return path;
}

std::string last_checkpoint(const std::string& run_dir) { return latest_checkpoint(run_dir); }

TEST(Signals, SigtermCheckpointsAndExitsResumableAndTheResumedRunIsExact) {
  const std::string exp = long_experiment("sig"), out = temp_dir("out");
  auto whole = trainyard("run " + exp + " --output-dir " + out + "/whole");
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  auto stopped =
      interrupted("run " + exp + " --output-dir " + out + "/split", out + "/split/sig/metrics.jsonl", 300, "TERM");
  ASSERT_EQ(stopped.exit_code, 4) << stopped.out << stopped.err;
  EXPECT_TRUE(contains(stopped.err, "stopping: SIGTERM at iteration")) << stopped.err;
  EXPECT_TRUE(contains(stopped.out, "run the same command to resume (exit code 4)")) << stopped.out;
  const std::string ckpt = last_checkpoint(out + "/split/sig");
  ASSERT_FALSE(ckpt.empty());
  auto resumed = trainyard("run " + exp + " --output-dir " + out + "/split");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_TRUE(contains(resumed.out, "resuming from " + ckpt)) << resumed.out;
  EXPECT_EQ(compare_checkpoint_networks(last_checkpoint(out + "/whole/sig"), last_checkpoint(out + "/split/sig")), "");
}

TEST(Signals, KillNineAtRandomMomentsThenResumeEndsBitIdentical) {
  // Checkpoints every 4 iterations; kill -9 at random times, resume, again and again.
  // 200 epochs (about 7 s here with LibTorch 2.15): the random kills must not
  // reach the end of the run, or no run is left to kill inside a checkpoint
  // write (at 60 epochs the whole run took 2 s and sometimes ended first).
  const std::string exp = long_experiment("kill", "");
  const std::string out = temp_dir("out");
  const std::string every = " --set checkpoint.every_iters=4 --set loop.epochs=200";
  auto whole = trainyard("run " + exp + " --output-dir " + out + "/whole" + every);
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  std::mt19937 rng(static_cast<unsigned>(::getpid()));
  int kills = 0;
  for (int round = 0; round < 8; ++round) {
    auto r = interrupted("run " + exp + " --output-dir " + out + "/killed" + every, out + "/killed/kill/config.yaml",
                         static_cast<int>(rng() % 600), "KILL");
    if (r.exit_code == 0) break;  // it finished first
    EXPECT_EQ(r.exit_code, 137) << r.err;
    ++kills;
  }
  // Then killed inside checkpoint writes: a test hook pauses between a
  // checkpoint file and its manifest, where most of the run's time now goes.
  int mid_write = 0;
  for (int round = 0; round < 4; ++round) {
    // config.yaml is written again at each start, just before training: its return
    // says this round's run is about to train, however slow the start (sanitizers).
    fs::remove(out + "/killed/kill/config.yaml");
    auto r = interrupted("run " + exp + " --output-dir " + out + "/killed" + every, out + "/killed/kill/config.yaml",
                         300 + static_cast<int>(rng() % 600), "KILL", "TRAINYARD_TEST_PAUSE_IN_CHECKPOINT_MS=300 ");
    if (r.exit_code == 0) break;
    ++kills;
    if (fs::is_directory(out + "/killed/kill/checkpoints"))
      for (const auto& f : fs::directory_iterator(out + "/killed/kill/checkpoints"))
        if (f.path().extension() == ".pt" && !fs::exists(f.path().string() + ".manifest.json")) ++mid_write;
  }
  EXPECT_GE(mid_write, 1) << "no kill landed between a checkpoint and its manifest";
  auto last = trainyard("run " + exp + " --output-dir " + out + "/killed" + every);
  ASSERT_EQ(last.exit_code, 0) << last.err;
  EXPECT_GE(kills, 2);
  EXPECT_EQ(compare_checkpoint_networks(last_checkpoint(out + "/whole/kill"), last_checkpoint(out + "/killed/kill")),
            "");
}

TEST(Resume, AStopInsideAnAccumulationWaitsForItsEndAndTheResumeIsExact) {
  const std::string out = temp_dir("out");
  auto exp = [&](const std::string& name, const std::string& more) {
    const std::string path = temp_dir("exp-" + name) + "/acc.yaml";
    write_file(path, synthetic_experiment("acc", more));
    return path;
  };
  const std::string accumulate = " --set loop.iter_size=4 --set loop.batch_per_device=8";
  auto whole = trainyard("run " + exp("whole", "") + " --output-dir " + out + "/whole" + accumulate);
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  // Asked to stop after iteration 6, in the middle of the second accumulation: it stops after 8.
  const std::string stopping = exp("stop", "callbacks: [{plugin: stop_at, iteration: 6}]\n");
  auto stopped = trainyard("run " + stopping + " --output-dir " + out + "/split" + accumulate + " --plugin-dir " +
                           fixture_dir("components"));
  ASSERT_EQ(stopped.exit_code, 0) << stopped.err;
  EXPECT_TRUE(fs::exists(out + "/split/acc/checkpoints/ckpt-e0000-i00000008.pt"));
  auto resumed = trainyard("run " + exp("resume", "") + " --output-dir " + out + "/split" + accumulate);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(compare_checkpoint_networks(latest_checkpoint(out + "/whole/acc"), latest_checkpoint(out + "/split/acc")),
            "");
}

TEST(Checkpoints, EveryTSecondsBetweenUpdates) {
  const std::string out = temp_dir("out");
  std::string yaml = synthetic_experiment("timed", "checkpoint: {keep: 0}\n");
  yaml.replace(yaml.find("epochs: 2,"), 10,
               "epochs: 1, train_samples_per_epoch: 96000,");  // 3000 iterations, a few seconds
  const std::string exp = temp_dir("exp") + "/timed.yaml";
  write_file(exp, yaml);
  auto r = trainyard("run " + exp + " --output-dir " + out + " --set checkpoint.every_secs=0.2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  int mid_epoch = 0;
  for (const auto& f : fs::directory_iterator(out + "/timed/checkpoints")) {
    const std::string name = f.path().filename().string();
    if (f.path().extension() != ".pt" || name == "best.pt") continue;
    const int64_t iteration = std::stoll(name.substr(12, 8));
    if (iteration != 3000) ++mid_epoch;  // the epoch's end is 3000
  }
  EXPECT_GE(mid_epoch, 1) << "no checkpoint by time inside an epoch";
}

std::string short_experiment(const std::string& name, const std::string& more = "") {
  const std::string path = temp_dir("exp-" + name) + "/" + name + ".yaml";
  write_file(path, synthetic_experiment(name, more));
  return path;
}

TEST(Checkpoints, ADamagedOrIncompleteNewestCheckpointIsDetectedAndThePreviousOneUsed) {
  const std::string exp = short_experiment("dmg"), out = temp_dir("out");
  ASSERT_EQ(trainyard("run " + exp + " --output-dir " + out + "/base").exit_code, 0);
  const std::string first = "ckpt-e0001-i00000016.pt", second = "ckpt-e0002-i00000032.pt";
  EXPECT_TRUE(fs::exists(out + "/base/dmg/checkpoints/" + second + ".manifest.json"));
  struct Damage {
    std::string name, expected;
    std::function<void(const std::string&)> apply;
  };
  std::vector<Damage> damages = {
      {"truncated", "bytes, the manifest says", [](const std::string& f) { fs::resize_file(f, fs::file_size(f) / 2); }},
      {"bitflip", "SHA-256 differs",
       [](const std::string& f) {
         std::string b = read_file(f);
         b[b.size() / 2] ^= 0x01;
         write_file(f, b);
       }},
      {"no_manifest", "not completely written", [](const std::string& f) { fs::remove(f + ".manifest.json"); }},
      // Found by fuzz_manifest: a manifest that is valid YAML but not a map.
      {"scalar_manifest", "not a map", [](const std::string& f) { write_file(f + ".manifest.json", "7\n"); }}};
  for (const auto& d : damages) {
    const std::string copy = out + "/" + d.name;
    fs::create_directories(copy);
    fs::copy(out + "/base/dmg", copy + "/dmg", fs::copy_options::recursive);
    d.apply(copy + "/dmg/checkpoints/" + second);
    auto r = trainyard("run " + exp + " --output-dir " + copy + " --set loop.epochs=3");
    ASSERT_EQ(r.exit_code, 0) << d.name << ": " << r.err;
    EXPECT_TRUE(contains(r.err, d.expected)) << d.name << ": " << r.err;
    EXPECT_TRUE(contains(r.err, "trying an older checkpoint")) << d.name << ": " << r.err;
    EXPECT_TRUE(contains(r.out, "resuming from " + copy + "/dmg/checkpoints/" + first)) << d.name << ": " << r.out;
  }
  // The only checkpoint incomplete (killed before its manifest): the run starts over instead of refusing.
  const std::string alone = out + "/alone";
  fs::create_directories(alone + "/dmg/checkpoints");
  fs::copy(out + "/base/dmg/checkpoints/" + first, alone + "/dmg/checkpoints/" + first);
  auto fresh = trainyard("run " + exp + " --output-dir " + alone);
  ASSERT_EQ(fresh.exit_code, 0) << fresh.err;
  EXPECT_TRUE(contains(fresh.err, "not completely written")) << fresh.err;
  EXPECT_FALSE(contains(fresh.out, "resuming from")) << fresh.out;
}

// Names and sizes of every file under `dir`: what a refused run must not change.
std::string listing(const std::string& dir) {
  std::vector<std::string> rows;
  if (fs::exists(dir))
    for (const auto& f : fs::recursive_directory_iterator(dir))
      rows.push_back(f.path().string() + " " + (f.is_regular_file() ? std::to_string(f.file_size()) : "dir"));
  std::sort(rows.begin(), rows.end());
  std::string out;
  for (const auto& r : rows) out += r + "\n";
  return out;
}

TEST(Checkpoints, ThoseThatDoNotBelongToTheRunAreRefusedAndNothingIsLost) {
  const std::string exp = short_experiment("own"), out = temp_dir("out");
  ASSERT_EQ(trainyard("run " + exp + " --output-dir " + out + "/base").exit_code, 0);
  // Another run of the same name: another seed and learning rate.
  ASSERT_EQ(trainyard("run " + exp + " --output-dir " + out + "/other --set seed=99 --set optimizer.lr=0.2").exit_code,
            0);
  const std::string first = "ckpt-e0001-i00000016.pt", second = "ckpt-e0002-i00000032.pt";
  struct Case {
    std::string name, expected, args;
    std::function<void(const std::string& run_dir)> apply;
  };
  const std::vector<Case> cases = {
      {"foreign", "belongs to another configuration", "--set loop.epochs=3",
       [&](const std::string& run) {  // the other run's newest checkpoint and manifest, copied in
         for (const std::string f : {second, second + ".manifest.json"})
           fs::copy_file(out + "/other/own/checkpoints/" + f, run + "/checkpoints/" + f,
                         fs::copy_options::overwrite_existing);
       }},
      {"no_manifests", "2 checkpoint(s), none with a valid manifest", "--set loop.epochs=3",
       [&](const std::string& run) {
         fs::remove(run + "/checkpoints/" + first + ".manifest.json");
         fs::remove(run + "/checkpoints/" + second + ".manifest.json");
       }},
      {"one_without_manifest_that_training_went_past", "1 checkpoint(s), none with a valid manifest",
       "--set loop.epochs=3",
       [&](const std::string& run) {  // metrics.jsonl goes on to iteration 32: the first one was complete
         fs::remove(run + "/checkpoints/" + second);
         fs::remove(run + "/checkpoints/" + second + ".manifest.json");
         fs::remove(run + "/checkpoints/" + first + ".manifest.json");
       }},
      {"garbage_manifest", "none with a valid manifest", "--set loop.epochs=3",
       [&](const std::string& run) {
         fs::remove(run + "/checkpoints/" + first);
         fs::remove(run + "/checkpoints/" + first + ".manifest.json");
         write_file(run + "/checkpoints/" + second + ".manifest.json", "\x89PNG garbage {\n");
       }},
      {"folder_is_a_file", "checkpoints: not a folder", "--set loop.epochs=3", [&](const std::string& run) {
         fs::remove_all(run + "/checkpoints");
         write_file(run + "/checkpoints", "not a folder\n");
       }}};
  // tests/bad_inputs/manifests/*.json: damaged manifests of the only checkpoint left.
  std::vector<Case> all = cases;
  for (const auto& f : fs::directory_iterator(source_dir() + "/tests/bad_inputs/manifests")) {
    const std::string manifest = f.path().string();
    all.push_back({"manifest_" + f.path().stem().string(), "none with a valid manifest", "--set loop.epochs=3",
                   [&, manifest](const std::string& run) {
                     fs::remove(run + "/checkpoints/" + first);
                     fs::remove(run + "/checkpoints/" + first + ".manifest.json");
                     fs::copy_file(manifest, run + "/checkpoints/" + second + ".manifest.json",
                                   fs::copy_options::overwrite_existing);
                   }});
  }
  EXPECT_GE(all.size(), cases.size() + 6);
  for (const auto& c : all) {
    const std::string dir = out + "/" + c.name, run = dir + "/own";
    fs::create_directories(dir);
    fs::copy(out + "/base/own", run, fs::copy_options::recursive);
    c.apply(run);
    const std::string before = listing(run);
    auto r = trainyard("run " + exp + " --output-dir " + dir + " " + c.args);
    EXPECT_EQ(r.exit_code, 2) << c.name << ": " << r.err;
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << c.name << ": " << r.err;
    EXPECT_TRUE(contains(r.err, c.expected)) << c.name << ": " << r.err;
    EXPECT_TRUE(contains(r.err, "--fresh")) << c.name << ": " << r.err;
    EXPECT_EQ(listing(run), before) << c.name << ": the run directory changed";
  }
  // The foreign checkpoint names both hashes and the first differing keys.
  auto foreign = trainyard("run " + exp + " --output-dir " + out + "/foreign --set loop.epochs=3");
  EXPECT_TRUE(contains(foreign.err, "its config hash")) << foreign.err;
  EXPECT_TRUE(contains(foreign.err, "optimizer.lr 0.2 -> 0.05")) << foreign.err;  // as recorded -> as now
  EXPECT_TRUE(contains(foreign.err, "seed 99 -> 7")) << foreign.err;
  // Checkpoints without manifests are taken when asked, once one loads.
  auto accepted = trainyard("run " + exp + " --output-dir " + out +
                            "/no_manifests --set loop.epochs=3 "
                            "--accept-unverified-checkpoints");
  ASSERT_EQ(accepted.exit_code, 0) << accepted.err;
  EXPECT_TRUE(contains(accepted.out, "resuming from " + out + "/no_manifests/own/checkpoints/" + second))
      << accepted.out;
  EXPECT_TRUE(fs::exists(out + "/no_manifests/own/checkpoints/ckpt-e0003-i00000048.pt"));
}

TEST(Checkpoints, AnEditedConfigYamlOfTheRunIsComparedWithTheCheckpoint) {
  const std::string exp = short_experiment("edited"), out = temp_dir("out");
  ASSERT_EQ(trainyard("run " + exp + " --output-dir " + out).exit_code, 0);
  const std::string config = out + "/edited/config.yaml";
  std::string yaml = read_file(config);
  const size_t at = yaml.find("lr: 0.05");
  ASSERT_NE(at, std::string::npos) << yaml;
  write_file(config, yaml.replace(at, 8, "lr: 0.5"));
  auto r = trainyard("run " + config + " --output-dir " + out + " --set loop.epochs=3");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "belongs to another configuration")) << r.err;
  EXPECT_TRUE(contains(r.err, "optimizer.lr 0.05 -> 0.5")) << r.err;
}

// A run started by an older trainyard has no record of the options added
// since: at their defaults they are no change, and the run resumes; set to
// anything else they are, and it does not (unless allowed).
std::string recorded_by_an_older_version(const std::string& exp, const std::string& out) {
  EXPECT_EQ(trainyard("run " + exp + " --output-dir " + out).exit_code, 0);
  // What it recorded: no P x K keys in loop, no network.activation (as if
  // the mlp had gained that option later), and so another config hash.
  const std::string checkpoint = latest_checkpoint(out + "/older");
  nlohmann::ordered_json manifest = nlohmann::ordered_json::parse(read_file(checkpoint + ".manifest.json"));
  for (const char* key : {"classes_per_batch", "samples_per_class", "pk_with_replacement"})
    EXPECT_EQ(manifest["config"]["loop"].erase(key), 1u) << key;
  EXPECT_EQ(manifest["config"]["network"].erase("activation"), 1u);
  manifest["config_sha256"] = std::string(64, '0');
  write_file(checkpoint + ".manifest.json", manifest.dump() + "\n");
  return checkpoint;
}

TEST(Checkpoints, OptionsAddedSinceTheRunStartedAreNoChangeAtTheirDefaults) {
  const std::string exp = short_experiment("older"), out = temp_dir("out");
  const std::string checkpoint = recorded_by_an_older_version(exp, out);
  auto r = trainyard("run " + exp + " --output-dir " + out + " --set loop.epochs=3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "resuming from " + checkpoint)) << r.out;
  EXPECT_FALSE(contains(r.out, "(absent)")) << r.out;
  // Set to another value than the default, such a key is a change like any other.
  const std::string out2 = temp_dir("out2");
  recorded_by_an_older_version(exp, out2);
  r = trainyard("run " + exp + " --output-dir " + out2 + " --set loop.epochs=3 --set network.activation=tanh");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "network.activation (absent) -> tanh")) << r.err;
}

TEST(Checkpoints, EvalOfATruncatedCheckpointIsBadInput) {
  const std::string exp = short_experiment("trunc"), out = temp_dir("out");
  ASSERT_EQ(trainyard("run " + exp + " --output-dir " + out).exit_code, 0);
  const std::string ckpt = out + "/trunc/checkpoints/ckpt-e0002-i00000032.pt", copy = temp_dir("copy") + "/c.pt";
  fs::copy_file(ckpt, copy);
  fs::copy_file(ckpt + ".manifest.json", copy + ".manifest.json");
  fs::resize_file(copy, fs::file_size(copy) / 3);
  auto r = trainyard("eval " + exp + " --checkpoint " + copy + " --output-dir " + out);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  EXPECT_TRUE(contains(r.err, "bytes, the manifest says")) << r.err;
}

TEST(Checkpoints, StaleTemporariesAreRemovedAndRotationKeepsTheNewestAndTheBest) {
  const std::string exp = short_experiment("rot", "stopping: {monitor: test_loss}\ncheckpoint: {keep: 2}\n");
  const std::string out = temp_dir("out"), dir = out + "/rot/checkpoints";
  ASSERT_EQ(trainyard("run " + exp + " --output-dir " + out + " --set loop.epochs=1").exit_code, 0);
  write_file(dir + "/ckpt-e0009-i00000999.pt.tmp-4242", "half a checkpoint");
  write_file(dir + "/ckpt-e0008-i00000888.pt.manifest.json", "{}");
  auto r = trainyard("run " + exp + " --output-dir " + out + " --set loop.epochs=5");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "removed 2 leftover file(s) of an interrupted checkpoint write")) << r.out;
  std::vector<std::string> names;
  for (const auto& f : fs::directory_iterator(dir)) names.push_back(f.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"best.pt", "best.pt.manifest.json", "ckpt-e0004-i00000064.pt",
                                             "ckpt-e0004-i00000064.pt.manifest.json", "ckpt-e0005-i00000080.pt",
                                             "ckpt-e0005-i00000080.pt.manifest.json"}));
  // best.pt verifies against its manifest: eval loads it.
  auto e = trainyard("eval " + exp + " --checkpoint " + dir + "/best.pt");
  EXPECT_EQ(e.exit_code, 0) << e.err;
}

TEST(Checkpoints, AFullDiskLeavesThePreviousCheckpointIntactAndSaysSo) {
  const std::string exp = short_experiment("full"), out = temp_dir("out");
  const std::string big = " --set network.hidden_sizes=[512,512] --set network.dropout=0.0";
  ASSERT_EQ(trainyard("run " + exp + " --output-dir " + out + big + " --set loop.epochs=1").exit_code, 0);
  const std::string first = out + "/full/checkpoints/ckpt-e0001-i00000016.pt";
  const std::string before = read_file(first);
  ASSERT_GT(before.size(), 1000000u);
  // A 256 KB file size limit: metrics and configs fit, the next checkpoint does not.
  auto r = run_command("bash -c 'ulimit -f 256; " + trainyard_binary() + " run " + exp + " --output-dir " + out + big +
                       " --set loop.epochs=2'");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "checkpoint not written")) << r.err;
  EXPECT_TRUE(contains(r.err, "the previous checkpoint " + first + " is intact")) << r.err;
  EXPECT_EQ(read_file(first), before);
  for (const auto& f : fs::directory_iterator(out + "/full/checkpoints"))
    EXPECT_EQ(f.path().filename().string().find(".tmp-"), std::string::npos) << f.path();
  auto again = trainyard("run " + exp + " --output-dir " + out + big + " --set loop.epochs=2");
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_TRUE(contains(again.out, "resuming from " + first)) << again.out;
}

// An experiment with the misbehaving fixture components (tests/fixtures/misbehaving.cpp).
std::string misbehaving_experiment(const std::string& name, const std::string& more, const std::string& loop = "") {
  std::string yaml = synthetic_experiment(name, "plugin_dirs: [" + fixture_dir("misbehaving") + "]\n" + more);
  const std::string usual = "loop: {epochs: 2, batch_per_device: 32, log_every_iters: 4}";
  if (!loop.empty()) yaml.replace(yaml.find(usual), usual.size(), loop);
  const std::string path = temp_dir("exp-" + name) + "/" + name + ".yaml";
  write_file(path, yaml);
  return path;
}

// Rewrites one entry of an experiment file (misbehaving_experiment's).
void replace_in(const std::string& path, const std::string& from, const std::string& to) {
  std::string yaml = read_file(path);
  yaml.replace(yaml.find(from), from.size(), to);
  write_file(path, yaml);
}

const char* kSyntheticTrain = "{plugin: synthetic, size: 512, num_classes: 4, shape: [1, 4, 4], seed: 1}";

TEST(Watchdog, AHungCallbackIsNamedWithEveryThreadsStackAndExitFive) {
  const std::string exp = misbehaving_experiment("hung", "callbacks: [{plugin: hang, hook: after_epoch}]\n",
                                                 "loop: {epochs: 2, batch_per_device: 32, stall_timeout_secs: 2}");
  const std::string out = temp_dir("out");
  const auto t0 = std::chrono::steady_clock::now();
  auto r = trainyard("run " + exp + " --output-dir " + out);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.exit_code, 5) << r.err;
  EXPECT_LT(secs, 30) << "the watchdog did not end the run";
  EXPECT_TRUE(contains(r.err, "error: stalled: no progress for 2 s (loop.stall_timeout_secs 2)")) << r.err;
  EXPECT_TRUE(contains(r.err, "callback 'hang'")) << r.err;
  EXPECT_TRUE(contains(r.err, "in after_epoch, at epoch 1, iteration 16")) << r.err;
  const std::string traces = read_file(out + "/hung/stall-rank0.txt");
  EXPECT_TRUE(contains(traces, "the main thread")) << traces;
  EXPECT_TRUE(contains(traces, "libmisbehaving.so")) << traces;  // the hung frame, in the plugin
  EXPECT_TRUE(contains(traces, "bin/trainyard(+0x")) << traces;  // the host's frames under it
}

TEST(Watchdog, AStopSignalIntoAHungCallbackEndsTheRunAfterTheGrace) {
  const std::string exp =
      misbehaving_experiment("deaf", "callbacks: [{plugin: hang, hook: after_epoch}]\n",
                             "loop: {epochs: 2, batch_per_device: 32, stall_timeout_secs: 600, stop_grace_secs: 2}");
  const std::string out = temp_dir("out");
  // metrics.jsonl has the epoch's train line before after_epoch hangs.
  auto r = interrupted("run " + exp + " --output-dir " + out, out + "/deaf/metrics.jsonl", 300, "TERM");
  EXPECT_EQ(r.exit_code, 5) << r.err;
  EXPECT_TRUE(contains(r.err, "SIGTERM received, but the loop did not reach a boundary within 2 s")) << r.err;
  EXPECT_TRUE(contains(r.err, "callback 'hang'")) << r.err;
  // The acknowledgement itself names what runs (a scheduler's kill may come before the grace ends).
  EXPECT_TRUE(contains(r.err, "trainyard: SIGTERM received while running callback 'hang'")) << r.err;
  EXPECT_TRUE(contains(r.err, "in after_epoch, at epoch 1, iteration 16 (for ")) << r.err;
  // The epoch's checkpoint comes after after_epoch: none exists, and the line says so.
  EXPECT_EQ(latest_checkpoint(out + "/deaf"), "");
  EXPECT_TRUE(contains(r.err,
                       "; no checkpoint was written: run the same command to start again from the beginning "
                       "(exit code 5)"))
      << r.err;
}

TEST(Watchdog, SigtermIntoAHungIterationIsNamedWithinTheDefaultGraceAndTheLockIsFreed) {
  // The defaults: stall limit 1800 s, stop grace 15 s (under Slurm's and
  // Kubernetes' 30 s between SIGTERM and SIGKILL).
  const std::string marker = temp_dir("marker") + "/hanging";
  const std::string exp = misbehaving_experiment(
      "deaf_iter", "callbacks: [{plugin: hang, hook: after_train_iter, at: 5, marker: " + marker + "}]\n",
      "loop: {epochs: 2, batch_per_device: 32}");
  const std::string out = temp_dir("out");
  auto r = interrupted("run " + exp + " --output-dir " + out, marker, 0, "TERM");
  EXPECT_EQ(r.exit_code, 5) << r.err;
  const auto errors = nonempty_lines(r.err);
  ASSERT_FALSE(errors.empty());
  const std::string& error = errors.back();
  EXPECT_TRUE(contains(error,
                       "error: stalled: SIGTERM received, but the loop did not reach a boundary within 15 s "
                       "(loop.stop_grace_secs)"))
      << r.err;
  EXPECT_TRUE(contains(error, "callback 'hang'")) << error;
  EXPECT_TRUE(contains(error, "in after_train_iter, at epoch 1, iteration 5")) << error;
  EXPECT_TRUE(contains(error, "stack traces of every thread in " + out + "/deaf_iter/stall-rank0.txt")) << error;
  EXPECT_TRUE(contains(read_file(out + "/deaf_iter/stall-rank0.txt"), "libmisbehaving.so"));
  EXPECT_FALSE(fs::exists(out + "/deaf_iter.lock")) << "the next run would have to take the lock over";
  // In the first epoch no checkpoint exists: the lines say so instead of calling one whole.
  EXPECT_TRUE(contains(error, "; no checkpoint was written: run the same command to start again from the beginning"))
      << error;
  EXPECT_TRUE(contains(r.err, "trainyard: SIGTERM received while running callback 'hang'")) << r.err;
  EXPECT_TRUE(contains(r.err, "in after_train_iter, at epoch 1, iteration 5 (for ")) << r.err;
}

// A run whose callback hangs after iteration `at`, sent SIGINT, then SIGINT
// again once the first was acknowledged (an event, not a delay): its stderr
// and exit code. `out`: the output folder.
std::pair<std::string, int> interrupted_twice(const std::string& name, int at, const std::string& out) {
  const std::string dir = temp_dir("second-sigint-" + name), marker = dir + "/hanging";
  const std::string exp = misbehaving_experiment(
      name,
      "callbacks: [{plugin: hang, hook: after_train_iter, at: " + std::to_string(at) + ", marker: " + marker + "}]\n",
      "loop: {epochs: 2, batch_per_device: 32}");
  write_file(dir + "/run.sh", trainyard_binary() + " run " + exp + " --output-dir " + out + " >" + dir + "/out 2>" +
                                  dir +
                                  "/err &\npid=$!\n"
                                  "for i in $(seq 15000); do [ -s " +
                                  marker +
                                  " ] && break; sleep 0.02; done\n"
                                  "kill -INT $pid\n"
                                  "for i in $(seq 15000); do grep -q 'SIGINT received while running' " +
                                  dir + "/out " + dir +
                                  "/err && break; sleep 0.02; done\n"
                                  "kill -INT $pid\nwait $pid\necho $? >" +
                                  dir + "/rc\n");
  run_command("bash " + dir + "/run.sh");
  return {read_file(dir + "/err"), std::stoi(read_file(dir + "/rc"))};
}

TEST(Watchdog, ASecondSigintNamesWhatHangsAndFreesTheLock) {
  const std::string out = temp_dir("out");
  const auto [err, code] = interrupted_twice("impatient", 3, out);
  EXPECT_EQ(code, 130);
  EXPECT_TRUE(contains(err, "error: second SIGINT: aborted without a checkpoint while running callback 'hang'")) << err;
  EXPECT_TRUE(contains(err, "in after_train_iter, at epoch 1, iteration 3")) << err;
  // The first SIGINT's acknowledgement already named it, and for how long it had run.
  EXPECT_TRUE(contains(err, "trainyard: SIGINT received while running callback 'hang'")) << err;
  EXPECT_TRUE(contains(err, "in after_train_iter, at epoch 1, iteration 3 (for ")) << err;
  // In the first epoch there is no checkpoint to call whole.
  EXPECT_TRUE(contains(err,
                       "; no checkpoint was written: run the same command to start again from the beginning "
                       "(exit code 130)"))
      << err;
  EXPECT_FALSE(contains(err, "is whole")) << err;
  EXPECT_FALSE(fs::exists(out + "/impatient.lock"));
}

TEST(Watchdog, ASecondSigintAfterACheckpointNamesTheCheckpointThatIsWhole) {
  // 16 iterations an epoch: iteration 20 is in epoch 2, after epoch 1's checkpoint.
  const std::string out = temp_dir("out");
  const auto [err, code] = interrupted_twice("later", 20, out);
  EXPECT_EQ(code, 130);
  const std::string checkpoint = latest_checkpoint(out + "/later");
  ASSERT_FALSE(checkpoint.empty()) << err;
  EXPECT_TRUE(contains(err, "in after_train_iter, at epoch 2, iteration 20")) << err;
  EXPECT_TRUE(contains(err, "; the last checkpoint written, " + checkpoint +
                                ", is whole: run the same command to resume from it (exit code 130)"))
      << err;
}

TEST(Watchdog, AStopSignalAsTheProcessStartsIsAnsweredWithOneLine) {
  // From the executable's preinit function on (before LibTorch's static
  // initialisers run): one line and exit 4, never a silent death by the
  // signal. The script waits for the event itself, SIGTERM caught in
  // /proc/PID/status, then signals at once and at later moments of start-up.
  // The training data takes 30 s to load: every signal falls in start-up.
  const std::string exp = misbehaving_experiment("early", "");
  replace_in(exp, kSyntheticTrain, "{plugin: slow_start, load_secs: 30}");
  for (const char* delay : {"0", "0.05", "0.15", "0.3"}) {
    const std::string dir = temp_dir("early-signal"), out = temp_dir("out");
    write_file(dir + "/run.sh",
               trainyard_binary() + " run " + exp + " --output-dir " + out + " >" + dir + "/out 2>" + dir +
                   "/err &\npid=$!\n"
                   // bash builtins only: the poll starts no process, so a loaded machine cannot
                   // delay it past the start-up it watches
                   "bin=" +
                   trainyard_binary() +
                   "\n"
                   "caught() { [ /proc/$pid/exe -ef \"$bin\" ] || return 1; m=; "
                   "while read -r k v; do [ \"$k\" = SigCgt: ] && m=$v; done </proc/$pid/status 2>/dev/null; "
                   "[ -n \"$m\" ] && [ $(( (0x$m >> 14) & 1 )) -eq 1 ]; }\n"  // bit 14: SIGTERM (15)
                   "for ((i = 0; i < 5000000; i++)); do caught && break; done\n"
                   // caught before the experiment's plugin library was loaded: before main() ran
                   "grep -q libmisbehaving.so /proc/$pid/maps || echo early >" +
                   dir +
                   "/when\n"
                   "sleep " +
                   delay + "\nkill -TERM $pid\nwait $pid\necho $? >" + dir + "/rc\n");
    run_command("bash " + dir + "/run.sh");
    if (std::string(delay) == "0") EXPECT_TRUE(fs::exists(dir + "/when")) << "the handler came after start-up began";
    const int code = std::stoi(read_file(dir + "/rc"));
    const std::string err = read_file(dir + "/err");
    EXPECT_EQ(code, 4) << "after " << delay << " s: " << err;
    EXPECT_TRUE(contains(err, "SIGTERM during start-up: stopped before training began")) << err;
    EXPECT_EQ(nonempty_lines(err).size(), 1u) << err;
  }
}

TEST(Watchdog, AStopSignalWhileTheDataLoadsEndsTheProcessAtOnceAndWritesNothing) {
  const std::string exp = misbehaving_experiment("slow", "");
  replace_in(exp, kSyntheticTrain, "{plugin: slow_start, load_secs: 60}");
  replace_in(exp, "{plugin: synthetic, size: 128, num_classes: 4, shape: [1, 4, 4], seed: 2}",
             "{plugin: slow_start, load_secs: 0}");
  const std::string out = temp_dir("out");
  const auto t0 = std::chrono::steady_clock::now();
  auto r = interrupted("run " + exp + " --output-dir " + out, exp, 1500, "TERM");  // exp exists: 1.5 s after start
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.exit_code, 4) << r.err;
  EXPECT_LT(secs, 20);
  EXPECT_TRUE(contains(r.err, "SIGTERM during start-up: stopped before training began")) << r.err;
  EXPECT_TRUE(fs::is_empty(out)) << "something was written";
}

TEST(RunFiles, ALinkPlantedInTheRunDirectoryIsNeverWrittenThrough) {
  // metrics.jsonl and provenance.jsonl are appended to, the log is opened
  // by name: each refuses a symbolic link where it should be (exit 2), and
  // the link's target is left as it was.
  const std::string exp = misbehaving_experiment("planted", "", "loop: {epochs: 1, batch_per_device: 32}");
  const std::string out = temp_dir("out"), run = out + "/planted", victim = temp_dir("victim") + "/victim.txt";
  ASSERT_EQ(trainyard("run " + exp + " --output-dir " + out).exit_code, 0);
  for (const char* file : {"metrics.jsonl", "provenance.jsonl", "trainyard.log"}) {
    write_file(victim, "not trainyard's\n");
    const std::string kept = read_file(run + "/" + file);
    fs::remove(run + "/" + file);
    fs::create_symlink(victim, run + "/" + file);
    auto r = trainyard("run " + exp + " --output-dir " + out + " --set loop.epochs=2");
    EXPECT_EQ(read_file(victim), "not trainyard's\n") << file << " was written through";
    // Refused with the link named, or (metrics.jsonl, rewritten to the
    // checkpoint's position on resume) replaced by a file of its own.
    if (r.exit_code == 0)
      EXPECT_FALSE(fs::is_symlink(run + "/" + file)) << file;
    else
      EXPECT_TRUE(contains(r.err, run + "/" + file + ": a symbolic link")) << file << ": " << r.err;
    if (std::string(file) != "metrics.jsonl") EXPECT_NE(r.exit_code, 0) << file;
    fs::remove(run + "/" + file);
    write_file(run + "/" + file, kept);
  }
}

TEST(ExitGuard, AComponentThatCallsExitIsNamedAndTheRunFails) {
  const std::string exp = misbehaving_experiment("quits", "");
  replace_in(exp, "{plugin: mlp, hidden_sizes: [32], dropout: 0.1}", "{plugin: exits, code: 0, at: 3}");
  auto r = trainyard("run " + exp + " --output-dir " + temp_dir("out"));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "error: network 'exits'")) << r.err;
  EXPECT_TRUE(contains(r.err, "called exit() in forward")) << r.err;
  EXPECT_FALSE(contains(r.out, "trainyard: done")) << r.out;
}

}  // namespace
}  // namespace trainyard::test
