#pragma once
// Keys that moved to another section. An experiment file written with the
// old name still runs (with one deprecation line naming the file and line),
// and a config recorded with it (a run's config.yaml, a checkpoint's
// manifest) still resumes: both are read as if written with the new name.
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainyard::host {

struct RenamedKey {
  std::string before;  ///< "loop.checkpoint_every_iters"
  std::string now;     ///< "checkpoint.every_iters"
};

/// Every renamed key, section.option before and now.
const std::vector<RenamedKey>& renamed_keys();

/// "loop.checkpoint_every_iters" as {"loop", "checkpoint_every_iters"}.
std::pair<std::string, std::string> section_and_option(const std::string& dotted);

/// `config` (a resolved config, or one stage of `stages:`) with each old
/// key moved to its new place, in the root and in every stages[i]; a key
/// given under both names keeps the new one's value.
nlohmann::ordered_json with_current_keys(nlohmann::ordered_json config);

}  // namespace trainyard::host
