#include "config/renamed_keys.h"

namespace trainyard::host {

const std::vector<RenamedKey>& renamed_keys() {
  // One `checkpoint:` section (trainyard 0.x had these in three).
  static const std::vector<RenamedKey> keys = {
      {"loop.checkpoint_every_iters", "checkpoint.every_iters"},
      {"loop.checkpoint_every_secs", "checkpoint.every_secs"},
      {"output.keep_checkpoints", "checkpoint.keep"},
      {"stopping.keep_best", "checkpoint.keep_best"},
  };
  return keys;
}

std::pair<std::string, std::string> section_and_option(const std::string& dotted) {
  const size_t dot = dotted.find('.');
  return {dotted.substr(0, dot), dotted.substr(dot + 1)};
}

namespace {

void move_in(nlohmann::ordered_json& config) {
  if (!config.is_object()) return;
  for (const RenamedKey& k : renamed_keys()) {
    const auto [old_section, old_key] = section_and_option(k.before);
    const auto [new_section, new_key] = section_and_option(k.now);
    auto section = config.find(old_section);
    if (section == config.end() || !section->is_object() || !section->contains(old_key)) continue;
    nlohmann::ordered_json value = (*section)[old_key];
    section->erase(old_key);  // the section stays, even empty: as the file's YAML is moved (experiment.cpp)
    nlohmann::ordered_json& target = config[new_section];
    if (!target.is_object()) target = nlohmann::ordered_json::object();
    if (!target.contains(new_key)) target[new_key] = std::move(value);
  }
}
}  // namespace

nlohmann::ordered_json with_current_keys(nlohmann::ordered_json config) {
  move_in(config);
  if (auto stages = config.find("stages"); stages != config.end() && stages->is_array())
    for (auto& stage : *stages) move_in(stage);
  return config;
}

}  // namespace trainyard::host
