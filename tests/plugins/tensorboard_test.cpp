// The tensorboard plugin's files, read back by an independent reader.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>

#include <yaml-cpp/yaml.h>

#include "event_writer.h"
#include "support/support.h"

namespace fs = std::filesystem;

namespace trainyard::test {
namespace {

TEST(TensorBoard, Crc32cAndFraming) {
  EXPECT_EQ(tensorboard::crc32c("123456789"), 0xE3069283u);  // the CRC-32C check value
  const std::string r = tensorboard::record("abc");
  ASSERT_EQ(r.size(), 8u + 4 + 3 + 4);
  EXPECT_EQ(r.substr(12, 3), "abc");
}

// Debian's Python (python3-protobuf) is /usr/bin/python3; another python3 may come first on PATH.
std::string python() { return run_command("/usr/bin/python3 -c ''").exit_code == 0 ? "/usr/bin/python3" : "python3"; }

bool reader_available() {
  return run_command("command -v protoc && " + python() + " -c 'import google.protobuf'").exit_code == 0;
}

std::string reader(const std::vector<std::string>& files, int& exit_code) {
  std::string cmd = python() + " " + source_dir() + "/tests/plugins/read_tensorboard.py " + source_dir() +
                    "/tests/plugins " + temp_dir("pb");
  for (const auto& f : files) cmd += " " + f;
  auto r = run_command(cmd);
  exit_code = r.exit_code;
  return r.exit_code == 0 ? r.out : r.err;
}

TEST(TensorBoard, ADirThatCannotBeWrittenIsOneErrorLineBeforeTraining) {
  // A dir under a file (what root meets; a read-only folder when not root):
  // was exit 1 with create_directories' raw filesystem error.
  const std::string base = temp_dir("tb-dirs"), file = base + "/a-file";
  write_file(file, "not a folder\n");
  std::vector<std::pair<std::string, std::string>> cases = {
      {file + "/tb", "dir " + file + "/tb: " + file + " is not a folder; expected a folder for the event files"}};
  if (::geteuid() != 0) {
    fs::create_directories(base + "/read-only");
    fs::permissions(base + "/read-only", fs::perms(0555));
    cases.push_back({base + "/read-only/tb", "dir " + base + "/read-only/tb: cannot write in " + base + "/read-only"});
  }
  for (const auto& [dir, expected] : cases) {
    const std::string exp = temp_dir("exp") + "/tbd.yaml", out = temp_dir("out");
    write_file(exp, synthetic_experiment("tbd", "callbacks: [{plugin: tensorboard, dir: '" + dir + "'}]\n"));
    auto r = trainyard("run " + exp + " --output-dir " + out);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
    EXPECT_TRUE(contains(r.err, "(callback 'tensorboard' from libtensorboard.so")) << r.err;
    EXPECT_TRUE(contains(r.err, expected)) << "expected '" << expected << "' in: " << r.err;
    EXPECT_TRUE(fs::is_empty(out)) << "trained or wrote something first: " << r.out;
  }
}

TEST(TensorBoard, EventFilesParseBackWithCorrectCrcsAndTheRunsValues) {
  if (!reader_available())
    GTEST_SKIP() << "protoc and Python's protobuf (Debian: protobuf-compiler, python3-protobuf) are not installed";
  const std::string exp = temp_dir("exp") + "/tb.yaml", out = temp_dir("out");
  write_file(exp, synthetic_experiment("tb", "callbacks: [{plugin: tensorboard, every_iters: 4}]\n"));
  auto r = trainyard("run " + exp + " --output-dir " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> files;
  for (const auto& f : fs::directory_iterator(out + "/tb/tensorboard")) files.push_back(f.path().string());
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(fs::path(files[0]).filename().string().rfind("events.out.tfevents.", 0), 0u);
  int code = 0;
  const std::string json = reader(files, code);
  ASSERT_EQ(code, 0) << json;
  YAML::Node records = YAML::Load(json);
  ASSERT_TRUE(records.IsSequence());
  EXPECT_EQ(records[0]["file_version"].as<std::string>(), "brain.Event:2");
  // Test values at each epoch end equal metrics.jsonl's (as 32-bit floats).
  std::map<int64_t, double> accuracy;
  for (const auto& line : read_lines(out + "/tb/metrics.jsonl")) {
    if (!contains(line, "\"phase\": \"test\"")) continue;
    YAML::Node e = YAML::Load(line);
    accuracy[e["iteration"].as<int64_t>()] = e["values"]["test_accuracy_top1"].as<double>();
  }
  ASSERT_EQ(accuracy.size(), 2u);
  int matched = 0, lrs = 0, losses = 0;
  for (const auto& rec : records) {
    const int64_t step = rec["step"].as<int64_t>();
    const YAML::Node v = rec["values"];
    if (v["test/accuracy_top1"] && accuracy.count(step)) {
      EXPECT_FLOAT_EQ(v["test/accuracy_top1"].as<float>(), static_cast<float>(accuracy[step])) << step;
      ++matched;
    }
    if (v["train/lr"]) {
      EXPECT_FLOAT_EQ(v["train/lr"].as<float>(), 0.05f);
      ++lrs;
    }
    if (v["train/batch_loss"]) {
      EXPECT_TRUE(std::isfinite(v["train/batch_loss"].as<double>()));
      ++losses;
    }
  }
  EXPECT_EQ(matched, 2);
  EXPECT_EQ(lrs, 32);  // every iteration
  EXPECT_EQ(losses, 8);

  // The reader really checks: one flipped bit is a CRC error.
  std::string bytes = read_file(files[0]);
  bytes[bytes.size() / 2] ^= 0x10;
  const std::string bad = temp_dir("bad") + "/events.out.tfevents.bad";
  write_file(bad, bytes);
  const std::string err = reader({bad}, code);
  EXPECT_EQ(code, 3) << err;
  EXPECT_TRUE(contains(err, "CRC mismatch")) << err;
}

// TensorBoard's own reader (the tensorboard package from PyPI, installed by
// install-deps.sh in the LibTorch environment): scalars grouped by phase, the
// learning rate at every step, histograms, and the hyper-parameters.
TEST(TensorBoard, TheRealTensorBoardReadsScalarsHistogramsAndHyperParameters) {
  const std::string exp = temp_dir("exp") + "/tbr.yaml", out = temp_dir("out");
  write_file(exp,
             synthetic_experiment("tbr", "callbacks: [{plugin: tensorboard, every_iters: 4, histograms: true}]\n"));
  auto r = trainyard("run " + exp + " --output-dir " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string script =
      "import sys\n"
      "from tensorboard.backend.event_processing.event_accumulator import EventAccumulator\n"
      "from tensorboard.plugins.hparams import plugin_data_pb2\n"
      "ea = EventAccumulator(sys.argv[1], size_guidance={'scalars': 0, 'histograms': 0})\n"
      "ea.Reload()\n"
      "tags = ea.Tags()\n"
      "print('scalars', ' '.join(sorted(tags['scalars'])))\n"
      "print('lr steps', len(ea.Scalars('train/lr')), ea.Scalars('train/lr')[0].value)\n"
      "print('test/accuracy_top1', ' '.join('%d:%.6f' % (e.step, e.value) for e in ea.Scalars('test/accuracy_top1')))\n"
      "h = ea.Histograms(sorted(tags['histograms'])[0])\n"
      "print('histograms', len(tags['histograms']), len(h), int(h[0].histogram_value.num))\n"
      "content = ea.PluginTagToContent('hparams')\n"
      "print('hparams tags', ' '.join(sorted(content)))\n"
      "start = "
      "plugin_data_pb2.HParamsPluginData.FromString(content['_hparams_/session_start_info']).session_start_info\n"
      "print('optimizer.lr', start.hparams['optimizer.lr'].number_value)\n"
      "print('network.plugin', start.hparams['network.plugin'].string_value)\n"
      "end = plugin_data_pb2.HParamsPluginData.FromString(content['_hparams_/session_end_info']).session_end_info\n"
      "print('status', end.status)\n"
      "experiment = plugin_data_pb2.HParamsPluginData.FromString(content['_hparams_/experiment']).experiment\n"
      "print('metrics', ' '.join(sorted(m.name.tag for m in experiment.metric_infos)))\n";
  const std::string file = temp_dir("py") + "/read.py";
  write_file(file, script);
  auto read = run_command(::trainyard::test::python() + " " + file + " " + out + "/tbr/tensorboard");
  ASSERT_EQ(read.exit_code, 0) << read.err;
  const std::string& o = read.out;
  EXPECT_TRUE(contains(o,
                       "scalars test/accuracy_top1 test/accuracy_top2 test/loss train/accuracy_top1 "
                       "train/accuracy_top2 train/batch_loss train/loss train/lr train/samples_per_sec\n"))
      << o;
  EXPECT_TRUE(contains(o, "lr steps 32 0.05")) << o;
  // The test values are metrics.jsonl's (as 32-bit floats).
  std::string expected = "test/accuracy_top1";
  for (const auto& line : read_lines(out + "/tbr/metrics.jsonl")) {
    if (!contains(line, "\"phase\": \"test\"")) continue;
    YAML::Node e = YAML::Load(line);
    char buf[64];
    std::snprintf(buf, sizeof buf, " %lld:%.6f", (long long)e["iteration"].as<int64_t>(),
                  static_cast<double>(static_cast<float>(e["values"]["test_accuracy_top1"].as<double>())));
    expected += buf;
  }
  EXPECT_TRUE(contains(o, expected + "\n")) << o << "expected: " << expected;
  // mlp [32]: 4 parameters (two weights, two biases), 2 test passes; the first holds 16 x 32 weights.
  EXPECT_TRUE(contains(o, "histograms 4 2 ")) << o;
  EXPECT_TRUE(contains(o, "hparams tags _hparams_/experiment _hparams_/session_end_info _hparams_/session_start_info"))
      << o;
  EXPECT_TRUE(contains(o, "optimizer.lr 0.05")) << o;
  EXPECT_TRUE(contains(o, "network.plugin mlp")) << o;
  EXPECT_TRUE(contains(o, "status 1")) << o;  // STATUS_SUCCESS
  EXPECT_TRUE(contains(o, "metrics test/accuracy_top1 test/accuracy_top2 test/loss train/accuracy_top1")) << o;
}

}  // namespace
}  // namespace trainyard::test
