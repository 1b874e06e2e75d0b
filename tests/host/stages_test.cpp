// Multi-stage runs: inheritance between stages, weights carried over, resume
// into the right stage.
#include <gtest/gtest.h>

#include <filesystem>

#include "config/experiment.h"
#include "plugins/library_loader.h"
#include "support/support.h"
#include "trainyard/error.h"

namespace fs = std::filesystem;

namespace trainyard::host {
namespace {

// A resolved option as the host holds it (Options::get<T> is the deprecated
// plugin-side 0.x call).
template <class T>
const T& option(const Options& options, const std::string& key) {
  return std::get<T>(options.values().at(key));
}

// Stage 1 trains the classifier only (layers.0 frozen) with SGD at 0.1 (momentum
// from the base); stage 2 unfreezes, trains with Adam at 0.001 on a cosine schedule.
const char* kStages =
    "stages:\n"
    "  - name: head\n"
    "    network: {freeze: [layers.0]}\n"
    "    optimizer: {lr: 0.1}\n"
    "  - name: all\n"
    "    loop: {epochs: 2}\n"
    "    network: {freeze: []}\n"
    "    optimizer: {plugin: adam, lr: 0.001}\n"
    "    schedule: {policy: cosine}\n";

std::string staged_experiment(const std::string& name, const std::string& stages = kStages) {
  std::string yaml = test::synthetic_experiment(name, stages);
  yaml.replace(yaml.find("dropout: 0.1"), 12, "dropout: 0.0");
  yaml.replace(yaml.find("epochs: 2,"), 10, "epochs: 1,");
  const std::string path = test::temp_dir("exp-" + name) + "/" + name + ".yaml";
  test::write_file(path, yaml);
  return path;
}

const Registry& registry() { return test::builtin_registry(); }

std::string error_of(const std::string& stages) {
  try {
    validate_experiment(read_experiment(staged_experiment("bad", stages), {}), registry());
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

// Copies OUT/NAME into COPY/NAME as if the run had been killed right after
// writing checkpoint `keep` (later checkpoints and their manifests removed),
// then runs the experiment again there: it resumes.
test::CommandResult resume_copy(const std::string& exp, const std::string& out, const std::string& name,
                                const std::string& keep, const std::string& copy) {
  fs::create_directories(copy);
  fs::copy(out + "/" + name, copy + "/" + name, fs::copy_options::recursive);
  for (const auto& f : fs::directory_iterator(copy + "/" + name + "/checkpoints")) {
    const std::string file = f.path().filename().string();
    if (file.substr(0, file.find(".pt") + 3) > keep) fs::remove(f.path());
  }
  return test::trainyard("run " + exp + " --output-dir " + copy);
}

TEST(Stages, EachStageInheritsTheBaseAndEarlierStagesAndOverridesItsOwnKeys) {
  Experiment e = validate_experiment(read_experiment(staged_experiment("inherit"), {}), registry());
  ASSERT_EQ(e.stages.size(), 2u);
  const Experiment &head = e.stages[0], &all = e.stages[1];
  EXPECT_EQ(head.stage_name, "head");
  EXPECT_EQ(all.stage_name, "all");
  EXPECT_EQ(head.optimizer.plugin, "sgd");
  EXPECT_DOUBLE_EQ(option<double>(head.optimizer.options, "lr"), 0.1);
  EXPECT_DOUBLE_EQ(option<double>(head.optimizer.options, "momentum"), 0.9);  // from the base
  EXPECT_EQ(head.network.freeze, std::vector<std::string>{"layers.0"});
  EXPECT_EQ(head.loop.epochs, 1);
  EXPECT_EQ(head.schedule.policy, "constant");
  // Another optimizer plugin replaces the whole map: no SGD momentum reaches Adam.
  EXPECT_EQ(all.optimizer.plugin, "adam");
  EXPECT_DOUBLE_EQ(option<double>(all.optimizer.options, "lr"), 0.001);
  EXPECT_FALSE(all.optimizer.options.has("momentum"));
  EXPECT_TRUE(all.network.freeze.empty());
  EXPECT_EQ(all.loop.epochs, 2);
  EXPECT_EQ(all.loop.batch_per_device, 32);  // from the base, through stage 1
  EXPECT_EQ(all.schedule.policy, "cosine");
  // An unnamed stage is named by its position; --set reaches into stages.
  Experiment set = validate_experiment(
      read_experiment(staged_experiment("set", "stages: [{optimizer: {lr: 0.2}}, {loop: {epochs: 3}}]"),
                      {"stages.1.loop.epochs=4"}),
      registry());
  EXPECT_EQ(set.stages[1].stage_name, "stage2");
  EXPECT_EQ(set.stages[1].loop.epochs, 4);
  EXPECT_DOUBLE_EQ(option<double>(set.stages[1].optimizer.options, "lr"), 0.2);  // from stage 1
}

TEST(Stages, WhatAStageCannotSetIsAnErrorNamingTheStage) {
  EXPECT_TRUE(test::contains(error_of("stages: [{meters: []}]"), "a stage cannot set 'meters'"))
      << error_of("stages: [{meters: []}]");
  EXPECT_TRUE(test::contains(error_of("stages: [{meters: []}]"), "set 'meters' at the top level"));
  const std::string net = error_of("stages: [{network: {hidden_sizes: [8]}}]");
  EXPECT_TRUE(test::contains(net, "a stage cannot change the network's 'hidden_sizes'")) << net;
  EXPECT_TRUE(test::contains(net, ":")) << net;
  const std::string opt = error_of("stages: [{name: a}, {name: b, optimizer: {lr: 0.1, momentun: 0.5}}]");
  EXPECT_TRUE(test::contains(opt, "stage 2 'b': ")) << opt;
  EXPECT_TRUE(test::contains(opt, "momentun")) << opt;
  EXPECT_TRUE(test::contains(error_of("stages: [{name: a}, {name: a}]"), "two stages are named 'a'"));
  EXPECT_TRUE(test::contains(error_of("stages: []"), "expected a non-empty list of stages"));
  // A later stage's bad freeze path fails before anything trains.
  auto r = test::trainyard(
      "run " + staged_experiment("freeze", "stages: [{name: a}, {name: b, network: {freeze: [layers.9]}}]") +
      " --output-dir " + test::temp_dir("out"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(test::contains(r.err, "stage 2 'b': ")) << r.err;
  EXPECT_TRUE(test::contains(r.err, "no submodule 'layers.9'")) << r.err;
  EXPECT_FALSE(test::contains(r.out, "stage 1/2")) << r.out;
}

TEST(Stages, WeightsCarryOverAndAnInterruptedRunResumesIntoTheRightStage) {
  const std::string exp = staged_experiment("staged"), out = test::temp_dir("out");
  auto r = test::trainyard("run " + exp + " --output-dir " + out + "/whole");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(test::contains(r.out, "stage 1/2 'head': epochs 1-1, optimizer sgd")) << r.out;
  EXPECT_TRUE(test::contains(r.out, "stage 2/2 'all': epochs 2-3, optimizer adam")) << r.out;
  const std::string ckpts = out + "/whole/staged/checkpoints/";
  // Stage 1 left the frozen layer as initialized (the lr-0 run shows the initial weights).
  auto initial = test::trainyard("run " + exp + " --output-dir " + out +
                                 "/initial --set stages.0.optimizer.lr=0"
                                 " --set stages.1.loop.epochs=0");
  ASSERT_EQ(initial.exit_code, 0) << initial.err;
  const std::string start = out + "/initial/staged/checkpoints/ckpt-e0001-i00000016.pt";
  EXPECT_TRUE(test::checkpoint_tensor(ckpts + "ckpt-e0001-i00000016.pt", "layers.0.weight")
                  .equal(test::checkpoint_tensor(start, "layers.0.weight")));
  EXPECT_FALSE(test::checkpoint_tensor(ckpts + "ckpt-e0001-i00000016.pt", "layers.2.weight")
                   .equal(test::checkpoint_tensor(start, "layers.2.weight")));
  // Stage 2 trains everything, starting from stage 1's weights.
  EXPECT_FALSE(test::checkpoint_tensor(ckpts + "ckpt-e0002-i00000032.pt", "layers.0.weight")
                   .equal(test::checkpoint_tensor(start, "layers.0.weight")));
  // Each stage's events carry its name and its own rates: 0.1 in stage 1; Adam's 0.001 decaying in stage 2.
  bool head = false, all = false;
  for (const auto& line : test::read_lines(out + "/whole/staged/metrics.jsonl")) {
    if (test::contains(line, "\"stage\": \"head\"") && test::contains(line, "\"lr\": 0.1,")) head = true;
    if (test::contains(line, "\"stage\": \"all\"") && test::contains(line, "\"lr\": 0.000")) all = true;
  }
  EXPECT_TRUE(head && all);

  // Interrupted inside stage 2 (its first epoch's checkpoint is the latest),
  // and at the boundary (stage 1's last checkpoint): both end bit-identical.
  for (const char* keep : {"ckpt-e0002-i00000032.pt", "ckpt-e0001-i00000016.pt"}) {
    const std::string copy = out + "/resumed-" + std::string(keep).substr(5, 5);
    auto resumed = resume_copy(exp, out + "/whole", "staged", keep, copy);
    ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
    if (std::string(keep) == "ckpt-e0002-i00000032.pt") {
      EXPECT_TRUE(test::contains(resumed.out, "stage 2 'all')")) << resumed.out;
      EXPECT_FALSE(test::contains(resumed.out, "stage 1/2")) << resumed.out;
    } else {
      EXPECT_TRUE(test::contains(resumed.out, "stage 1 'head')")) << resumed.out;
      EXPECT_TRUE(test::contains(resumed.out, "stage 2/2 'all'")) << resumed.out;
    }
    EXPECT_EQ(test::compare_checkpoint_networks(ckpts + "ckpt-e0003-i00000048.pt",
                                                copy + "/staged/checkpoints/ckpt-e0003-i00000048.pt"),
              "")
        << keep;
  }
}

TEST(Stages, AStageEndedByItsTargetStaysEndedOnResumeAndTheNextTrainsItsOwnEpochs) {
  // Stage 1 may train 3 epochs but reaches its (trivial) target after the
  // first; stage 2 trains its own 1 epoch (checkpointing mid-epoch) with a
  // target it never reaches.
  const std::string exp = staged_experiment("target",
                                            "output: {keep_checkpoints: 0}\n"
                                            "stages:\n"
                                            "  - name: warm\n"
                                            "    loop: {epochs: 3}\n"
                                            "    stopping: {target_meter: test_accuracy_top2, target: 0.0}\n"
                                            "  - name: rest\n"
                                            "    loop: {epochs: 1, checkpoint_every_iters: 8}\n"
                                            "    stopping: {target: 1.1}\n");
  const std::string out = test::temp_dir("out-target");
  auto r = test::trainyard("run " + exp + " --output-dir " + out + "/whole");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(test::contains(r.out + r.err, "stopping: target reached: test_accuracy_top2")) << r.out << r.err;
  EXPECT_TRUE(test::contains(r.out, "stage 2/2 'rest': epochs 2-2")) << r.out;
  const std::string ckpts = out + "/whole/target/checkpoints/";
  ASSERT_TRUE(fs::exists(ckpts + "ckpt-e0002-i00000032.pt"));
  EXPECT_FALSE(fs::exists(ckpts + "ckpt-e0003-i00000048.pt"));
  EXPECT_TRUE(test::contains(test::read_file(out + "/whole/target/summary.json"), "\"epochs_completed\": 2"));

  // Killed after stage 1's checkpoint (the target was reached there), and
  // inside stage 2: stage 1 does not train on, and both end bit-identical.
  for (const char* keep : {"ckpt-e0001-i00000016.pt", "ckpt-e0001-i00000024.pt"}) {
    const std::string copy = out + "/resumed-" + std::string(keep).substr(12, 8);
    auto resumed = resume_copy(exp, out + "/whole", "target", keep, copy);
    ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
    if (std::string(keep) == "ckpt-e0001-i00000016.pt") {
      EXPECT_TRUE(test::contains(resumed.out + resumed.err, "target reached: test_accuracy_top2")) << resumed.out;
      EXPECT_TRUE(test::contains(resumed.out, "stage 2/2 'rest': epochs 2-2")) << resumed.out;
    } else {
      EXPECT_TRUE(test::contains(resumed.out, "stage 2 'rest')")) << resumed.out;
    }
    EXPECT_FALSE(fs::exists(copy + "/target/checkpoints/ckpt-e0003-i00000048.pt")) << keep;
    EXPECT_EQ(test::compare_checkpoint_networks(ckpts + "ckpt-e0002-i00000032.pt",
                                                copy + "/target/checkpoints/ckpt-e0002-i00000032.pt"),
              "")
        << keep;
  }
}

}  // namespace
}  // namespace trainyard::host
