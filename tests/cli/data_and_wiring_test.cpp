// Data that is inconsistent rather than damaged, and components that do not
// fit together: each is one clear error and exit 2 from `run` (before
// anything is written) and from `validate`, found by the loader's batch
// contract or the one-batch wiring check (host/train/wiring_check.cpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include <opencv2/core.hpp>

#include "support/support.h"
#include "trainyard/image_codec.h"
#include "trainyard/record.h"

namespace fs = std::filesystem;

namespace trainyard::test {
namespace {

// The fixture components fit as written; each case changes one line.
std::string fitting_experiment() {
  return "name: fit\n"
         "plugin_dirs: [" +
         fixture_dir("misbehaving") +
         "]\n"
         "dataset:\n"
         "  train: {plugin: misfit_data}\n"
         "  test: {plugin: misfit_data}\n"
         "network: {plugin: misfit}\n"
         "loss: {plugin: cross_entropy}\n"
         "optimizer: {plugin: sgd, lr: 0.1}\n"
         "meters: [{plugin: loss}, {plugin: topk_accuracy}]\n"
         "loop: {epochs: 1, batch_per_device: 16}\n";
}

std::string with(std::string yaml, const std::string& from, const std::string& to) {
  const size_t at = yaml.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? yaml : yaml.replace(at, from.size(), to);
}

void expect_refused(const std::string& name, const std::string& yaml, const std::string& expected) {
  const std::string exp = temp_dir("exp-" + name) + "/" + name + ".yaml";
  write_file(exp, yaml);
  for (const std::string command : {"run", "validate"}) {
    const std::string out = temp_dir("out-" + name + "-" + command);
    auto r = trainyard(command + " " + exp + (command == "run" ? " --output-dir " + out : ""));
    EXPECT_EQ(r.exit_code, 2) << name << " (" << command << "): " << r.err;
    EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << name << " (" << command << "): " << r.err;
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << name << " (" << command << "): " << r.err;
    EXPECT_TRUE(contains(r.err, expected))
        << name << " (" << command << "): expected '" << expected << "' in: " << r.err;
    EXPECT_TRUE(fs::is_empty(out)) << name << ": something was written";
  }
}

TEST(Wiring, TheFixtureComponentsFitAsWritten) {
  const std::string exp = temp_dir("exp") + "/fit.yaml";
  write_file(exp, fitting_experiment());
  auto r = trainyard("run " + exp + " --output-dir " + temp_dir("out"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(Wiring, ComponentsThatDoNotFitAreNamedWithTheirShapes) {
  const std::string base = fitting_experiment(), net = "network: {plugin: misfit}",
                    train = "train: {plugin: misfit_data}";
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"seven_outputs", with(base, net, "network: {plugin: misfit, outputs: 7}"),
       "network 'misfit' from libmisbehaving.so 1.0.0): forward returned [4, 7] for a training batch of 4 samples of "
       "[1, 4, 4]; expected [4, 4]: the training dataset has 4 classes"},
      {"three_outputs", with(base, net, "network: {plugin: misfit, outputs: 3}"), "forward returned [4, 3]"},
      {"half_batch", with(base, net, "network: {plugin: misfit, how: half_batch}"),
       "forward returned [2, 4] for a training batch of 4 samples of [1, 4, 4]; expected one row per sample: 4 rows"},
      {"undefined_output", with(base, net, "network: {plugin: misfit, how: undefined}"),
       "forward returned an undefined tensor"},
      {"integer_output", with(base, net, "network: {plugin: misfit, how: integers}"), "forward returned Long values"},
      {"short_batch", with(base, train, "train: {plugin: misfit_data, how: short_batch}"),
       "(dataset 'misfit_data' from libmisbehaving.so 1.0.0): get_batch returned input [1, 1, 4, 4] and target [1] "
       "for 4 indices; expected 4 rows in both"},
      {"label_beyond_classes", with(base, train, "train: {plugin: misfit_data, how: labels_beyond}"),
       "sample 63 has label 40; expected a class index from 0 to 3 (the dataset has 4 classes)"},
      {"negative_size", with(base, train, "train: {plugin: misfit_data, how: negative_size}"),
       "(dataset 'misfit_data' from libmisbehaving.so 1.0.0): size() returned -64; expected the number of samples, 0 "
       "or more, got -64"},
      {"negative_test_size",
       with(base, "test: {plugin: misfit_data}", "test: {plugin: misfit_data, how: negative_size}"),
       "(dataset 'misfit_data' from libmisbehaving.so 1.0.0): size() returned -64"},
      {"mixed_sizes", with(base, train, "train: {plugin: misfit_data, how: mixed_sizes}"),
       "samples 0 and 21 differ in input shape; expected the samples of a batch to have one shape, got [1, 4, 4] and "
       "[1, 5, 5]"},
      {"vector_loss", with(base, "loss: {plugin: cross_entropy}", "loss: {plugin: vector_loss}"),
       "(loss 'vector_loss' from libmisbehaving.so 1.0.0): compute returned [4] Float"},
      {"test_has_other_classes",
       with(base, "test: {plugin: misfit_data}",
            "test: {plugin: synthetic, size: 32, num_classes: 3, shape: [1, 4, 4]}"),
       "the test dataset has 3 classes, the training dataset 4"},
      {"test_has_other_shape",
       with(base, "test: {plugin: misfit_data}",
            "test: {plugin: synthetic, size: 32, num_classes: 4, shape: [1, 5, 5]}"),
       "the test samples are [1, 5, 5], the training samples [1, 4, 4]"},
      {"test_has_other_channels",
       with(base, "test: {plugin: misfit_data}",
            "test: {plugin: synthetic, size: 32, num_classes: 4, shape: [2, 4, 4]}"),
       "test samples of shape [2, 4, 4], training samples [1, 4, 4]; expected samples of one rank and channel count "
       "in both splits"},
  };
  for (const auto& [name, yaml, expected] : cases) expect_refused(name, yaml, expected);
  EXPECT_GE(cases.size(), 13u);
}

TEST(Wiring, ANetworkThatMisfitsOnlyInTrainingIsNamedWithBothShapesNotTheLoss) {
  // Was: "loss 'cross_entropy' ... failed in compute: Expected input
  // batch_size (8) to match target batch_size (16)", and "tensor does not
  // have a device": the wiring check runs in eval mode and saw a fitting output.
  const std::string base =
      with(fitting_experiment(), "network: {plugin: misfit}", "network: {plugin: misfit, how: HOW}");
  for (const auto& [how, expected] : std::vector<std::pair<std::string, std::string>>{
           {"half_batch_in_training",
            "network 'misfit' from libmisbehaving.so 1.0.0): forward returned [8, 4] for a training batch of 16 "
            "samples, input [16, 1, 4, 4], target [16]; expected one row per sample: 16 rows"},
           {"undefined_in_training",
            "network 'misfit' from libmisbehaving.so 1.0.0): forward returned an undefined tensor"},
           {"integers_in_training", "network 'misfit' from libmisbehaving.so 1.0.0): forward returned Long values"},
           {"on_meta_in_training",
            "network 'misfit' from libmisbehaving.so 1.0.0): forward returned a tensor on meta for a training "
            "batch"}}) {
    const std::string exp = temp_dir("exp-" + how) + "/fit.yaml", out = temp_dir("out-" + how);
    std::string yaml = base;
    yaml.replace(yaml.find("HOW"), 3, how);
    write_file(exp, yaml);
    auto r = trainyard("run " + exp + " --output-dir " + out);
    EXPECT_EQ(r.exit_code, 2) << how << ": " << r.err;
    EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << how << ": " << r.err;
    EXPECT_TRUE(contains(r.err, expected)) << how << ": " << r.err;
    EXPECT_FALSE(contains(r.err, "loss 'cross_entropy'")) << how << ": the loss is blamed: " << r.err;
  }
}

TEST(DataConsistency, ABadLabelFoundDuringTrainingIsBadInputAndNoCheckpointIsWritten) {
  // Sample 10 is not among the few the wiring check reads: the loader's
  // batch contract finds it in the first epoch.
  const std::string exp = temp_dir("exp") + "/late.yaml", out = temp_dir("out");
  write_file(
      exp, with(fitting_experiment(), "train: {plugin: misfit_data}", "train: {plugin: misfit_data, how: late_label}"));
  auto r = trainyard("run " + exp + " --output-dir " + out);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
  EXPECT_TRUE(contains(r.err, "dataset 'misfit_data' from libmisbehaving.so 1.0.0): sample 10 has label 40")) << r.err;
  EXPECT_EQ(latest_checkpoint(out + "/fit"), "");
  // Nothing half-written: the run directory this run made is gone, and the lock with it.
  EXPECT_TRUE(fs::is_empty(out)) << "left behind: " << fs::directory_iterator(out)->path();
  // With --fresh, the previous run directory comes back as it was.
  fs::create_directories(out + "/fit");
  write_file(out + "/fit/notes.txt", "an earlier run's file");
  auto again = trainyard("run " + exp + " --output-dir " + out + " --fresh");
  EXPECT_EQ(again.exit_code, 2) << again.err;
  EXPECT_EQ(read_file(out + "/fit/notes.txt"), "an earlier run's file");
  EXPECT_EQ(std::distance(fs::directory_iterator(out), fs::directory_iterator()), 1) << "a renamed copy was left";
}

TEST(NonFinite, ANetworkWhoseOutputTurnsBadAfterTheFirstBatchIsNamedNotTheLoss) {
  // Was: "the network's output is finite: the loss 'cross_entropy' produced it".
  for (const std::string how : {"huge_after_first", "inf_after_first"}) {
    const std::string exp = temp_dir("exp-" + how) + "/bad.yaml", out = temp_dir("out-" + how);
    write_file(exp,
               with(fitting_experiment(), "network: {plugin: misfit}", "network: {plugin: misfit, how: " + how + "}"));
    auto r = trainyard("run " + exp + " --output-dir " + out);
    EXPECT_EQ(r.exit_code, 1) << how << ": " << r.err;
    EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
    EXPECT_TRUE(contains(r.err, "stopped at iteration 2 (epoch 1, batch 2): non-finite loss; ")) << r.err;
    EXPECT_FALSE(contains(r.err, "the loss 'cross_entropy' produced it")) << r.err;
    EXPECT_TRUE(contains(r.err, "(set loop.nonfinite: skip to drop such updates"))
        << r.err;  // the key as YAML spells it
    const std::string named = how == "huge_after_first"
                                  ? "the output of network 'misfit' from libmisbehaving.so 1.0.0 is finite but extreme "
                                    "(largest magnitude "
                                  : "came from aten::mul (after layer 'fc', the last with parameters; its inputs were "
                                    "finite); the output of network 'misfit' from libmisbehaving.so 1.0.0 was already "
                                    "not finite, before the loss 'cross_entropy'";
    EXPECT_TRUE(contains(r.err, named)) << how << ": expected '" << named << "' in: " << r.err;
  }
}

TEST(Wiring, AStageThatSwitchesToADatasetThatDoesNotFitIsRefusedWhenItStarts) {
  const std::string exp = temp_dir("exp") + "/staged.yaml", out = temp_dir("out");
  write_file(exp, fitting_experiment() +
                      "stages:\n  - {name: first}\n"
                      "  - {name: second, dataset: {train: {plugin: misfit_data, how: short_batch}}}\n");
  auto v = trainyard("validate " + exp);  // validate builds and checks every stage
  EXPECT_EQ(v.exit_code, 2) << v.err;
  EXPECT_TRUE(contains(v.err, "stage 2 'second'")) << v.err;
  EXPECT_TRUE(contains(v.err, "get_batch returned input [1, 1, 4, 4]")) << v.err;
  auto r = trainyard("run " + exp + " --output-dir " + out);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
  EXPECT_TRUE(contains(r.err, "error: stage 2 'second': ")) << r.err;
  EXPECT_TRUE(contains(r.err, "get_batch returned input [1, 1, 4, 4] and target [1] for 4 indices")) << r.err;
  // Found before stage 1 trained: nothing was written.
  EXPECT_FALSE(contains(r.out, "stage 1/2")) << r.out;
  EXPECT_TRUE(fs::is_empty(out)) << "something was written";
}

TEST(Wiring, AStageWhoseNetworkCannotTakeTheEarlierStagesWeightsIsRefusedBeforeAnythingIsWritten) {
  // Stage 2 switches to 9 classes: its own parts fit together, but the
  // classifier it would start from has 4 outputs.
  const std::string exp = temp_dir("exp") + "/nine.yaml", out = temp_dir("out");
  const std::string nine = "{plugin: synthetic, size: 64, num_classes: 9, shape: [1, 4, 4]}";
  write_file(exp, fitting_experiment() +
                      "stages:\n  - {name: four}\n"
                      "  - {name: nine, dataset: {train: " +
                      nine + ", test: " + nine + "}}\n");
  for (const std::string command : {"run", "validate"}) {
    auto r = trainyard(command + " " + exp + (command == "run" ? " --output-dir " + out : ""));
    EXPECT_EQ(r.exit_code, 2) << command << ": " << r.err;
    EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << command << ": " << r.err;
    EXPECT_TRUE(contains(r.err, "error: stage 2 'nine': ")) << r.err;
    EXPECT_TRUE(contains(r.err, "in this stage but [4, 16] in stage 1, whose weights this stage starts from")) << r.err;
  }
  EXPECT_TRUE(fs::is_empty(out)) << "something was written";
}

TEST(Wiring, PredictRefusesInputsOfAnotherShapeThanTheNetworkTrainedOn) {
  const std::string exp = temp_dir("exp") + "/fit.yaml", out = temp_dir("out"), images = temp_dir("images");
  write_file(exp, fitting_experiment());
  ASSERT_EQ(trainyard("run " + exp + " --output-dir " + out).exit_code, 0);
  for (int i = 0; i < 3; ++i)
    write_file(images + "/" + std::to_string(i) + ".png",
               image_codec::encode_png(cv::Mat(8, 8, CV_8UC1, cv::Scalar(i))));
  auto r = trainyard("predict " + exp + " --output-dir " + out + " --input " + images + " --output " + out + "/p.csv");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
  EXPECT_TRUE(contains(r.err, "samples of shape [1, 8, 8]; expected the shape the network was trained on, [1, 4, 4]"))
      << r.err;
  EXPECT_FALSE(fs::exists(out + "/p.csv"));
}

// Real files, the built-in image datasets: what the data says of itself.
TEST(DataConsistency, RealFilesThatDisagreeAreBadInput) {
  const std::string dir = temp_dir("data");
  auto png = [&](const std::string& path, int rows, int cols) {
    write_file(path, image_codec::encode_png(cv::Mat(rows, cols, CV_8UC1, cv::Scalar(rows))));
  };
  for (int i = 0; i < 4; ++i) {
    png(dir + "/mixed/a/" + std::to_string(i) + ".png", 8, 8);
    png(dir + "/mixed/b/" + std::to_string(i) + ".png", 9, 7);  // another size, no load_size given
    for (const std::string c : {"a", "b", "c"}) png(dir + "/three/" + c + "/" + std::to_string(i) + ".png", 8, 8);
    for (const std::string c : {"a", "b"}) png(dir + "/two/" + c + "/" + std::to_string(i) + ".png", 8, 8);
  }
  fs::create_directories(dir + "/empty/a");
  // A converted database whose last record is missing (its metadata counts 16).
  const std::string fashion = "/usr/share/datasets/fashion-mnist", db = dir + "/short_db";
  ASSERT_EQ(trainyard("convert --from idx --images " + fashion + "/t10k-images-idx3-ubyte.gz --labels " + fashion +
                      "/t10k-labels-idx1-ubyte.gz --limit 16 --output " + db)
                .exit_code,
            0);
  delete_lmdb_key(db, record_key(15));
  // An LMDB another program wrote: records, no trainyard metadata.
  const std::string foreign = dir + "/foreign_db";
  fs::create_directories(foreign);
  put_lmdb_value(foreign, "00000001", "a value in some other format");

  auto experiment = [&](const std::string& train, const std::string& test) {
    return "name: files\n"
           "dataset:\n  train: " +
           train + "\n  test: " + test +
           "\n"
           "network: {plugin: mlp, hidden_sizes: [8]}\nloss: {plugin: cross_entropy}\n"
           "optimizer: {plugin: sgd, lr: 0.1}\nloop: {epochs: 1, batch_per_device: 8}\n";
  };
  const std::string three = "{plugin: image_folder, root: " + dir + "/three}";
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"images_of_two_sizes",
       experiment("{plugin: image_folder, root: " + dir + "/mixed}", "{plugin: image_folder, root: " + dir + "/mixed}"),
       "shape"},
      {"splits_with_other_classes", experiment(three, "{plugin: image_folder, root: " + dir + "/two}"),
       "the test dataset has 2 classes, the training dataset 3"},
      {"splits_with_other_shapes",
       experiment(three, "{plugin: image_folder, root: " + dir + "/three, load_size: [6, 6]}"),
       "the test samples are [1, 6, 6], the training samples [1, 8, 8]"},
      {"empty_class_folders", experiment("{plugin: image_folder, root: " + dir + "/empty}", three), "holds no images"},
      {"metadata_counts_more_records",
       experiment("{plugin: lmdb, path: " + db + "}", "{plugin: lmdb, path: " + db + "}"),
       "its metadata says 16 records, but record 0000000015 is missing"},
      {"lmdb_of_another_format", experiment("{plugin: lmdb, path: " + foreign + "}", three),
       "has no trainyard metadata entry"},
      {"lmdb_that_is_an_image_folder", experiment("{plugin: lmdb, path: " + dir + "/three}", three),
       "expected a readable LMDB made by trainyard convert"},
      {"samples_too_large_for_memory",
       with(experiment("{plugin: image_folder, root: " + dir + "/three, load_size: [16384, 16384]}", three),
            "batch_per_device: 8", "batch_per_device: 1024"),
       "a batch of 1024 samples of shape [1, 16384, 16384] needs 1024 GiB"},
      {"allocation_that_fails",
       experiment("{plugin: synthetic, size: 64, num_classes: 4, shape: [1, 100000, 100000]}", three),
       "(dataset 'synthetic' from libsynthetic.so 1.1.0): ran out of memory in construction"},
      {"idx_folder_that_is_an_lmdb", experiment("{plugin: fashion_mnist, directory: " + db + "}", three), "idx"},
  };
  for (const auto& [name, yaml, expected] : cases) expect_refused(name, yaml, expected);
}

}  // namespace
}  // namespace trainyard::test
