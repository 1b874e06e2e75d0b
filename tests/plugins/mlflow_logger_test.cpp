// The mlflow_logger plugin's file store, read by the real mlflow package
// from PyPI (installed by install-deps.sh): search_runs, get_metric_history,
// get_run and list_artifacts see what trainyard logged, and a resumed run
// continues its MLflow run.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include <yaml-cpp/yaml.h>

#include "support/support.h"

namespace fs = std::filesystem;

namespace trainyard::test {
namespace {

// `uri`: a file store folder, or a tracking server's http:// address.
std::string read_with_mlflow(const std::string& uri, const std::string& experiment) {
  const std::string script =
      "import sys, mlflow\n"
      "from mlflow.tracking import MlflowClient\n"
      "mlflow.set_tracking_uri(sys.argv[1] if sys.argv[1].startswith('http') else 'file:' + sys.argv[1])\n"
      "runs = mlflow.search_runs(experiment_names=[sys.argv[2]])\n"
      "print('runs', len(runs))\n"
      "run = runs.iloc[0]\n"
      "print('status', run['status'])\n"
      "print('param optimizer.lr', run['params.optimizer.lr'])\n"
      "print('param network.plugin', run['params.network.plugin'])\n"
      "print('metric test/accuracy_top1 %.6f' % run['metrics.test/accuracy_top1'])\n"
      "client = MlflowClient()\n"
      "for key in ['test/accuracy_top1', 'train/loss', 'train/batch_loss']:\n"
      "    print('history', key, ' '.join(str(m.step) for m in client.get_metric_history(run['run_id'], key)))\n"
      "print('artifacts', ' '.join(sorted(a.path for a in client.list_artifacts(run['run_id']))))\n"
      "print('run name', client.get_run(run['run_id']).info.run_name)\n";
  const std::string file = temp_dir("py") + "/read.py";
  write_file(file, script);
  auto r = run_command("MLFLOW_ALLOW_FILE_STORE=true " + ::trainyard::test::python() + " " + file + " " + uri + " " +
                       experiment + " 2>&1");
  return r.exit_code == 0 ? r.out : "python failed: " + r.out;
}

double last_test_top1(const std::string& metrics) {
  double v = -1;
  for (const auto& line : read_lines(metrics))
    if (contains(line, "\"phase\": \"test\"")) v = YAML::Load(line)["values"]["test_accuracy_top1"].as<double>();
  return v;
}

TEST(MlflowLogger, TheRealMlflowReadsParamsMetricsArtifactsAndAResumedRunContinues) {
  const std::string dir = temp_dir("mlflow");
  const std::string logger = "callbacks: [{plugin: mlflow_logger, every_iters: 4}";
  write_file(dir + "/ml.yaml", synthetic_experiment("ml", logger + "]\n"));
  ASSERT_EQ(trainyard("run " + dir + "/ml.yaml --output-dir " + dir).exit_code, 0);
  const std::string out = read_with_mlflow(dir + "/mlruns", "ml");
  EXPECT_TRUE(contains(out, "runs 1\n")) << out;
  EXPECT_TRUE(contains(out, "status FINISHED")) << out;
  EXPECT_TRUE(contains(out, "param optimizer.lr 0.05\n")) << out;
  EXPECT_TRUE(contains(out, "param network.plugin mlp\n")) << out;
  char top1[64];
  std::snprintf(top1, sizeof top1, "metric test/accuracy_top1 %.6f", last_test_top1(dir + "/ml/metrics.jsonl"));
  EXPECT_TRUE(contains(out, top1)) << out;
  // 16 iterations per epoch, 2 epochs.
  EXPECT_TRUE(contains(out, "history test/accuracy_top1 16 32\n")) << out;
  EXPECT_TRUE(contains(out, "history train/loss 16 32\n")) << out;
  EXPECT_TRUE(contains(out, "history train/batch_loss 4 8 12 16 20 24 28 32\n")) << out;
  EXPECT_TRUE(contains(out, "artifacts checkpoints config.yaml report.html\n")) << out;
  EXPECT_TRUE(contains(out, "run name ml\n")) << out;

  // Stopped at iteration 10, resumed: one MLflow run with each step once.
  const std::string split = temp_dir("split");
  write_file(split + "/ml.yaml", synthetic_experiment("ml", logger + ", {plugin: stop_at, iteration: 10}]\n"));
  ASSERT_EQ(trainyard("run " + split + "/ml.yaml --output-dir " + split + " --plugin-dir " + fixture_dir("components"))
                .exit_code,
            0);
  write_file(split + "/ml.yaml", synthetic_experiment("ml", logger + "]\n"));
  ASSERT_EQ(trainyard("run " + split + "/ml.yaml --output-dir " + split).exit_code, 0);
  const std::string resumed = read_with_mlflow(split + "/mlruns", "ml");
  EXPECT_TRUE(contains(resumed, "runs 1\n")) << resumed;
  EXPECT_TRUE(contains(resumed, "status FINISHED")) << resumed;
  EXPECT_TRUE(contains(resumed, "history train/batch_loss 4 8 12 16 20 24 28 32\n")) << resumed;
  EXPECT_TRUE(contains(resumed, "history test/accuracy_top1 16 32\n")) << resumed;
}

// A real MLflow tracking server (mlflow server from PyPI, SQLite backend,
// serving artifacts), started and stopped by PID in the test.
TEST(MlflowLogger, ARunOnARealTrackingServerThroughTheRestApi) {
  const std::string dir = temp_dir("server");
  const std::string mlflow = (fs::path(::trainyard::test::python()).parent_path() / "mlflow").string();
  ASSERT_TRUE(fs::exists(mlflow)) << mlflow << " (scripts/install-deps.sh installs mlflow into the test environment)";
  const int port = 20000 + (::getpid() * 13) % 20000;
  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  ASSERT_EQ(
      run_command(mlflow + " server --backend-store-uri sqlite:///" + dir + "/db.sqlite --artifacts-destination " +
                  dir + "/artifacts --host 127.0.0.1 --port " + std::to_string(port) + " --workers 1 > " + dir +
                  "/server.log 2>&1 & echo $! > " + dir + "/server.pid")
          .exit_code,
      0);
  const std::string pid = nonempty_lines(read_file(dir + "/server.pid")).at(0);
  const std::string wait = ::trainyard::test::python() +
                           " -c \"import time, urllib.request\n"
                           "for _ in range(120):\n"
                           "    try:\n"
                           "        urllib.request.urlopen('" +
                           url +
                           "/health', timeout=1); break\n"
                           "    except Exception: time.sleep(0.5)\n"
                           "else: raise SystemExit(1)\"";
  const bool up = run_command(wait).exit_code == 0;
  if (up) {
    write_file(dir + "/ml.yaml",
               synthetic_experiment(
                   "ml", "callbacks: [{plugin: mlflow_logger, every_iters: 4, tracking_uri: " + url + "}]\n"));
    auto r = trainyard("run " + dir + "/ml.yaml --output-dir " + dir);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const std::string out = read_with_mlflow(url, "ml");
    EXPECT_TRUE(contains(out, "runs 1\n")) << out;
    EXPECT_TRUE(contains(out, "status FINISHED")) << out;
    EXPECT_TRUE(contains(out, "param optimizer.lr 0.05\n")) << out;
    EXPECT_TRUE(contains(out, "history test/accuracy_top1 16 32\n")) << out;
    EXPECT_TRUE(contains(out, "history train/batch_loss 4 8 12 16 20 24 28 32\n")) << out;
    EXPECT_TRUE(contains(out, "artifacts checkpoints config.yaml report.html\n")) << out;
  }
  run_command("kill " + pid + "; sleep 1; kill -9 " + pid + " 2>/dev/null");
  ASSERT_TRUE(up) << "the tracking server did not answer: " << read_file(dir + "/server.log");
}

}  // namespace
}  // namespace trainyard::test
