#include "support/support.h"

#include <lmdb.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>

#include <gtest/gtest.h>

#include <torch/serialize/input-archive.h>
#include "config/experiment.h"
#include "plugins/library_loader.h"
#include "plugins/registry.h"
#include "run/assembly.h"
#include "train/epoch_loop.h"
#include "trainyard/record.h"

namespace fs = std::filesystem;

namespace trainyard::test {

namespace {
// A path CMake baked in under `built` (the build or the source tree), moved
// under the folder the variable names when it is set.
std::string relocated(const std::string& path, const char* built, const char* variable) {
  const char* moved = std::getenv(variable);
  if (!moved || !*moved) return path;
  const std::string prefix = built;
  if (path.compare(0, prefix.size(), prefix) != 0) return path;
  return std::string(moved) + path.substr(prefix.size());
}
std::string in_build(const std::string& path) { return relocated(path, BUILD_DIR, "TRAINYARD_TEST_BUILD_DIR"); }
}  // namespace

std::string trainyard_binary() { return in_build(TRAINYARD_BIN); }
std::string builtin_plugin_dir() { return in_build(BUILTIN_PLUGIN_DIR); }
std::string fixture_dir(const std::string& name) { return in_build(FIXTURE_DIR) + "/" + name; }
std::string source_dir() { return relocated(SOURCE_DIR, SOURCE_DIR, "TRAINYARD_TEST_SOURCE_DIR"); }
std::string python() {
  const char* python = std::getenv("TRAINYARD_TEST_PYTHON");
  return python && *python ? python : TRAINYARD_PYTHON;
}

std::string temp_dir(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string test = info ? std::string(info->test_suite_name()) + "." + info->name() : "nontest";
  fs::path dir = fs::path(in_build(TEST_TMP_DIR)) / test / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

void write_file(const std::string& path, const std::string& content) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << content;
}

std::vector<int> profile_step_shares(const std::string& summary) {
  // From "step X ms:" to the operator table, the line wrapped or not.
  const size_t from = summary.find("step "), to = summary.find("operator (CPU)");
  std::vector<int> shares;
  if (from == std::string::npos || to == std::string::npos || to < from) return shares;
  const std::string line = summary.substr(from, to - from);
  const std::regex share(R"(\((-?[0-9]+)%\))");
  for (auto it = std::sregex_iterator(line.begin(), line.end(), share); it != std::sregex_iterator(); ++it)
    shares.push_back(std::stoi((*it)[1]));
  return shares;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> read_lines(const std::string& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

int64_t occurrences(const std::string& text, const std::string& part) {
  int64_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
  return n;
}

CommandResult run_command(const std::string& command) {
  const std::string dir = temp_dir("command-" + std::to_string(::getpid()));
  const std::string out = dir + "/out", err = dir + "/err";
  int status = std::system(("(" + command + ") >" + out + " 2>" + err + " </dev/null").c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_file(out);
  r.err = read_file(err);
  fs::remove_all(dir);
  return r;
}

void expect_one_error_line(const CommandResult& r, const std::string& part) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  EXPECT_TRUE(contains(r.err, part)) << "expected '" << part << "' in: " << r.err;
}

std::vector<std::string> nonempty_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::string cur;
  for (char ch : text + "\n") {
    if (ch != '\n') {
      cur += ch;
      continue;
    }
    if (!cur.empty()) lines.push_back(cur);
    cur.clear();
  }
  return lines;
}

CommandResult trainyard(const std::string& args) { return run_command(trainyard_binary() + " " + args); }

CommandResult trainyard_with_env(const std::string& env, const std::string& args) {
  return run_command("env " + env + " " + trainyard_binary() + " " + args);
}

std::string synthetic_experiment(const std::string& name, const std::string& more) {
  return "name: " + name +
         "\n"
         "seed: 7\n"
         "dataset:\n"
         "  train: {plugin: synthetic, size: 512, num_classes: 4, shape: [1, 4, 4], seed: 1}\n"
         "  test: {plugin: synthetic, size: 128, num_classes: 4, shape: [1, 4, 4], seed: 2}\n"
         "network: {plugin: mlp, hidden_sizes: [32], dropout: 0.1}\n"
         "loss: {plugin: cross_entropy}\n"
         "optimizer: {plugin: sgd, lr: 0.05, momentum: 0.9}\n"
         "meters:\n"
         "  - plugin: loss\n"
         "  - {plugin: topk_accuracy, k: [1, 2]}\n"
         "loop: {epochs: 2, batch_per_device: 32, log_every_iters: 4}\n"
         "distributed: {threads_per_process: 1}\n" +
         more;
}

namespace {
std::string compare_archives(torch::serialize::InputArchive& a, torch::serialize::InputArchive& b,
                             const std::string& prefix) {
  auto keys_a = a.keys(), keys_b = b.keys();
  std::sort(keys_a.begin(), keys_a.end());
  std::sort(keys_b.begin(), keys_b.end());
  if (keys_a != keys_b) return prefix + ": different keys";
  for (const auto& k : keys_a) {
    at::Tensor ta, tb;
    if (a.try_read(k, ta) && b.try_read(k, tb)) {
      if (!ta.equal(tb))
        return prefix + k + ": tensors differ (max abs diff " + std::to_string((ta - tb).abs().max().item<double>()) +
               ")";
      continue;
    }
    torch::serialize::InputArchive sa, sb;
    if (a.try_read(k, sa) && b.try_read(k, sb)) {
      std::string d = compare_archives(sa, sb, prefix + k + ".");
      if (!d.empty()) return d;
    }
  }
  return "";
}
double max_difference(torch::serialize::InputArchive& a, torch::serialize::InputArchive& b) {
  double worst = 0;
  for (const auto& key : a.keys()) {
    at::Tensor ta, tb;
    if (a.try_read(key, ta) && b.try_read(key, tb)) {
      if (ta.is_floating_point()) worst = std::max(worst, (ta - tb).abs().max().item<double>());
      continue;
    }
    torch::serialize::InputArchive sa, sb;
    if (a.try_read(key, sa) && b.try_read(key, sb)) worst = std::max(worst, max_difference(sa, sb));
  }
  return worst;
}

}  // namespace

double max_checkpoint_difference(const std::string& a, const std::string& b, const std::string& key) {
  torch::serialize::InputArchive aa, ab, na, nb;
  aa.load_from(a);
  ab.load_from(b);
  aa.read(key, na);
  ab.read(key, nb);
  return max_difference(na, nb);
}

const host::Registry& builtin_registry() {
  static const host::Registry r = [] {
    host::Registry reg;
    host::load_plugin_folders({{builtin_plugin_dir(), "built-in"}}, reg);
    return reg;
  }();
  return r;
}

std::string latest_checkpoint(const std::string& run_dir) {
  std::vector<std::string> files;
  if (!fs::is_directory(run_dir + "/checkpoints")) return "";
  for (const auto& e : fs::directory_iterator(run_dir + "/checkpoints")) {
    const std::string name = e.path().filename().string();
    if (name.rfind("ckpt-", 0) == 0 && e.path().extension() == ".pt") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());  // zero-padded epoch and iteration: by name is by age
  return files.empty() ? "" : files.back();
}

at::Tensor checkpoint_tensor(const std::string& checkpoint, const std::string& name) {
  torch::serialize::InputArchive archive;
  archive.load_from(checkpoint);
  std::vector<torch::serialize::InputArchive> path(1);
  archive.read("network", path.back());
  std::string rest = name;
  for (auto dot = rest.find('.'); dot != std::string::npos; dot = rest.find('.')) {
    torch::serialize::InputArchive child;
    path.back().read(rest.substr(0, dot), child);
    path.push_back(std::move(child));
    rest = rest.substr(dot + 1);
  }
  at::Tensor t;
  path.back().read(rest, t);
  return t;
}

namespace {
void collect_tensors(torch::serialize::InputArchive& archive, std::vector<at::Tensor>& out) {
  for (const auto& k : archive.keys()) {
    at::Tensor t;
    torch::serialize::InputArchive inner;
    if (archive.try_read(k, t))
      out.push_back(t);
    else if (archive.try_read(k, inner))
      collect_tensors(inner, out);
  }
}
// A checkpoint's optimizer state tensors in an order that does not depend on
// the process: LibTorch keys each parameter's state by its address.
std::vector<at::Tensor> optimizer_state_tensors(const std::string& checkpoint) {
  torch::serialize::InputArchive root, optimizer;
  root.load_from(checkpoint);
  root.read("optimizer", optimizer);
  std::vector<at::Tensor> out;
  collect_tensors(optimizer, out);
  std::vector<std::pair<std::vector<double>, at::Tensor>> keyed;
  for (at::Tensor& t : out) {
    const at::Tensor flat = t.to(at::kDouble).flatten();
    std::vector<double> key{static_cast<double>(t.numel())};
    for (int64_t i = 0; i < std::min<int64_t>(flat.numel(), 8); ++i) key.push_back(flat[i].item<double>());
    keyed.emplace_back(std::move(key), t);
  }
  std::sort(keyed.begin(), keyed.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  out.clear();
  for (auto& [key, t] : keyed) out.push_back(t);
  return out;
}
}  // namespace

std::string compare_optimizer_states(const std::string& a, const std::string& b) {
  const auto ta = optimizer_state_tensors(a), tb = optimizer_state_tensors(b);
  if (ta.size() != tb.size())
    return "optimizer states of " + std::to_string(ta.size()) + " and " + std::to_string(tb.size()) + " tensors";
  for (size_t i = 0; i < ta.size(); ++i)
    if (!ta[i].sizes().equals(tb[i].sizes()) || !ta[i].equal(tb[i]))
      return "optimizer state tensor " + std::to_string(i) + " differs";
  return "";
}

std::string compare_checkpoint_networks(const std::string& a, const std::string& b, const std::string& key) {
  torch::serialize::InputArchive aa, ab, na, nb;
  aa.load_from(a);
  ab.load_from(b);
  if (!aa.try_read(key, na)) return a + ": no '" + key + "' archive";
  if (!ab.try_read(key, nb)) return b + ": no '" + key + "' archive";
  return compare_archives(na, nb, "");
}

namespace {
// Writes (or, with no value, deletes) one key of an LMDB.
void edit_lmdb(const std::string& db, const std::string& key, const std::string* value) {
  auto check = [&](int rc, const char* what) {
    if (rc != 0) throw std::runtime_error(db + ": " + what + ": " + mdb_strerror(rc));
  };
  MDB_env* env = nullptr;
  check(mdb_env_create(&env), "mdb_env_create");
  check(mdb_env_set_mapsize(env, size_t(1) << 30), "mdb_env_set_mapsize");
  check(mdb_env_open(env, db.c_str(), 0, 0664), "mdb_env_open");
  MDB_txn* txn = nullptr;
  MDB_dbi dbi;
  check(mdb_txn_begin(env, nullptr, 0, &txn), "mdb_txn_begin");
  check(mdb_dbi_open(txn, nullptr, 0, &dbi), "mdb_dbi_open");
  MDB_val k{key.size(), const_cast<char*>(key.data())};
  if (value) {
    MDB_val v{value->size(), const_cast<char*>(value->data())};
    check(mdb_put(txn, dbi, &k, &v, 0), "mdb_put");
  } else {
    check(mdb_del(txn, dbi, &k, nullptr), "mdb_del");
  }
  check(mdb_txn_commit(txn), "mdb_txn_commit");
  mdb_env_close(env);
}
}  // namespace

void put_lmdb_record(const std::string& db, int64_t index, const std::string& value) {
  edit_lmdb(db, record_key(index), &value);
}
void put_lmdb_value(const std::string& db, const std::string& key, const std::string& value) {
  edit_lmdb(db, key, &value);
}
void delete_lmdb_key(const std::string& db, const std::string& key) { edit_lmdb(db, key, nullptr); }

CommandResult run_and_act(const std::string& args, const std::string& ready, int delay_ms, const std::string& action,
                          const std::string& environment) {
  const std::string dir = temp_dir("run-and-act");
  write_file(dir + "/run.sh", environment + trainyard_binary() + " " + args + " >" + dir + "/out 2>" + dir +
                                  "/err &\npid=$!\n" + "for i in $(seq 15000); do [ " + ready +
                                  " ] && break; sleep 0.02; done\n" + "sleep " + std::to_string(delay_ms / 1000.0) +
                                  "\n" + action + "\nwait $pid\necho $? >" + dir + "/rc\n");
  run_command("bash " + dir + "/run.sh");
  CommandResult r;
  r.exit_code = std::stoi(read_file(dir + "/rc"));
  r.out = read_file(dir + "/out");
  r.err = read_file(dir + "/err");
  return r;
}

CommandResult interrupted(const std::string& args, const std::string& started, int delay_ms, const std::string& signal,
                          const std::string& environment) {
  return run_and_act(args, "-s " + started, delay_ms, "kill -" + signal + " $pid", environment);
}

const std::string& small_photo_set() {
  static const std::string dir = [] {
    const std::string out = temp_dir("small-photo-set") + "/set";
    auto r =
        run_command(python() + " " + source_dir() + "/scripts/data/make_photo_set.py " + out + " --train 20 --val 10");
    if (r.exit_code != 0) throw std::runtime_error("make_photo_set.py failed: " + r.out + r.err);
    return out;
  }();
  return dir;
}

void write_matrix(const std::string& path, const at::Tensor& matrix) {
  const at::Tensor m = matrix.dim() == 1 ? matrix.unsqueeze(1) : matrix;
  std::ofstream out(path);
  out.precision(17);
  for (int64_t i = 0; i < m.size(0); ++i)
    for (int64_t j = 0; j < m.size(1); ++j) out << m[i][j].item<double>() << (j + 1 < m.size(1) ? " " : "\n");
}

}  // namespace trainyard::test

namespace trainyard::test {

std::unique_ptr<host::EpochLoop> assembled(const std::string& name, const std::vector<std::string>& sets,
                                           Context& context, const std::string& yaml) {
  const std::string path = temp_dir("exp-" + name) + "/" + name + ".yaml";
  write_file(path, yaml.empty() ? synthetic_experiment(name) : yaml);
  static std::vector<std::unique_ptr<host::Experiment>> kept;
  kept.push_back(std::make_unique<host::Experiment>(
      host::validate_experiment(host::read_experiment(path, sets), builtin_registry())));
  context.seed = kept.back()->seed;
  return host::assemble_stage(*kept.back(), context, nullptr, host::RunPaths(temp_dir("out-" + name)));
}

}  // namespace trainyard::test
