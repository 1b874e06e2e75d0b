#include "report/report.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "report/svg_chart.h"
#include "trainyard/error.h"
#include "util/files.h"
#include "util/json.h"

namespace fs = std::filesystem;

namespace trainyard::host {
namespace {

struct Event {
  std::string phase;
  int64_t epoch = 0, iteration = 0;
  std::map<std::string, double> values;
};

std::vector<Event> read_events(const std::string& path) {
  std::vector<Event> events;
  for (const auto& line : read_lines(path)) {
    if (line.empty()) continue;
    try {
      YAML::Node n = YAML::Load(line);  // each line is a JSON object, and JSON is YAML
      Event e;
      e.phase = n["phase"].as<std::string>("");
      e.epoch = n["epoch"].as<int64_t>(0);
      e.iteration = n["iteration"].as<int64_t>(0);
      if (n["values"].IsMap())
        for (const auto& kv : n["values"])
          if (kv.second.IsScalar() && kv.second.Scalar() != "null") e.values[kv.first.Scalar()] = kv.second.as<double>(0.0);
      events.push_back(std::move(e));
    } catch (const YAML::Exception&) {
      // A line cut short by a crash: the rest of the file still reports.
    }
  }
  return events;
}

// Points of `name` against x. By epoch: the end-of-epoch train events (they
// carry secs_per_train) and the test events; the last value of each epoch.
ChartSeries series(const std::vector<Event>& events, const std::string& name, const std::string& x) {
  std::map<int64_t, double> points;
  for (const auto& e : events) {
    auto it = e.values.find(name);
    if (it == e.values.end()) continue;
    if (x == "epoch") {
      if (e.phase == "train" && !e.values.count("secs_per_train")) continue;
      points[e.epoch] = it->second;
    } else {
      points[e.iteration] = it->second;
    }
  }
  ChartSeries s{name, {}, {}};
  for (const auto& [k, v] : points) s.x.push_back(double(k)), s.y.push_back(v);
  return s;
}

std::string file_name(size_t index, const std::string& title) {
  std::string name;
  for (char c : title) name += std::isalnum(static_cast<unsigned char>(c)) ? char(std::tolower(c)) : '_';
  char prefix[8];
  std::snprintf(prefix, sizeof prefix, "%02zu-", index + 1);
  return prefix + name.substr(0, 60) + ".svg";
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

const char* kStyle =
    "body{font-family:sans-serif;margin:24px;color:#222;max-width:1100px}"
    "h1{font-size:24px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ddd}"
    "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}"
    "th{background:#f3f3f3}.plots{display:flex;flex-wrap:wrap;gap:12px}.plots svg{border:1px solid #eee}"
    "pre{background:#f7f7f7;padding:12px;font-size:12px;overflow:auto}.muted{color:#777}";

}  // namespace

std::vector<PlotSpec> default_plots(const std::set<std::string>& names) {
  std::vector<PlotSpec> plots;
  auto group = [&](const std::string& title, auto&& wanted) {
    PlotSpec p;
    p.title = title;
    for (const auto& n : names)
      if (wanted(n)) p.ys.push_back(n);
    if (!p.ys.empty()) plots.push_back(p);
  };
  auto meter = [](const std::string& n) { return n.rfind("train_", 0) == 0 || n.rfind("test_", 0) == 0; };
  group("Loss", [&](const std::string& n) { return meter(n) && n.find("loss") != std::string::npos; });
  group("Accuracy", [&](const std::string& n) { return meter(n) && n.find("accuracy") != std::string::npos; });
  group("Learning rate", [](const std::string& n) { return n == "lr"; });
  return plots;
}

std::string write_report(const std::string& run_dir, const std::vector<PlotSpec>& requested) {
  const fs::path dir(run_dir);
  if (!fs::exists(dir / "metrics.jsonl"))
    throw Error(run_dir + ": no metrics.jsonl: not a run directory, or the run has not logged anything yet");
  const auto events = read_events((dir / "metrics.jsonl").string());
  std::set<std::string> names;
  for (const auto& e : events)
    for (const auto& [k, _] : e.values) names.insert(k);
  const std::vector<PlotSpec> plots = requested.empty() ? default_plots(names) : requested;

  fs::create_directories(dir / "plots");
  std::string svgs;
  for (size_t i = 0; i < plots.size(); ++i) {
    Chart chart;
    chart.title = plots[i].title;
    chart.x_label = plots[i].x;
    chart.y_label = plots[i].ys.size() == 1 ? plots[i].ys[0] : "value";
    for (const auto& y : plots[i].ys) chart.series.push_back(series(events, y, plots[i].x));
    const std::string svg = svg_line_chart(chart);
    write_file_atomic((dir / "plots" / file_name(i, plots[i].title)).string(), svg);
    svgs += "<figure>" + svg.substr(svg.find("<svg")) + "</figure>\n";  // inline: no <?xml?> inside HTML
  }

  YAML::Node summary, config, provenance;
  try {
    if (fs::exists(dir / "summary.json")) summary = YAML::LoadFile((dir / "summary.json").string());
    if (fs::exists(dir / "provenance.json")) provenance = YAML::LoadFile((dir / "provenance.json").string());
  } catch (const YAML::Exception&) {
  }
  const std::string name = summary["experiment"] ? summary["experiment"].as<std::string>() : dir.filename().string();
  std::string html = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + xml_escape(name) +
                     " - trainyard report</title><style>" + kStyle + "</style></head><body>\n<h1>" + xml_escape(name) +
                     "</h1>\n<p class=\"muted\">" + xml_escape(fs::absolute(dir).string()) + "</p>\n";
  if (summary.IsMap()) {
    html += "<p>" + summary["epochs_completed"].as<std::string>("?") + " epochs, " +
            summary["iteration"].as<std::string>("?") + " iterations" +
            (summary["stage"] ? ", last stage " + xml_escape(summary["stage"].as<std::string>()) : "") +
            (summary["stopped"] ? "; stopped: " + xml_escape(summary["stopped"].as<std::string>()) : "") +
            (summary["best"] ? "; best " + xml_escape(summary["best"]["meter"].as<std::string>("")) + " " +
                                   xml_escape(summary["best"]["value"].as<std::string>(""))
                             : "") +
            "</p>\n<h2>Final values</h2>\n<table><tr><th>value</th><th>last</th></tr>\n";
    if (summary["metrics"].IsMap())
      for (const auto& kv : summary["metrics"])
        html += "<tr><td>" + xml_escape(kv.first.Scalar()) + "</td><td>" +
                number_text(kv.second.as<double>(0.0)) + "</td></tr>\n";
    html += "</table>\n";
  } else {
    html += "<p>No summary.json yet: the run has not finished.</p>\n";
  }
  html += "<h2>Plots</h2>\n<div class=\"plots\">\n" + svgs + "</div>\n";
  if (provenance.IsMap()) {
    html += "<h2>Provenance</h2>\n<table>\n";
    for (const char* k : {"command", "trainyard_version", "git_commit", "hostname", "libtorch", "blas", "threads",
                          "world_size", "started"})
      if (provenance[k]) html += "<tr><th>" + std::string(k) + "</th><td>" + xml_escape(provenance[k].as<std::string>()) + "</td></tr>\n";
    html += "</table>\n<h2>Plugins</h2>\n<table><tr><th>library</th><th>version</th><th>SHA-256</th><th>path</th></tr>\n";
    if (provenance["plugins"].IsSequence())
      for (const auto& p : provenance["plugins"])
        html += "<tr><td>" + xml_escape(p["name"].as<std::string>("")) + "</td><td>" +
                xml_escape(p["version"].as<std::string>("")) + "</td><td><code>" +
                xml_escape(p["sha256"].as<std::string>("").substr(0, 16)) + "...</code></td><td>" +
                xml_escape(p["path"].as<std::string>("")) + "</td></tr>\n";
    html += "</table>\n";
  }
  if (fs::exists(dir / "config.yaml"))
    html += "<h2>Resolved configuration</h2>\n<pre>" + xml_escape(read_text((dir / "config.yaml").string())) + "</pre>\n";
  html += "</body></html>\n";
  const std::string path = (dir / "report.html").string();
  write_file_atomic(path, html);
  return path;
}

}  // namespace trainyard::host
