#include "train/complexity.h"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <map>
#include <set>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>
#include "train/generator_states.h"

#include "data/loader.h"
#include "train/guard.h"
#include "train/loader_settings.h"
#include "util/shape.h"

namespace trainyard::host {
namespace {

std::string owner_module(const std::string& parameter) {
  const auto dot = parameter.rfind('.');
  return dot == std::string::npos ? "" : parameter.substr(0, dot);
}

bool inside(const std::string& module, const std::string& path) {
  return module.empty() || path == module || path.rfind(module + ".", 0) == 0;
}

struct GraphFacts {
  std::map<std::string, int64_t> flops;       ///< by the module owning the weight
  std::map<std::string, at::Tensor> outputs;  ///< a zero tensor of each weighted module's output
};

// Walks the autograd graph from the output. A node that takes a parameter
// (through at most one view or transpose of it, Linear's weight.t()) computed
// the owning module's output, whose shape is the node's input metadata.
GraphFacts read_graph(Network& net, const at::Tensor& output) {
  std::map<const torch::autograd::Node*, std::pair<std::string, at::Tensor>> owner;
  for (const auto& p : net.named_parameters())
    if (p.value().requires_grad())
      if (auto acc = torch::autograd::impl::try_get_grad_accumulator(p.value()))
        owner[acc.get()] = {p.key(), p.value()};
  auto parameter_behind = [&](const torch::autograd::Node* n) -> const std::pair<std::string, at::Tensor>* {
    if (auto it = owner.find(n); it != owner.end()) return &it->second;
    if (n && n->next_edges().size() == 1 && n->next_edges()[0].function)
      if (auto it = owner.find(n->next_edges()[0].function.get()); it != owner.end()) return &it->second;
    return nullptr;
  };
  GraphFacts facts;
  std::set<const torch::autograd::Node*> seen;
  std::deque<torch::autograd::Node*> todo;
  if (output.grad_fn()) todo.push_back(output.grad_fn().get());
  while (!todo.empty()) {
    torch::autograd::Node* n = todo.front();
    todo.pop_front();
    if (!seen.insert(n).second) continue;
    // A view or transpose of a parameter (one edge, to its accumulator): its consumer counts, not it.
    const bool parameter_view =
        n->next_edges().size() == 1 && n->next_edges()[0].function && owner.count(n->next_edges()[0].function.get());
    const std::pair<std::string, at::Tensor>* weight = nullptr;
    std::string module;
    for (const auto& edge : n->next_edges()) {
      if (!edge.function) continue;
      if (const auto* p = parameter_behind(edge.function.get())) {
        module = owner_module(p->first);
        if (p->second.dim() >= 2) weight = p;
      }
      todo.push_back(edge.function.get());
    }
    if (module.empty() || parameter_view || n->num_inputs() == 0) continue;
    const at::Tensor out = n->input_metadata(0).zeros_like();
    if (!facts.outputs.count(module)) facts.outputs[module] = out;
    // 2 x multiply-adds: each output value sums (weight values per output channel) products.
    if (weight) facts.flops[module] += 2 * out.numel() * (weight->second.numel() / weight->second.size(0));
  }
  return facts;
}

std::string fixed(double v, const char* unit) {
  char text[32];
  std::snprintf(text, sizeof text, v >= 100 ? "%.0f %s" : v >= 10 ? "%.1f %s" : "%.2f %s", v, unit);
  return text;
}

}  // namespace

std::string human_flops(int64_t flops) {
  const double f = static_cast<double>(flops);
  if (f >= 1e9) return fixed(f / 1e9, "GFLOPs");
  if (f >= 1e6) return fixed(f / 1e6, "MFLOPs");
  if (f >= 1e3) return fixed(f / 1e3, "kFLOPs");
  return std::to_string(flops) + " FLOPs";
}

std::string human_bytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1e6) return fixed(b / 1e6, "MB");
  if (b >= 1e3) return fixed(b / 1e3, "kB");
  return std::to_string(bytes) + " B";
}

std::string short_type(const std::string& type) {
  std::string t = type;
  if (const auto colons = t.rfind("::"); colons != std::string::npos) t = t.substr(colons + 2);
  if (t.size() > 4 && t.compare(t.size() - 4, 4, "Impl") == 0) t.resize(t.size() - 4);
  return t;
}

NetworkCost network_cost(const LoopConfig& loop, uint64_t seed, const Components& c, const Context& context) {
  Network& net = *c.network.object;
  // Nothing here may draw random numbers a resumed run would not draw (put
  // back also when the forward fails: the cost never changes the run).
  const GeneratorStates put_back;
  // The first training sample, prepared as training prepares it.
  auto stats = std::make_shared<LoaderStats>();
  BatchStream one = guarded(*c.train_data.config, "get_batch", [&] {
    return batch_stream(*c.train_data.object, {0}, 0, 0,
                        make_loader_options(loop, seed, *c.network.config, c.train_data, 1, context), stats);
  });
  std::optional<Batch> sample = guarded(*c.train_data.config, "get_batch", one);
  if (!sample) throw Error("network cost: the training set gives no sample");
  const bool training = net.is_training();
  net.eval();
  // Frozen parameters too leave a trace in the graph: every parameter asks for a gradient meanwhile.
  std::vector<std::pair<at::Tensor, bool>> asked;
  for (auto& p : net.parameters()) asked.emplace_back(p, p.requires_grad()), p.requires_grad_(true);
  at::Tensor output;
  GraphFacts facts;
  try {
    at::AutoGradMode grad(true);
    output = guarded(*c.network.config, "forward", [&] { return net.forward(*sample); });
    facts = read_graph(net, output);
    output = output.detach();
  } catch (...) {
    for (auto& [p, flag] : asked) p.requires_grad_(flag);
    throw;
  }
  for (auto& [p, flag] : asked) p.requires_grad_(flag);
  if (training) net.train();
  for (auto& m : c.frozen) m->eval();

  NetworkCost cost;
  for (const auto& m : net.named_modules()) {
    ModuleCost row;
    row.name = m.key();
    row.type = short_type(m.value()->name());
    row.depth = m.key().empty() ? 0 : static_cast<int>(std::count(m.key().begin(), m.key().end(), '.')) + 1;
    for (const auto& p : m.value()->parameters()) row.parameters += p.numel();
    for (const auto& [module, flops] : facts.flops)
      if (inside(row.name, module)) row.flops += flops;
    const at::Tensor* out = row.name.empty() ? &output : nullptr;
    if (auto it = facts.outputs.find(row.name); it != facts.outputs.end()) out = &it->second;
    if (out && out->dim() >= 1) {
      row.output_sizes = out->sizes().slice(1).vec();
      row.output_bytes = out->numel() / std::max<int64_t>(1, out->size(0)) * static_cast<int64_t>(sizeof(float));
    }
    cost.modules.push_back(row);
  }
  cost.flops = cost.modules.front().flops;
  // Leaves among the modules whose outputs the graph shows.
  for (const auto& shown : facts.outputs) {
    // Not a structured binding: clang 14 (scripts/fuzz.sh) cannot capture one in a lambda.
    const std::string& module = shown.first;
    const at::Tensor& out = shown.second;
    const bool has_shown_child = std::any_of(facts.outputs.begin(), facts.outputs.end(), [&](const auto& other) {
      return other.first != module && inside(module, other.first);
    });
    if (!has_shown_child) cost.activation_bytes += out.numel() / std::max<int64_t>(1, out.size(0)) * 4;
  }
  return cost;
}

std::string cost_table(const NetworkCost& cost, int max_depth) {
  std::vector<std::vector<std::string>> rows = {{"module", "params", "FLOPs", "output", "bytes"}};
  for (const auto& m : cost.modules) {
    if (m.depth > max_depth) continue;
    const std::string name =
        std::string(2 * static_cast<size_t>(m.depth), ' ') + (m.name.empty() ? "(network)" : m.name) + " " + m.type;
    rows.push_back({name, std::to_string(m.parameters), m.flops ? human_flops(m.flops) : "-",
                    m.output_sizes ? shape_text(*m.output_sizes) : "",
                    m.output_bytes >= 0 ? human_bytes(m.output_bytes) : ""});
  }
  std::vector<size_t> width(5, 0);
  for (const auto& r : rows)
    for (size_t k = 0; k < r.size(); ++k) width[k] = std::max(width[k], r[k].size());
  std::string out;
  for (const auto& r : rows) {
    std::string line = "  " + r[0] + std::string(width[0] - r[0].size(), ' ');
    for (size_t k = 1; k < r.size(); ++k) {
      const std::string& cell = r[k];
      line += "  " + (k == 3 ? cell + std::string(width[k] - cell.size(), ' ')
                             : std::string(width[k] - cell.size(), ' ') + cell);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  out += "  total: " + human_flops(cost.flops) + " forward per sample (" + std::to_string(cost.flops) + ")\n" +
         "  activations of the weighted layers: " + human_bytes(cost.activation_bytes) + " per sample (fp32)\n";
  return out;
}

std::optional<NetworkCost> try_network_cost(const LoopConfig& loop, uint64_t seed, const Components& components,
                                            const Context& context, std::string& why) {
  try {
    return network_cost(loop, seed, components, context);
  } catch (const std::exception& err) {
    why = err.what();
    return std::nullopt;
  }
}

}  // namespace trainyard::host
