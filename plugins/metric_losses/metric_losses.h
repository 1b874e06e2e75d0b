#pragma once
// Metric-learning losses over a batch of embeddings and their class labels,
// with the triplets or pairs mined online from the batch itself (docs/
// experiment-yaml.md, "Metric learning"). Defined as pytorch-metric-learning
// 2.9 defines them, and checked against it in the test suite
// (tests/plugins/metric_losses_test.cpp).
#include <memory>
#include <string>

#include <ATen/core/Tensor.h>
#include <trainyard/context.h>
#include <trainyard/loss.h>
#include <trainyard/options.h>

namespace metric_losses {

trainyard::Schema triplet_margin_schema();
std::shared_ptr<trainyard::Loss> make_triplet_margin(const trainyard::Options& options);

trainyard::Schema contrastive_schema();
std::shared_ptr<trainyard::Loss> make_contrastive(const trainyard::Options& options);

trainyard::Schema arcface_schema();
std::shared_ptr<trainyard::Loss> make_arcface(const trainyard::Options& options, const trainyard::Context& context);

/// Pairwise comparison of the rows of `x`: euclidean distances (after L2
/// normalization when `normalize`), or cosine similarities.
at::Tensor pairwise(const at::Tensor& x, const std::string& distance, bool normalize);

}  // namespace metric_losses
