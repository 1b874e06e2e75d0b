#pragma once
/// The run's resolved experiment, for loggers that record hyper-parameters
/// (TensorBoard's HPARAMS tab, MLflow's params).
///
/// `trainyard run` writes RUN_DIR/config.json (every option with its
/// default filled in, absolute paths) before any callback's before_run.
/// This reads it back flattened to dotted keys:
///   {"optimizer.lr": 0.05, "network.plugin": "mlp", "network.hidden_sizes": "[256,128]", ...}
/// Numbers, text and flags keep their type; lists and null become their
/// JSON text; `plugin_dirs` is left out (paths of this machine).
///
/// Example:
///   for (const auto& [key, value] : trainyard::run_config_values(context.run_dir)) ...
#include <map>
#include <string>
#include <variant>

namespace trainyard {

using ConfigValue = std::variant<double, std::string, bool>;

/// Empty when RUN_DIR/config.json does not exist or is not a JSON object.
std::map<std::string, ConfigValue> run_config_values(const std::string& run_dir);
/// A value as text: numbers as the shortest text that reads back equal.
std::string config_value_text(const ConfigValue& value);

}  // namespace trainyard
