#include "report/report.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <tuple>

#include "formats/metrics.h"
#include "report/svg_chart.h"
#include "trainyard/error.h"
#include "util/csv.h"
#include "util/files.h"
#include "util/json.h"
#include "util/text.h"

namespace fs = std::filesystem;

namespace trainyard::host {
namespace {

// Points of `name` against x. By epoch: the end-of-epoch train events (they
// carry secs_per_train) and the test events; the last value of each epoch.
ChartSeries series(const std::vector<MetricsEvent>& events, const std::string& name, const std::string& x) {
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

// What a meter value measures, without its phase: train_loss -> loss.
std::string quantity_of(const std::string& name) {
  for (const std::string phase : {"train_", "test_"})
    if (name.rfind(phase, 0) == 0) return name.substr(phase.size());
  return name;
}

// What the y axis measures: the one name, or what the names share
// (train_loss and test_loss: "loss").
std::string axis_label(const std::vector<std::string>& ys) {
  if (ys.size() == 1) return ys[0];
  const std::string first = quantity_of(ys[0]);
  for (const auto& y : ys)
    if (quantity_of(y) != first) return join(ys, ", ");
  if (first.rfind("accuracy_top", 0) == 0) return "accuracy (top-" + first.substr(12) + ")";
  return first;
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
    "td{overflow-wrap:anywhere}"
    "th{background:#f3f3f3}.plots{display:flex;flex-wrap:wrap;gap:12px}"
    // Charts scale down to a narrow window (their viewBox keeps the drawing).
    ".plots figure{margin:0;flex:1 1 520px;max-width:720px}.plots svg{border:1px solid #eee;width:100%;height:auto}"
    "pre{background:#f7f7f7;padding:12px;font-size:12px;overflow:auto}.muted{color:#777}";

// A result file's name and when it was written: "confusion_matrix-e3-i120.csv"
// is result "confusion_matrix" at epoch 3, iteration 120 (0 at an epoch's end).
struct ResultFile {
  std::string name;
  int64_t epoch = 0, iteration = 0;
  fs::path path;
};

std::optional<ResultFile> result_file(const fs::path& path) {
  static const std::regex pattern(R"(([a-z0-9_-]+?)-e(\d+)(?:-i(\d+))?\.[a-z0-9_-]+)");
  std::smatch m;
  const std::string name = path.filename().string();
  if (!std::regex_match(name, m, pattern)) return std::nullopt;
  return ResultFile{m[1], std::stoll(m[2]), m[3].matched ? std::stoll(m[3]) : 0, path};
}

// The meters' structured results (RUN_DIR/meters/): each result's latest
// table shown, every file listed.
std::string meter_results_html(const fs::path& dir) {
  if (!fs::is_directory(dir / "meters")) return "";
  std::map<std::string, std::vector<ResultFile>> by_name;
  for (const auto& entry : fs::directory_iterator(dir / "meters"))
    if (auto r = result_file(entry.path()); r && entry.is_regular_file()) by_name[r->name].push_back(*r);
  if (by_name.empty()) return "";
  std::string html = "<h2>Meter results</h2>\n";
  for (auto& [name, files] : by_name) {
    std::sort(files.begin(), files.end(), [](const ResultFile& a, const ResultFile& b) {
      return std::tie(a.epoch, a.iteration, a.path) < std::tie(b.epoch, b.iteration, b.path);
    });
    const ResultFile& latest = files.back();
    html += "<h3>" + xml_escape(name) + "</h3>\n<p class=\"muted\">latest: meters/" +
            xml_escape(latest.path.filename().string()) + " (epoch " + std::to_string(latest.epoch) +
            (latest.iteration ? ", iteration " + std::to_string(latest.iteration) : "") + "); " +
            std::to_string(files.size()) + " file(s) in meters/</p>\n";
    if (latest.path.extension() != ".csv") continue;
    const auto rows = parse_csv(read_whole_file(latest.path.string()));
    constexpr size_t kMaxRows = 100;  // a 1000-class confusion matrix stays in its file
    html += "<table>\n";
    for (size_t i = 0; i < rows.size() && i <= kMaxRows; ++i) {
      const char* cell = i == 0 ? "th" : "td";
      html += "<tr>";
      for (const auto& c : rows[i]) html += std::string("<") + cell + ">" + xml_escape(c) + "</" + cell + ">";
      html += "</tr>\n";
    }
    html += "</table>\n";
    if (rows.size() > kMaxRows + 1)
      html += "<p class=\"muted\">" + std::to_string(rows.size() - kMaxRows - 1) + " more rows in the file</p>\n";
  }
  return html;
}

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
  // One chart per quantity, train and test together: top-1 and top-5 have
  // scales of their own.
  std::set<std::string> quantities;
  for (const auto& n : names)
    if (meter(n) && (n.find("loss") != std::string::npos || n.find("accuracy") != std::string::npos))
      quantities.insert(quantity_of(n));
  std::vector<std::string> ordered;  // the loss first, as before
  if (quantities.count("loss")) ordered.push_back("loss");
  for (const auto& q : quantities)
    if (q != "loss") ordered.push_back(q);
  for (const std::string& q : ordered) {
    std::string title = q == "loss" ? "Loss" : q;
    if (q.rfind("accuracy_top", 0) == 0) title = "Accuracy (top-" + q.substr(12) + ")";
    group(title, [&](const std::string& n) { return meter(n) && quantity_of(n) == q; });
  }
  group("Learning rate", [](const std::string& n) { return n == "lr"; });
  return plots;
}

std::string write_sweep_report(const std::string& sweep_dir, const std::string& title,
                               const std::vector<std::pair<std::string, std::string>>& runs) {
  const fs::path dir(sweep_dir);
  std::vector<std::pair<std::string, std::vector<MetricsEvent>>> logged;
  std::set<std::string> names;
  for (const auto& [name, run_dir] : runs) {
    const fs::path metrics = fs::path(run_dir) / "metrics.jsonl";
    if (!fs::exists(metrics)) continue;
    logged.emplace_back(name, read_events(metrics.string()));
    for (const auto& e : logged.back().second)
      for (const auto& [k, _] : e.values)
        if (k.rfind("test_", 0) == 0 || k == "train_loss") names.insert(k);
  }
  fs::create_directories(dir / "plots");
  std::string svgs;
  size_t index = 0;
  for (const auto& name : names) {
    Chart chart;
    chart.title = name + " by run";
    chart.x_label = "epoch";
    chart.integer_x = true;
    chart.y_label = axis_label({name});
    for (const auto& [run, events] : logged) {
      ChartSeries s = series(events, name, "epoch");
      s.name = run;
      if (!s.x.empty()) chart.series.push_back(std::move(s));
    }
    const std::string svg = svg_line_chart(chart);
    write_file_atomic((dir / "plots" / file_name(index++, name)).string(), svg);
    svgs += "<figure>" + svg.substr(svg.find("<svg")) + "</figure>\n";
  }
  std::string html = std::string("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>") + xml_escape(title) +
                     "</title><style>" + kStyle + "</style></head><body>\n<h1>" + xml_escape(title) + "</h1>\n";
  html += "<p class=\"muted\">" + std::to_string(logged.size()) + " of " + std::to_string(runs.size()) +
          " runs have logged values; each run's own report is in its folder.</p>\n";
  html += "<h2>Plots</h2>\n<div class=\"plots\">\n" + svgs + "</div>\n</body></html>\n";
  const std::string path = (dir / "report.html").string();
  write_file_atomic(path, html);
  return path;
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
    chart.integer_x = true;  // iterations and epochs are counts
    chart.y_label = axis_label(plots[i].ys);
    for (const auto& y : plots[i].ys) chart.series.push_back(series(events, y, plots[i].x));
    // Train meters are running means that restart every epoch: say so, and
    // mark where each epoch ends, so that their jumps are not read as events.
    const bool running = std::any_of(plots[i].ys.begin(), plots[i].ys.end(),
                                     [](const std::string& y) { return y.rfind("train_", 0) == 0; });
    if (running && plots[i].x == "iteration") {
      chart.note = "train values: running means over each epoch, restarted at every epoch (dotted lines)";
      for (const auto& e : events)
        if (e.phase == "train" && e.values.count("secs_per_train")) chart.guides_x.push_back(double(e.iteration));
    }
    const std::string svg = svg_line_chart(chart);
    write_file_atomic((dir / "plots" / file_name(i, plots[i].title)).string(), svg);
    svgs += "<figure>" + svg.substr(svg.find("<svg")) + "</figure>\n";  // inline: no <?xml?> inside HTML
  }

  const auto summary = read_summary((dir / "summary.json").string());
  const nlohmann::ordered_json provenance = read_json_file((dir / "provenance.json").string());
  const std::string name = summary && !summary->experiment.empty() ? summary->experiment : dir.filename().string();
  std::string html = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + xml_escape(name) +
                     " - trainyard report</title><style>" + kStyle + "</style></head><body>\n<h1>" + xml_escape(name) +
                     "</h1>\n<p class=\"muted\">" + xml_escape(fs::absolute(dir).string()) + "</p>\n";
  if (summary) {
    html +=
        "<p>" + std::to_string(summary->epochs_completed) + " epochs, " + std::to_string(summary->iteration) +
        " iterations" + (summary->stage.empty() ? "" : ", last stage " + xml_escape(summary->stage)) +
        (summary->stopped.empty() ? "" : "; stopped: " + xml_escape(summary->stopped)) +
        (summary->best ? "; best " + xml_escape(summary->best->first) + " " + number_text(summary->best->second) : "") +
        "</p>\n<h2>Final values</h2>\n<table><tr><th>value</th><th>last</th></tr>\n";
    for (const auto& [k, v] : summary->metrics)
      html += "<tr><td>" + xml_escape(k) + "</td><td>" + number_text(v) + "</td></tr>\n";
    html += "</table>\n";
  } else {
    html += "<p>No summary.json yet: the run has not finished.</p>\n";
  }
  html += "<h2>Plots</h2>\n<div class=\"plots\">\n" + svgs + "</div>\n";
  html += meter_results_html(dir);
  if (provenance.is_object()) {
    auto text = [](const nlohmann::ordered_json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); };
    html += "<h2>Provenance</h2>\n<table>\n";
    for (const char* k : {"command", "trainyard_version", "git_commit", "hostname", "libtorch", "blas", "threads",
                          "world_size", "started"})
      if (provenance.contains(k))
        html += "<tr><th>" + std::string(k) + "</th><td>" + xml_escape(text(provenance[k])) + "</td></tr>\n";
    html +=
        "</table>\n<h2>Plugins</h2>\n<table><tr><th>library</th><th>version</th><th>SHA-256</th><th>path</th></tr>\n";
    if (auto plugins = provenance.find("plugins"); plugins != provenance.end() && plugins->is_array())
      for (const auto& p : *plugins) {
        auto field = [&](const char* key) { return p.is_object() && p.contains(key) ? text(p[key]) : std::string(); };
        html += "<tr><td>" + xml_escape(field("name")) + "</td><td>" + xml_escape(field("version")) +
                "</td><td><code>" + xml_escape(field("sha256").substr(0, 16)) + "...</code></td><td>" +
                xml_escape(field("path")) + "</td></tr>\n";
      }
    html += "</table>\n";
  }
  if (fs::exists(dir / "config.yaml"))
    html += "<h2>Resolved configuration</h2>\n<pre>" + xml_escape(read_whole_file((dir / "config.yaml").string())) +
            "</pre>\n";
  html += "</body></html>\n";
  const std::string path = (dir / "report.html").string();
  write_file_atomic(path, html);
  return path;
}

}  // namespace trainyard::host
