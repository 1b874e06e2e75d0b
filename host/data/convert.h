#pragma once
// `trainyard convert`: packs images and labels into an LMDB of trainyard
// records (docs/lmdb-format.md), or into tar shards in the WebDataset
// convention (docs/data.md).
#include <cstdint>
#include <string>
#include <vector>

namespace trainyard::host {

struct ConvertOptions {
  std::string from;                  ///< folder | csv | idx | parallel
  std::vector<std::string> inputs;   ///< folder: one root; csv: one file; parallel: input folders
  std::vector<std::string> targets;  ///< parallel: target folders
  std::string images, labels;        ///< idx files
  std::string output;
  std::string to = "lmdb";         ///< lmdb | webdataset
  int64_t shard_size = 1000;       ///< webdataset: samples per shard
  std::string encoding = "png";    ///< png | jpeg | raw
  int quality = 95;                ///< JPEG quality
  int resize_h = 0, resize_w = 0;  ///< resize on the way in; 0: keep
  bool shuffle = false;
  uint64_t seed = 0;
  double test_fraction = 0;  ///< > 0: OUTPUT/train and OUTPUT/test
  int64_t limit = 0;         ///< convert only the first N samples
  bool overwrite = false;
  bool progress = true;
};

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
