#pragma once
// Retrieval metrics over a set of embeddings with class labels, each sample
// querying all the others (leave-one-out), as pytorch-metric-learning's
// AccuracyCalculator computes them with the reference set equal to the
// query set (docs/experiment-yaml.md, "Retrieval"; checked against that
// library in tests/plugins/retrieval_test.cpp).
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <trainyard/context.h>
#include <trainyard/meter.h>
#include <trainyard/options.h>

namespace retrieval {

struct Settings {
  std::vector<int64_t> k{1, 5};
  std::string distance = "euclidean";         ///< euclidean (smaller is nearer) or cosine (larger is nearer)
  bool normalize = true;                      ///< L2-normalize before euclidean distances
  int64_t chunk_elements = int64_t{1} << 22;  ///< queries per chunk x samples (chunk_mb 64: 16 bytes each)
};

/// recall_at_K per k, precision_at_1, r_precision, map_at_r over `embeddings`
/// [N, D] and `labels` [N] (integers). A query whose class has no other
/// sample is left out (it cannot be answered); with none left, no values.
/// Queries are taken in chunks of chunk_elements / N rows: memory for the
/// distances, neighbour lists and ranks stays near 16 x chunk_elements bytes
/// whatever N.
std::map<std::string, double> metrics(const at::Tensor& embeddings, const at::Tensor& labels, const Settings& s);

trainyard::Schema schema();
std::shared_ptr<trainyard::Meter> make(const trainyard::Options& options, const trainyard::Context& context);

}  // namespace retrieval
