#include "file_store.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace fs = std::filesystem;

namespace mlflow_logger {
namespace {

// A YAML double-quoted scalar (JSON escapes): safe for any text, and never
// read back as a number (an unquoted 0123 would be octal).
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c == '\r')
      out += "\\r";
    else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string user_name() {
  const char* user = std::getenv("USER");
  return user && *user ? user : "trainyard";
}

std::string file_uri(const std::string& absolute) {
  static const std::string safe = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~/";
  std::string out = "file://";
  for (unsigned char c : absolute) {
    if (safe.find(static_cast<char>(c)) != std::string::npos)
      out += static_cast<char>(c);
    else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

// meta.yaml through a temporary file in the same folder (a folder MLflow
// does not scan for keys), renamed over it.
void write_meta(const fs::path& folder, const std::string& text) {
  const fs::path tmp = folder / ("meta.yaml.tmp-" + std::to_string(::getpid()));
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out.flush()) throw std::runtime_error("mlflow: cannot write " + tmp.string());
  }
  fs::rename(tmp, folder / "meta.yaml");
}

void write_value(const fs::path& file, const std::string& value) {
  fs::create_directories(file.parent_path());
  std::ofstream out(file, std::ios::trunc | std::ios::binary);
  out << value;
  if (!out.flush()) throw std::runtime_error("mlflow: cannot write " + file.string());
}

std::string find_experiment(const fs::path& root, const std::string& name) {
  if (!fs::is_directory(root)) return "";
  for (const auto& entry : fs::directory_iterator(root)) {
    const std::string folder = entry.path().filename().string();
    if (!entry.is_directory() || folder == ".trash" || folder == "models" || !fs::exists(entry.path() / "meta.yaml"))
      continue;
    try {
      const YAML::Node meta = YAML::LoadFile((entry.path() / "meta.yaml").string());
      if (meta["name"] && meta["name"].as<std::string>() == name && meta["lifecycle_stage"] &&
          meta["lifecycle_stage"].as<std::string>() == "active")
        return meta["experiment_id"] ? meta["experiment_id"].as<std::string>() : folder;
    } catch (const YAML::Exception&) {
      // not an experiment MLflow could read either
    }
  }
  return "";
}

std::string create_experiment(const fs::path& root, const std::string& name) {
  const bool fresh = !fs::exists(root);
  fs::create_directories(root / ".trash");
  const int64_t t = now_ms();
  auto experiment_meta = [&](const std::string& id, const std::string& shown) {
    return "artifact_location: " + quoted(file_uri((fs::absolute(root) / id).lexically_normal().string())) +
           "\ncreation_time: " + std::to_string(t) + "\nexperiment_id: " + quoted(id) +
           "\nlast_update_time: " + std::to_string(t) + "\nlifecycle_stage: active\nname: " + quoted(shown) + "\n";
  };
  if (fresh) {  // as MLflow does for a new store: the Default experiment, 0
    fs::create_directories(root / "0");
    write_meta(root / "0", experiment_meta("0", "Default"));
  }
  // A random 18-digit id (as MLflow's), claimed by creating its folder.
  std::random_device random;
  std::mt19937_64 rng((uint64_t(random()) << 32) ^ random() ^ uint64_t(t));
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::string id = std::to_string(100000000000000000ull + rng() % 900000000000000000ull);
    if (!fs::create_directory(root / id)) continue;
    write_meta(root / id, experiment_meta(id, name));
    return id;
  }
  throw std::runtime_error("mlflow: cannot create an experiment folder under " + root.string());
}

}  // namespace

bool FileStoreRun::valid_key(const std::string& key) {
  if (key.empty() || key.size() > 250) return false;
  for (char c : key)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ' ' || c == '.' || c == '-' || c == ':' ||
          c == '/'))
      return false;
  size_t start = 0;
  while (start <= key.size()) {
    const size_t slash = std::min(key.find('/', start), key.size());
    const std::string segment = key.substr(start, slash - start);
    if (segment.empty() || segment == "." || segment == "..") return false;
    start = slash + 1;
  }
  return true;
}

std::string FileStoreRun::new_run_id() {
  std::random_device random;
  std::mt19937_64 rng((uint64_t(random()) << 32) ^ random() ^ uint64_t(now_ms()));
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", (unsigned long long)rng(), (unsigned long long)rng());
  return buf;
}

FileStoreRun::FileStoreRun(const std::string& root, const std::string& experiment, const std::string& run_name,
                           const std::string& run_id)
    : root_(fs::absolute(root).lexically_normal().string()), run_id_(run_id), run_name_(run_name) {
  experiment_id_ = find_experiment(root_, experiment);
  if (experiment_id_.empty()) experiment_id_ = create_experiment(root_, experiment);
  run_dir_ = (fs::path(root_) / experiment_id_ / run_id_).string();
  start_time_ = now_ms();
  if (fs::exists(fs::path(run_dir_) / "meta.yaml")) {
    try {  // continued: keep its start
      start_time_ = YAML::LoadFile(run_dir_ + "/meta.yaml")["start_time"].as<int64_t>(start_time_);
    } catch (const YAML::Exception&) {}
  }
  for (const char* sub : {"metrics", "params", "tags", "artifacts"}) fs::create_directories(fs::path(run_dir_) / sub);
  write_run_meta(RunStatus::running, -1);
  tag("mlflow.runName", run_name_);
}

void FileStoreRun::write_run_meta(RunStatus status, int64_t end_time) const {
  write_meta(run_dir_, "artifact_uri: " + quoted(file_uri(run_dir_ + "/artifacts")) +
                           "\nend_time: " + (end_time < 0 ? std::string("null") : std::to_string(end_time)) +
                           "\nentry_point_name: ''\nexperiment_id: " + quoted(experiment_id_) +
                           "\nlifecycle_stage: active\nrun_id: " + quoted(run_id_) +
                           "\nrun_name: " + quoted(run_name_) + "\nrun_uuid: " + quoted(run_id_) +
                           "\nsource_name: ''\nsource_type: 4\nsource_version: ''" + "\nstart_time: " +
                           std::to_string(start_time_) + "\nstatus: " + std::to_string(static_cast<int>(status)) +
                           "\ntags: []\nuser_id: " + quoted(user_name()) + "\n");
}

void FileStoreRun::param(const std::string& key, const std::string& value) {
  if (!valid_key(key)) return;
  write_value(fs::path(run_dir_) / "params" / key, value.substr(0, 6000));
}

void FileStoreRun::tag(const std::string& key, const std::string& value) {
  if (!valid_key(key)) return;
  write_value(fs::path(run_dir_) / "tags" / key, value.substr(0, 8000));
}

void FileStoreRun::metric(const std::string& key, double value, int64_t step) {
  if (!valid_key(key)) return;
  const fs::path file = fs::path(run_dir_) / "metrics" / key;
  fs::create_directories(file.parent_path());
  char line[96];
  std::snprintf(line, sizeof line, "%lld %.17g %lld\n", (long long)now_ms(), value, (long long)step);
  // One write per point, appended: a reader never sees half a line.
  std::ofstream out(file, std::ios::app | std::ios::binary);
  out.write(line, static_cast<std::streamsize>(std::strlen(line)));
  if (!out.flush()) throw std::runtime_error("mlflow: cannot write " + file.string());
}

void FileStoreRun::truncate_metrics_after(int64_t step) {
  const fs::path metrics = fs::path(run_dir_) / "metrics";
  if (!fs::is_directory(metrics)) return;
  std::vector<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(metrics))
    if (entry.is_regular_file()) files.push_back(entry.path());
  for (const fs::path& file : files) {
    std::ifstream in(file);
    std::string kept, line;
    while (std::getline(in, line)) {
      const size_t last = line.rfind(' ');
      if (last != std::string::npos && std::stoll(line.substr(last + 1)) <= step) kept += line + "\n";
    }
    in.close();
    // Rewritten in place (a temporary file here would be read as a key); an
    // empty metric file is unreadable to MLflow, so it goes.
    if (kept.empty()) {
      fs::remove(file);
      continue;
    }
    std::ofstream out(file, std::ios::trunc | std::ios::binary);
    out << kept;
  }
}

void FileStoreRun::artifact(const std::string& file, const std::string& name) {
  const fs::path target = fs::path(run_dir_) / "artifacts" / name;
  fs::create_directories(target.parent_path());
  fs::copy_file(file, target, fs::copy_options::overwrite_existing);
}

void FileStoreRun::finish(RunStatus status) { write_run_meta(status, now_ms()); }

}  // namespace mlflow_logger
