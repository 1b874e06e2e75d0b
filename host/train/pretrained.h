#pragma once
// `pretrained:` import: a network initialized by name from another file.
#include <string>
#include <utility>
#include <vector>

namespace trainyard {
class Network;
}

namespace trainyard::host {

/// What `pretrained:` loading matched.
struct PretrainedReport {
  std::vector<std::string> loaded, missing, unexpected;
};

/// Initializes the network's parameters and buffers by name from a trainyard
/// checkpoint, a torch::save'd module, or a PyTorch state_dict saved from
/// Python (torch.save(model.state_dict(), F)), whose key prefixes `rename`
/// replaces first (longest first). Throws ConfigError naming every
/// parameter whose shape differs, or when nothing matches.
PretrainedReport load_pretrained(const std::string& path, Network& network,
                                 const std::vector<std::pair<std::string, std::string>>& rename = {});

}  // namespace trainyard::host
