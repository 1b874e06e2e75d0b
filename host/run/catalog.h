#pragma once
// Visual search: `trainyard embed` writes a catalog of embeddings (a test
// split, an LMDB or a folder of images through a trained embedding network)
// and `trainyard search` finds a query image's nearest catalog items. The
// catalog's format is in docs/workflow.md ("Embed and search"). The two
// modes are Runner's (run/runner.h: embed, search), their bodies in
// run/catalog.cpp; here what they ask and what a catalog says.
#include <cstdint>
#include <string>
#include <vector>

namespace trainyard::host {

/// What `trainyard embed` reads and writes (Runner::embed).
struct EmbedRequest {
  std::string checkpoint;
  std::string input;          ///< an LMDB or a folder of images; "" embeds the experiment's test split (else train)
  std::string input_options;  ///< YAML flow map over the preprocessing ("" for none)
  std::string output;         ///< the catalog folder; must not exist yet
  /// How the experiment was loaded, recorded so that search builds the same network.
  std::string experiment_file;
  std::vector<std::string> sets, plugin_dirs;
};

/// What catalog.json says (checked against the arrays beside it when read).
struct CatalogInfo {
  std::string dir;
  std::string experiment_file, checkpoint, source, input, input_options;
  std::vector<std::string> sets, plugin_dirs;
  int64_t items = 0, embedding_size = 0;
};

/// Throws ConfigError naming the file when the folder is not a complete catalog.
CatalogInfo read_catalog_info(const std::string& dir);

/// What `trainyard search` looks up (Runner::search).
struct SearchRequest {
  std::vector<std::string> queries;  ///< image files
  int64_t top_k = 10;
  std::string distance = "euclidean";  ///< euclidean (smaller is nearer) or cosine (larger is nearer)
  std::string checkpoint;              ///< the catalog's unless given
  std::string output_dir;              ///< search.csv and search.html go here
};

}  // namespace trainyard::host
