#include "run/inspect.h"

#include <sstream>

#include <torch/utils.h>

#include "run/session.h"
#include "train/dry_run.h"
#include "util/json.h"
#include "util/text.h"

namespace trainyard::host {

std::string dry_run(const Experiment& e) {
  Context context = make_context(e);
  torch::manual_seed(e.seed);
  Components built = build_components(e, context);
  return dry_run_report(e, built, context) + describe_groups(built, e, "");
}

std::string describe_groups(const Components& built, const Experiment& e, const std::string& indent) {
  std::ostringstream out;
  out << indent << "parameter groups:\n";
  for (const auto& g : built.groups)
    out << indent << "  " << g.name << ": " << g.parameters.size() << " tensors, " << g.numel << " values, lr "
        << json_number(g.lr) << ", weight decay " << g.weight_decay << "\n" << indent << "    "
        << join(g.parameters) << "\n";
  if (!built.frozen.empty()) out << indent << "frozen: " << join(e.network.freeze) << "\n";
  return out.str();
}

}  // namespace trainyard::host
