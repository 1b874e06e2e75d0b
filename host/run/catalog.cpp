#include "run/mode_requests.h"

#include <ctime>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>

#include <ATen/ATen.h>
#include <opencv2/core.hpp>

#include "formats/npy.h"
#include "report/svg_chart.h"
#include "run/loaded_model.h"
#include "run/runner.h"
#include "train/guard.h"
#include "train/loader_settings.h"
#include "trainyard/embeddings.h"
#include "trainyard/error.h"
#include "trainyard/image_codec.h"
#include "trainyard/network.h"
#include "trainyard/version.h"
#include "util/csv.h"
#include "util/files.h"
#include "util/json.h"
#include "util/shape.h"
#include "util/text.h"

namespace fs = std::filesystem;

namespace trainyard::host {
namespace {

constexpr const char* kFormat = "trainyard-catalog";
constexpr int kFormatVersion = 1;

// A catalog holds embeddings: a network that says it scores classes has none to give.
void require_embedding_network(const LoadedModel& m, const std::string& command) {
  const Built<Network>& net = m.components.network;
  if (network_output_kind(net) == OutputKind::class_scores)
    throw ConfigError(command + ": " + net.config->where + " (" + component_label(*net.config) +
                          ") outputs class scores (a classification head)",
                      "expected a network that outputs embeddings",
                      "give it embedding_size: N (mlp, convnet, resnet) and train it with a metric-learning loss "
                      "such as triplet_margin");
}

// The network's output for every sample, in order: float32 [N, D] on the CPU,
// and the samples' class labels (-1 where the dataset has none).
std::pair<at::Tensor, at::Tensor> embed_all(LoadedModel& m, const Dataset& dataset, LoaderOptions loader,
                                            const std::string& origin) {
  std::vector<int64_t> order(static_cast<size_t>(dataset.size()));
  std::iota(order.begin(), order.end(), 0);
  loader.bad_record_hint = "";  // the file to fix is named; embed and search have no on_bad_record to point to
  BatchStream batches = batch_stream(dataset, order, 0, 0, loader, std::make_shared<LoaderStats>());
  Network& net = m.network();
  const Evaluator evaluator = m.evaluator();
  net.eval();
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> outputs, labels;
  while (true) {
    std::optional<Batch> batch;
    try {
      batch = batches();
    } catch (const Error& err) {  // an image that does not decode
      throw ConfigError("command line: " + origin + ": " + err.what());
    }
    if (!batch) break;
    const at::Tensor out = evaluator.forward(*batch).to(at::kFloat).cpu();  // in the experiment's precision
    if (out.dim() != 2 || out.size(0) != batch->size())
      throw ConfigError(origin + ": the network gives " + shape_text(out.sizes()) + " for a batch of " +
                            std::to_string(batch->size()),
                        "expected one embedding per sample, [" + std::to_string(batch->size()) + ", size]", "");
    outputs.push_back(out);
    const at::Tensor& t = batch->target;
    labels.push_back(t.defined() && t.dim() == 1 && !at::isFloatingType(t.scalar_type())
                         ? t.to(at::kLong).cpu()
                         : at::full({batch->size()}, -1, at::kLong));
  }
  return {at::cat(outputs), at::cat(labels)};
}

std::string class_name(const LoadedModel& m, int64_t label) {
  if (label < 0) return "";
  const auto& names = m.context.dataset.class_names;
  return label < static_cast<int64_t>(names.size()) ? names[static_cast<size_t>(label)] : std::to_string(label);
}

std::string now_utc() {
  char text[32];
  const std::time_t t = std::time(nullptr);
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return text;
}

std::string base64(const std::string& bytes) {
  static const char* digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8) | uint8_t(bytes[i + 2]);
    out += digits[(v >> 18) & 63], out += digits[(v >> 12) & 63], out += digits[(v >> 6) & 63], out += digits[v & 63];
  }
  if (i < bytes.size()) {
    const uint32_t v = (uint8_t(bytes[i]) << 16) | (i + 1 < bytes.size() ? uint8_t(bytes[i + 1]) << 8 : 0);
    out += digits[(v >> 18) & 63], out += digits[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? digits[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

// A file as an <img> source the page carries itself.
std::string file_uri(const std::string& path) {
  // The media type by the file's name (image_codec.h's table); JPEG's for a name it does not know.
  const auto format = image_codec::format_for_extension(fs::path(path).extension().string());
  std::string type = "image/jpeg";
  for (const auto& f : image_codec::formats())
    if (f.format == format) type = f.media_type;
  return "data:" + type + ";base64," + base64(read_whole_file(path));
}

// A dataset sample drawn back as a PNG: its preprocessing undone (mean, std
// and the [0, 1] scaling of float samples; 8-bit samples as they are).
std::string sample_uri(const Dataset& dataset, int64_t index, const std::optional<std::map<std::string, Value>>& prep) {
  at::Tensor x = dataset.get(index).input.cpu();
  if (x.dim() == 2) x = x.unsqueeze(0);
  if (x.dim() != 3 || (x.size(0) != 1 && x.size(0) != 3)) return "";
  if (x.scalar_type() != at::kByte) {
    x = x.to(at::kFloat);
    std::vector<double> mean, std;
    if (prep) {
      if (auto it = prep->find("mean"); it != prep->end())
        if (auto* v = std::get_if<std::vector<double>>(&it->second)) mean = *v;
      if (auto it = prep->find("std"); it != prep->end())
        if (auto* v = std::get_if<std::vector<double>>(&it->second)) std = *v;
    }
    for (int64_t c = 0; c < x.size(0); ++c) {
      if (!std.empty()) x[c].mul_(std[std::min<size_t>(size_t(c), std.size() - 1)]);
      if (!mean.empty()) x[c].add_(mean[std::min<size_t>(size_t(c), mean.size() - 1)]);
    }
    x = x.mul(255).round_().clamp_(0, 255).to(at::kByte);
  }
  x = x.permute({1, 2, 0}).contiguous();
  if (x.size(2) == 3) x = x.flip(2).contiguous();  // RGB -> OpenCV's BGR
  cv::Mat image(static_cast<int>(x.size(0)), static_cast<int>(x.size(1)), x.size(2) == 3 ? CV_8UC3 : CV_8UC1,
                x.data_ptr<uint8_t>());
  std::string png;
  try {
    png = image_codec::encode_png(image);
  } catch (const image_codec::Error&) {
    return "";
  }
  return "data:image/png;base64," + base64(png);
}

}  // namespace

int64_t Runner::embed(const EmbedRequest& request) const {
  const std::string out = request.output;
  if (fs::exists(out))
    throw ConfigError("command line: --output " + out + ": exists", "expected a new folder for the catalog",
                      "remove it or choose another name");
  check_output_folder(out, "--output " + out);
  LoadedModel m = load_model(request.checkpoint);
  require_embedding_network(m, "embed");
  const Experiment& stage = *m.stage;
  at::Tensor embeddings, labels;
  std::vector<std::string> sources;
  std::string source;
  if (request.input.empty()) {
    const Built<Dataset>& split = m.evaluation_data();
    source = split.config->key;
    const int64_t batch =
        stage.loop.test_batch_per_device > 0 ? stage.loop.test_batch_per_device : stage.loop.batch_per_device;
    const LoaderOptions loader = make_loader_options(stage.loop, stage.seed, stage.network, split, batch, m.context);
    std::tie(embeddings, labels) = embed_all(m, *split.object, loader, source);
    for (int64_t i = 0; i < embeddings.size(0); ++i) sources.push_back(source + ":" + std::to_string(i));
  } else {
    InputSet input =
        open_input(m, registry_, request.input, {}, request.input_options, "embed", "--input " + request.input);
    source = fs::absolute(request.input).string();
    std::tie(embeddings, labels) = embed_all(m, *input.dataset, input.loader, "--input " + request.input);
    if (!input.labeled) labels.fill_(-1);
    sources = input.sources;
  }
  {
    NewFolder folder(out);  // a catalog is whole or absent
    const std::string& tmp = folder.dir();
    write_npy(tmp + "/embeddings.npy", embeddings);
    write_npy(tmp + "/labels.npy", labels);
    std::string items = csv_row({"index", "source", "label", "class"});
    const auto label_of = labels.accessor<int64_t, 1>();
    for (int64_t i = 0; i < embeddings.size(0); ++i) {
      const int64_t label = label_of[i];
      items += csv_row(
          {std::to_string(i), sources[size_t(i)], label >= 0 ? std::to_string(label) : "", class_name(m, label)});
    }
    write_file_atomic(tmp + "/items.csv", items);
    const at::Tensor norms = embeddings.norm(2, 1);
    nlohmann::ordered_json j;
    j["format"] = kFormat;
    j["format_version"] = kFormatVersion;
    j["items"] = embeddings.size(0);
    j["embedding_size"] = embeddings.size(1);
    j["unit_norm"] = embeddings.size(0) > 0 && (norms - 1).abs().max().item<double>() < 1e-3;
    j["source"] = source;
    j["input_options"] = request.input_options;
    j["experiment"] = fs::absolute(request.experiment_file).string();
    j["sets"] = request.sets;
    std::vector<std::string> plugin_dirs;  // absolute: search may run from another folder
    for (const auto& d : request.plugin_dirs) plugin_dirs.push_back(fs::absolute(d).string());
    j["plugin_dirs"] = plugin_dirs;
    j["checkpoint"] = fs::absolute(request.checkpoint).string();
    j["network"] = m.components.network.config->plugin;
    j["created"] = now_utc();
    j["trainyard"] = TRAINYARD_VERSION;
    write_file_atomic(tmp + "/catalog.json", json_text(j, true) + "\n");
    folder.commit();
  }
  return embeddings.size(0);
}

CatalogInfo read_catalog_info(const std::string& dir) {
  const std::string file = (fs::path(dir) / "catalog.json").string();
  if (!fs::is_directory(dir))
    throw ConfigError("command line: " + dir + ": no such folder", "expected a catalog written by trainyard embed", "");
  if (!fs::is_regular_file(file))
    throw ConfigError(dir + ": no catalog.json", "expected a catalog folder written by trainyard embed", "");
  // Each field checked by name: a damaged or hand-edited file is told what
  // is wrong where, never with the JSON library's own exception text.
  const std::string expected = "expected the catalog.json trainyard embed writes";
  const std::string again = "embed the catalog again (trainyard embed)";
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(read_whole_file(file));
  } catch (const nlohmann::json::parse_error& err) {
    throw ConfigError(file + ": not valid JSON (damaged or cut short at byte " + std::to_string(err.byte) + ")",
                      expected, again);
  }
  if (!j.is_object()) throw ConfigError(file + ": not a JSON object", expected, again);
  auto field = [&](const char* key, bool (nlohmann::ordered_json::*is)() const noexcept,
                   const char* kind) -> const nlohmann::ordered_json& {
    const auto it = j.find(key);
    if (it == j.end()) throw ConfigError(file + ": no \"" + std::string(key) + "\"", expected, again);
    if (!((*it).*is)()) throw ConfigError(file + ": \"" + std::string(key) + "\" is not " + kind, expected, again);
    return *it;
  };
  auto strings = [&](const char* key) {
    std::vector<std::string> out;
    for (const auto& v : field(key, &nlohmann::ordered_json::is_array, "a list")) {
      if (!v.is_string())
        throw ConfigError(file + ": \"" + std::string(key) + "\" holds a value that is not a string", expected, again);
      out.push_back(v.get<std::string>());
    }
    return out;
  };
  if (field("format", &nlohmann::ordered_json::is_string, "a string") != kFormat)
    throw ConfigError(file + ": \"format\" is not \"" + std::string(kFormat) + "\"", expected, again);
  const int64_t version = field("format_version", &nlohmann::ordered_json::is_number_integer, "an integer");
  if (version > kFormatVersion)
    throw ConfigError(file + ": format_version " + std::to_string(version) + " is newer than this trainyard's " +
                          std::to_string(kFormatVersion),
                      "expected a catalog this version reads", "search with the trainyard that embedded it");
  CatalogInfo c;
  c.dir = dir;
  c.items = field("items", &nlohmann::ordered_json::is_number_integer, "an integer");
  c.embedding_size = field("embedding_size", &nlohmann::ordered_json::is_number_integer, "an integer");
  if (c.items < 0 || c.embedding_size < 1)
    throw ConfigError(file + ": " + std::to_string(c.items) + " items of size " + std::to_string(c.embedding_size),
                      expected, again);
  if (c.items == 0)
    throw ConfigError(dir + ": the catalog holds no items", "expected a catalog of at least one item to search",
                      "embed a split or --input that has samples");
  c.source = field("source", &nlohmann::ordered_json::is_string, "a string").get<std::string>();
  if (const auto it = j.find("input_options"); it != j.end() && it->is_string()) c.input_options = *it;
  c.experiment_file = field("experiment", &nlohmann::ordered_json::is_string, "a string").get<std::string>();
  c.sets = strings("sets");
  c.plugin_dirs = strings("plugin_dirs");
  c.checkpoint = field("checkpoint", &nlohmann::ordered_json::is_string, "a string").get<std::string>();
  if (fs::path(c.source).is_absolute()) c.input = c.source;
  return c;
}

void Runner::search(const CatalogInfo& catalog, const SearchRequest& request, std::ostream& out) const {
  // The catalog's arrays, checked against one another before any work.
  const std::string dir = catalog.dir;
  const at::Tensor items = read_npy(dir + "/embeddings.npy");
  const at::Tensor labels = read_npy(dir + "/labels.npy");
  std::vector<std::vector<std::string>> rows;
  try {
    rows = parse_csv(read_whole_file(dir + "/items.csv"));
  } catch (const std::exception& err) {
    throw ConfigError(dir + "/items.csv: " + err.what(), "expected the CSV trainyard embed writes", "embed it again");
  }
  if (items.dim() != 2 || !at::isFloatingType(items.scalar_type()))
    throw ConfigError(dir + "/embeddings.npy: " + shape_text(items.sizes()) + " " + c10::toString(items.scalar_type()),
                      "expected floating-point embeddings [items, size]", "");
  if (items.size(0) != catalog.items || items.size(1) != catalog.embedding_size || labels.numel() != items.size(0) ||
      rows.size() != static_cast<size_t>(items.size(0)) + 1)
    throw ConfigError(dir + ": embeddings.npy " + shape_text(items.sizes()) + ", labels.npy " +
                          shape_text(labels.sizes()) + " and items.csv " +
                          count_of(static_cast<int64_t>(rows.size()) - 1, "row") + " disagree with catalog.json (" +
                          std::to_string(catalog.items) + " items of " + std::to_string(catalog.embedding_size) + ")",
                      "expected the catalog as trainyard embed wrote it", "embed it again");
  LoadedModel m = load_model(request.checkpoint.empty() ? catalog.checkpoint : request.checkpoint);
  require_embedding_network(m, "search");
  InputSet queries = open_input(m, registry_, "", request.queries, catalog.input_options, "search", "--query");
  const at::Tensor q = embed_all(m, *queries.dataset, queries.loader, "--query").first;
  if (q.size(1) != items.size(1))
    throw ConfigError("search: catalog " + dir + " holds " + std::to_string(items.size(1)) +
                          "-d embeddings, and the network of " + catalog.experiment_file + " gives " +
                          std::to_string(q.size(1)) + "-d ones",
                      "expected a catalog embedded by the network that embeds the queries",
                      "embed the catalog again with this network (trainyard embed), or search with the experiment and "
                      "checkpoint that made it");
  // Exact search: every query against every item.
  const at::Tensor c = items.to(at::kFloat);
  const bool cosine = request.distance == "cosine";
  const at::Tensor scores = cosine ? l2_normalize_rows(q).mm(l2_normalize_rows(c).t()) : at::cdist(q, c);
  const int64_t k = std::min<int64_t>(request.top_k, items.size(0));
  auto [best, index] = scores.topk(k, /*dim=*/1, /*largest=*/cosine, /*sorted=*/true);

  // The items' pictures: their files, or the samples of the split or LMDB they came from.
  std::shared_ptr<Dataset> drawn;
  if (catalog.source == m.evaluation_data().config->key) {
    drawn = m.evaluation_data().object;
  } else if (!catalog.input.empty() &&
             (fs::is_regular_file(catalog.input) || fs::exists(fs::path(catalog.input) / "data.mdb"))) {  // an LMDB
    drawn =
        open_input(m, registry_, catalog.input, {}, catalog.input_options, "search", "catalog input " + catalog.input)
            .dataset;
  }
  auto picture = [&](const std::string& source, int64_t item) -> std::string {
    if (fs::path(source).is_absolute() && fs::is_regular_file(source)) return file_uri(source);
    if (drawn && item < drawn->size()) return sample_uri(*drawn, item, m.image_preprocessing);
    return "";
  };

  const std::string measure = cosine ? "similarity" : "distance";
  std::string csv = csv_row({"query", "rank", "index", "source", "label", "class", measure});
  std::string html =
      "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>trainyard search</title><style>"
      "body{font-family:sans-serif}figure{display:inline-block;margin:4px;text-align:center;"
      "font-size:12px;vertical-align:top}img{width:96px;height:96px;object-fit:contain;"
      "image-rendering:pixelated;border:1px solid #ccc}figure.query img{border:2px solid #36c}"
      "</style></head><body>\n<h1>trainyard search</h1>\n<p>catalog " +
      xml_escape(dir) + " (" + std::to_string(items.size(0)) + " items), " + xml_escape(request.distance) + " " +
      measure + ", top " + std::to_string(k) + "</p>\n";
  const at::Tensor best_cpu = best.cpu(), index_cpu = index.cpu();
  for (int64_t i = 0; i < q.size(0); ++i) {
    const std::string& query = queries.sources[size_t(i)];
    out << "query " << query << "\n";
    html += "<section><h2>" + xml_escape(fs::path(query).filename().string()) +
            "</h2>\n<figure class=\"query\"><img src=\"" + file_uri(query) +
            "\"><figcaption>query</figcaption></figure>\n";
    for (int64_t r = 0; r < k; ++r) {
      const int64_t item = index_cpu[i][r].item<int64_t>();
      const std::vector<std::string>& fields = rows[size_t(item) + 1];
      const std::string source = fields.size() > 1 ? fields[1] : "";
      const std::string label = fields.size() > 2 ? fields[2] : "", name = fields.size() > 3 ? fields[3] : "";
      const std::string value = json_number(best_cpu[i][r].item<double>());
      out << "  " << (r + 1) << ". " << source << (name.empty() ? "" : " (" + name + ")") << " " << measure << " "
          << value << "\n";
      csv += csv_row({query, std::to_string(r + 1), std::to_string(item), source, label, name, value});
      const std::string uri = picture(source, item);
      html += "<figure><img src=\"" + uri + "\" alt=\"" + xml_escape(source) + "\"><figcaption>" +
              std::to_string(r + 1) + ". " + xml_escape(name.empty() ? source : name) + "<br>" + value +
              "</figcaption></figure>\n";
    }
    html += "</section>\n";
  }
  html += "</body></html>\n";
  fs::create_directories(request.output_dir);
  write_file_atomic(request.output_dir + "/search.csv", csv);
  write_file_atomic(request.output_dir + "/search.html", html);
}

}  // namespace trainyard::host
