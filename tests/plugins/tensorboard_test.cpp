// The tensorboard plugin's files, read back by an independent reader.
#include <gtest/gtest.h>

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
  std::string cmd = python() + " " + source_dir() + "/tests/plugins/read_tensorboard.py " + source_dir() + "/tests/plugins " +
                    temp_dir("pb");
  for (const auto& f : files) cmd += " " + f;
  auto r = run_command(cmd);
  exit_code = r.exit_code;
  return r.exit_code == 0 ? r.out : r.err;
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
    if (v["test_accuracy_top1"] && accuracy.count(step)) {
      EXPECT_FLOAT_EQ(v["test_accuracy_top1"].as<float>(), static_cast<float>(accuracy[step])) << step;
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
  EXPECT_EQ(lrs, 8);  // every 4 of 32 iterations
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

}  // namespace
}  // namespace trainyard::test
