#include "rest_run.h"

#include <curl/curl.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace mlflow_logger {
namespace {

size_t collect(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

struct Response {
  long status = 0;
  std::string body;
};

// One HTTP request; `payload` for POST and PUT.
Response request(const std::string& method, const std::string& url, const std::string& payload,
                 const std::string& content_type) {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  CURL* curl = curl_easy_init();
  if (!curl) throw std::runtime_error("mlflow: cannot start an HTTP client (libcurl)");
  Response r;
  curl_slist* headers = curl_slist_append(nullptr, ("Content-Type: " + content_type).c_str());
  if (const char* token = std::getenv("MLFLOW_TRACKING_TOKEN"))
    headers = curl_slist_append(headers, ("Authorization: Bearer " + std::string(token)).c_str());
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &r.body);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 60L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  const char* user = std::getenv("MLFLOW_TRACKING_USERNAME");
  const char* password = std::getenv("MLFLOW_TRACKING_PASSWORD");
  std::string credentials;
  if (user && password) {
    credentials = std::string(user) + ":" + password;
    curl_easy_setopt(curl, CURLOPT_USERPWD, credentials.c_str());
  }
  if (method != "GET") {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, payload.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(payload.size()));
  }
  const CURLcode code = curl_easy_perform(curl);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &r.status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  if (code != CURLE_OK) throw std::runtime_error("mlflow: " + method + " " + url + ": " + curl_easy_strerror(code));
  return r;
}

std::string escaped(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~')
      out += static_cast<char>(c);
    else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

// JSON has no NaN or infinity: MLflow takes these strings.
nlohmann::json number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  return v;
}

const char* status_name(RunStatus s) {
  switch (s) {
    case RunStatus::running:
      return "RUNNING";
    case RunStatus::finished:
      return "FINISHED";
    case RunStatus::failed:
      return "FAILED";
    case RunStatus::killed:
      return "KILLED";
  }
  return "FAILED";
}

}  // namespace

nlohmann::json RestRun::call(const std::string& method, const std::string& path, const nlohmann::json& body,
                             bool allow_missing) {
  std::string url = server_ + path;
  std::string payload;
  if (method == "GET") {
    std::string query;
    for (const auto& [k, v] : body.items())
      query += (query.empty() ? "?" : "&") + k + "=" + escaped(v.get<std::string>());
    url += query;
  } else {
    payload = body.dump();
  }
  // A server that is restarting or busy gets three tries.
  Response r;
  for (int attempt = 0;; ++attempt) {
    try {
      r = request(method, url, payload, "application/json");
      if (r.status < 500 || attempt == 2) break;
    } catch (const std::runtime_error&) {
      if (attempt == 2) throw;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500 << attempt));
  }
  if (allow_missing && r.status == 404) return nullptr;
  if (r.status < 200 || r.status >= 300)
    throw std::runtime_error("mlflow: " + method + " " + url + ": HTTP " + std::to_string(r.status) + ": " +
                             r.body.substr(0, 300));
  return r.body.empty() ? nlohmann::json::object() : nlohmann::json::parse(r.body, nullptr, false);
}

RestRun::RestRun(const std::string& server, const std::string& experiment, const std::string& run_name,
                 const std::string& run_id)
    : server_(server.back() == '/' ? server.substr(0, server.size() - 1) : server), run_id_(run_id) {
  nlohmann::json found =
      call("GET", "/api/2.0/mlflow/experiments/get-by-name", {{"experiment_name", experiment}}, true);
  std::string experiment_id;
  if (found.is_object() && found.contains("experiment")) {
    experiment_id = found["experiment"]["experiment_id"].get<std::string>();
  } else {
    try {
      experiment_id = call("POST", "/api/2.0/mlflow/experiments/create", {{"name", experiment}})["experiment_id"];
    } catch (const std::runtime_error&) {  // created meanwhile by another run
      experiment_id = call("GET", "/api/2.0/mlflow/experiments/get-by-name",
                           {{"experiment_name", experiment}})["experiment"]["experiment_id"];
    }
  }
  nlohmann::json info;
  if (run_id_.empty()) {
    nlohmann::json tags = nlohmann::json::array({{{"key", "mlflow.runName"}, {"value", run_name}}});
    info = call("POST", "/api/2.0/mlflow/runs/create",
                {{"experiment_id", experiment_id},
                 {"run_name", run_name},
                 {"start_time", now_ms()},
                 {"tags", tags}})["run"]["info"];
    run_id_ = info["run_id"].get<std::string>();
  } else {
    info = call("GET", "/api/2.0/mlflow/runs/get", {{"run_id", run_id_}})["run"]["info"];
    call("POST", "/api/2.0/mlflow/runs/update", {{"run_id", run_id_}, {"status", "RUNNING"}});
  }
  const std::string uri = info.value("artifact_uri", "");
  const std::string scheme = "mlflow-artifacts:/";
  if (uri.rfind(scheme, 0) == 0) artifact_path_ = uri.substr(scheme.size());
}

void RestRun::param(const std::string& key, const std::string& value) {
  params_.push_back({{"key", key}, {"value", value.substr(0, 6000)}});
  if (params_.size() + tags_.size() >= 100) flush();
}

void RestRun::tag(const std::string& key, const std::string& value) {
  tags_.push_back({{"key", key}, {"value", value.substr(0, 8000)}});
  if (params_.size() + tags_.size() >= 100) flush();
}

void RestRun::metric(const std::string& key, double value, int64_t step) {
  metrics_.push_back({{"key", key}, {"value", number(value)}, {"timestamp", now_ms()}, {"step", step}});
  if (metrics_.size() >= 1000) flush();
}

void RestRun::flush() {
  if (params_.empty() && tags_.empty() && metrics_.empty()) return;
  call("POST", "/api/2.0/mlflow/runs/log-batch",
       {{"run_id", run_id_}, {"params", params_}, {"tags", tags_}, {"metrics", metrics_}});
  params_ = nlohmann::json::array(), tags_ = nlohmann::json::array(), metrics_ = nlohmann::json::array();
}

void RestRun::artifact(const std::string& file, const std::string& name) {
  if (artifact_path_.empty())
    throw std::runtime_error("mlflow: the server gives run " + run_id_ +
                             " no mlflow-artifacts: location (start it with --serve-artifacts); " + name + " not sent");
  std::ifstream in(file, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  const std::string url = server_ + "/api/2.0/mlflow-artifacts/artifacts/" + artifact_path_ + "/" + name;
  const Response r = request("PUT", url, bytes.str(), "application/octet-stream");
  if (r.status < 200 || r.status >= 300)
    throw std::runtime_error("mlflow: PUT " + url + ": HTTP " + std::to_string(r.status) + ": " +
                             r.body.substr(0, 300));
}

void RestRun::finish(RunStatus status) {
  flush();
  call("POST", "/api/2.0/mlflow/runs/update",
       {{"run_id", run_id_}, {"status", status_name(status)}, {"end_time", now_ms()}});
}

}  // namespace mlflow_logger
