#include "run/provenance.h"

#include <ATen/Version.h>
#include <cstring>

#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>

#include <ATen/Parallel.h>
#include <torch/version.h>

#include "build_info.h"  // generated at every build: TRAINYARD_GIT_COMMIT
#include "distributed/device.h"
#include "plugins/registry.h"
#include "trainyard/error.h"
#include "trainyard/version.h"
#include "util/files.h"
#include "util/json.h"
#include "util/sha256.h"

namespace fs = std::filesystem;

namespace trainyard::host {

const BuildInfo& build_info() {
  static const BuildInfo info{TRAINYARD_VERSION, TRAINYARD_GIT_COMMIT};
  return info;
}

std::string loaded_blas() {
  // PyPI's LibTorch links MKL and oneDNN in (BLAS_INFO=mkl): they do its
  // matmuls whatever libblas.so another library (OpenCV) loads.
  const std::string config = at::show_config();
  auto field = [&](const std::string& key) {
    auto at = config.find(key);
    if (at == std::string::npos) return std::string();
    at += key.size();
    return config.substr(at, config.find_first_of(",\n", at) - at);
  };
  if (field("BLAS_INFO=") == "mkl") {
    std::string line = "mkl (built into LibTorch";
    for (const char* tag : {"Math Kernel Library Version ", "MKL-DNN v"}) {
      auto at = config.find(tag);
      if (at == std::string::npos) continue;
      const size_t from = at + std::strlen(tag);
      line += std::string(std::strstr(tag, "DNN") ? ", oneDNN " : ": MKL ") +
              config.substr(from, config.find_first_of(" \n", from) - from);
    }
    return line + ")";
  }
  // Otherwise (Debian's LibTorch) the libblas.so.3 the process loaded.
  std::string found = "unknown";
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        const std::string name = info->dlpi_name ? info->dlpi_name : "";
        if (name.find("libblas.so") != std::string::npos || name.find("libopenblas") != std::string::npos) {
          std::error_code ec;
          auto real = fs::canonical(name, ec);
          *static_cast<std::string*>(out) = ec ? name : real.string();
          return 1;
        }
        return 0;
      },
      &found);
  return found;
}

nlohmann::ordered_json provenance_json(const std::vector<std::string>& argv, const Registry& registry, int world_size) {
  std::string command;
  for (const auto& a : argv) {
    const bool plain = !a.empty() && a.find_first_of(" \t\n'\"\\$`*?[]{}()<>|&;") == std::string::npos;
    command += (command.empty() ? "" : " ") + (plain ? a : "'" + a + "'");  // shell-quoted for reading, approximately
  }
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  char started[32];
  std::time_t t = std::time(nullptr);
  std::strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  std::error_code ec;
  nlohmann::ordered_json plugins = nlohmann::ordered_json::array();
  for (const auto& lib : registry.libraries()) {
    std::string hash;
    try {
      hash = sha256_file(lib->path);
    } catch (const std::exception&) {
      hash = "unreadable";
    }
    plugins.push_back({{"name", lib->name}, {"version", lib->version}, {"path", lib->path}, {"sha256", hash}});
  }
  nlohmann::ordered_json j;
  j["command"] = command;
  j["cwd"] = fs::current_path(ec).string();
  j["trainyard_version"] = build_info().version;
  j["git_commit"] = build_info().git_commit;
  j["sdk_api"] = sdk_api_version();
  j["fingerprint"] = TRAINYARD_FINGERPRINT;
  j["hostname"] = host;
  j["libtorch"] = TORCH_VERSION;
  j["cuda"] = TRAINYARD_CUDA;
  j["nccl"] = std::string(TRAINYARD_NCCL) == "1";
  j["blas"] = loaded_blas();
  j["cpu"] = cpu_facts().describe();
  j["threads"] = at::get_num_threads();
  j["interop_threads"] = at::get_num_interop_threads();
  j["world_size"] = world_size;
  j["started"] = started;
  j["plugins"] = plugins;
  return j;
}

void record_provenance(const std::string& run_dir, const nlohmann::ordered_json& record) {
  write_file_atomic((fs::path(run_dir) / "provenance.json").string(), json_text(record, true) + "\n");
  append_line((fs::path(run_dir) / "provenance.jsonl").string(), json_text(record));
}

std::vector<std::string> changed_plugin_libraries(const std::string& run_dir,
                                                  const std::vector<const LibraryInfo*>& used) {
  const fs::path recorded_file = fs::path(run_dir) / "provenance.json";
  // Without the record the check cannot be made: that is said, never taken
  // for "nothing changed".
  auto damaged = [&](const std::string& what) {
    return ConfigError(recorded_file.string() + ": " + what,
                       "expected the record of the plugin libraries (names and SHA-256) that trainyard wrote when "
                       "the run started; without it a changed plugin cannot be detected",
                       "run with --allow-plugin-change to resume without the check (a new record is written), or "
                       "--fresh to start over");
  };
  std::error_code ec;
  if (!fs::is_regular_file(recorded_file, ec)) throw damaged(fs::exists(recorded_file, ec) ? "not a file" : "missing");
  std::map<std::string, std::string> recorded;  // library name -> SHA-256
  try {
    std::ifstream in(recorded_file);
    const auto record = parse_json(std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()));
    if (!record.is_object() || !record.contains("plugins") || !record["plugins"].is_array())
      throw damaged("damaged (no \"plugins\" list)");
    for (const auto& p : record["plugins"]) {
      if (!p.is_object() || !p.contains("name") || !p["name"].is_string())
        throw damaged("damaged (a \"plugins\" entry without a name)");
      recorded[p["name"].get<std::string>()] = p.value("sha256", "");
    }
  } catch (const ConfigError&) {
    throw;
  } catch (const std::exception& err) {
    throw damaged(std::string("damaged (") + err.what() + ")");
  }
  std::vector<std::string> changed;
  for (const LibraryInfo* lib : used) {
    const auto it = recorded.find(lib->name);
    if (it == recorded.end()) {
      changed.push_back(fs::path(lib->path).filename().string() + " (" + lib->name + " " + lib->version +
                        "): not among the libraries the run started with");
      continue;
    }
    if (it->second.empty() || it->second == "unreadable") continue;  // not hashed then (before 1.3, or unreadable)
    std::string now;
    try {
      now = sha256_file(lib->path);
    } catch (const std::exception&) {
      now = "unreadable";
    }
    if (now != it->second)
      changed.push_back(fs::path(lib->path).filename().string() + " (" + lib->name + " " + lib->version +
                        "): SHA-256 " + it->second.substr(0, 12) + " when the run started, " + now.substr(0, 12) +
                        " now");
  }
  return changed;
}

std::string runtime_summary() {
  return "LibTorch " TORCH_VERSION " (BLAS: " + loaded_blas() + "); " + cuda_summary() + "\n" +
         "cpu: " + cpu_facts().describe() + "\n";
}

}  // namespace trainyard::host
