#pragma once
// `trainyard convert`: packs images and labels into an LMDB of trainyard
// records (docs/lmdb-format.md), or into tar shards in the WebDataset
// convention (docs/data.md).
#include <cstdint>
#include <string>
#include <vector>

#include "data/convert_options.h"

namespace trainyard::host {

struct ConvertResult {
  int64_t written = 0;
  std::vector<std::string> databases;  ///< LMDB folders, or shard patterns (OUT/shard-{000000..000009}.tar)
  double seconds = 0;
};

/// Reads the source, writes under a temporary name, then renames into place:
/// never a half-written database under the final name. Throws ConfigError
/// for bad sources or an existing output without `overwrite`.
ConvertResult convert(const ConvertOptions& options);

}  // namespace trainyard::host
