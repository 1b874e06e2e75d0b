// Components from an outside team, built against the installed SDK only:
//  - scaled_linear (network): a linear classifier whose logits are scaled by
//    an option and shifted by per-class biases read from a file (a path
//    option, so relative to the experiment file), and which reads a
//    free-form key from `extra:`; its options are a struct bound by a
//    TypedSchema;
//  - margin (meter): the mean gap between the top two logits, and as a
//    structured result a table of that gap per true class;
//  - test_watch (callback): after each epoch, reads the test meters and logs
//    whether this epoch's test computed them or they are left over.
#include <ATen/ATen.h>
#include <torch/nn/modules/linear.h>
#include <trainyard/error.h>

#include <trainyard/callback.h>
#include <trainyard/meter.h>
#include <trainyard/network.h>
#include <trainyard/plugin.h>
#include <fstream>

namespace {

struct ScaledLinearOptions {
  double scale = 1;
  std::string bias_file;  // absolute, or empty for no bias
};

// One number per class, whitespace separated.
std::vector<double> read_biases(const std::string& file, int64_t classes) {
  std::ifstream in(file);
  if (!in) throw trainyard::ConfigError("cannot open bias_file '" + file + "'", "a readable text file", "");
  std::vector<double> biases;
  for (double b; in >> b;) biases.push_back(b);
  if (static_cast<int64_t>(biases.size()) != classes)
    throw trainyard::ConfigError("bias_file '" + file + "' holds " + std::to_string(biases.size()) + " numbers",
                                 "one number per class (" + std::to_string(classes) + ")", "");
  return biases;
}

class ScaledLinear : public trainyard::Network {
 public:
  ScaledLinear(const ScaledLinearOptions& o, const trainyard::Context& c)
      : fc_(register_module("fc", torch::nn::Linear(c.dataset.sample_numel(), c.dataset.num_classes))),
        scale_(o.scale * c.extra.get_number("scaled_linear.boost", 1.0)) {
    if (!o.bias_file.empty())
      bias_ = register_buffer("bias", at::tensor(read_biases(o.bias_file, c.dataset.num_classes), at::kFloat));
  }
  at::Tensor forward(const trainyard::Batch& b) override {
    at::Tensor logits = fc_(b.input.flatten(1)) * scale_;
    return bias_.defined() ? logits + bias_ : logits;
  }

 private:
  torch::nn::Linear fc_;
  double scale_;
  at::Tensor bias_;
};

// Accumulators: per class, the summed margin and the sample count.
class Margin : public trainyard::Meter {
 public:
  explicit Margin(int64_t classes) : sums_(static_cast<size_t>(2 * classes), 0.0) {}
  void reset() override { std::fill(sums_.begin(), sums_.end(), 0.0); }
  void update(const trainyard::MeterInput& in) override {
    at::Tensor top2 = std::get<0>(in.output.topk(2, 1));
    at::Tensor gap = (top2.select(1, 0) - top2.select(1, 1)).to(at::kDouble).cpu();
    at::Tensor target = in.batch.target.to(at::kLong).cpu();
    const int64_t classes = static_cast<int64_t>(sums_.size() / 2);
    auto g = gap.accessor<double, 1>();
    auto t = target.accessor<int64_t, 1>();
    for (int64_t i = 0; i < gap.size(0); ++i) {
      const size_t c = static_cast<size_t>(std::clamp<int64_t>(t[i], 0, classes - 1));
      sums_[2 * c] += g[i];
      sums_[2 * c + 1] += 1;
    }
  }
  std::vector<double> accumulators() const override { return sums_; }
  void set_accumulators(const std::vector<double>& a) override { sums_ = a; }
  std::map<std::string, double> values() const override {
    double total = 0, count = 0;
    for (size_t c = 0; c < sums_.size(); c += 2) total += sums_[c], count += sums_[c + 1];
    if (count == 0) return {};
    return {{"margin", total / count}};
  }
  std::vector<trainyard::MeterResult> results() const override {
    trainyard::MeterResult r;
    r.name = "margin_per_class";
    r.columns = {"class", "samples", "mean_margin"};
    for (size_t c = 0; c < sums_.size(); c += 2)
      r.rows.push_back({std::to_string(c / 2), std::to_string(static_cast<int64_t>(sums_[c + 1])),
                        std::to_string(sums_[c + 1] > 0 ? sums_[c] / sums_[c + 1] : 0.0)});
    return {r};
  }

 private:
  std::vector<double> sums_;
};

class TestWatch : public trainyard::Callback {
 public:
  void after_epoch(trainyard::Loop& loop) override {
    const auto& readings = loop.meter_readings();
    auto it = readings.find("test_margin");
    if (it == readings.end()) return;
    const bool fresh = it->second.iteration == loop.iteration();
    loop.context().log("test_watch: epoch " + std::to_string(loop.epoch()) + " test_margin " +
                       (fresh ? "fresh" : "left over from epoch " + std::to_string(it->second.epoch)));
  }
};

void register_components(trainyard::Registrar& r) {
  trainyard::TypedSchema<ScaledLinearOptions> schema;
  schema.add("scale", &ScaledLinearOptions::scale, 1.0, "multiplies the logits").min(0.0);
  schema.add_path("bias_file", &ScaledLinearOptions::bias_file, "",
                  "text file of one logit bias per class; relative to the experiment file");
  r.add_network("scaled_linear", "a linear classifier with scaled logits", schema.schema(),
                [schema](const trainyard::Options& o, const trainyard::Context& c) {
                  return std::make_shared<ScaledLinear>(schema.bind(o), c);
                });
  r.add_meter("margin", "mean gap between the top two logits (results: margin_per_class)", trainyard::Schema(),
              [](const trainyard::Options&, const trainyard::Context& c) {
                return std::make_shared<Margin>(std::max<int64_t>(c.dataset.num_classes, 2));
              });
  r.add_callback("test_watch", "logs whether the test meters are fresh after each epoch", trainyard::Schema(),
                 [](const trainyard::Options&, const trainyard::Context&) { return std::make_shared<TestWatch>(); });
}

}  // namespace

TRAINYARD_PLUGIN("scaled_linear", "2.1.0", "an out-of-tree example network, meter and callback", register_components)
