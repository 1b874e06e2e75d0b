#pragma once
/// The last layer the built-in networks (mlp, convnet, resnet) share: one
/// score per class, or an N-dimensional embedding for a metric-learning loss,
/// optionally L2-normalized. A network's options struct derives from
/// EmbeddingHead, whose add_options() declares its two options
/// (`embedding_size`, `normalize`); the network sizes its last layer with
/// outputs(), passes that layer's rows through apply() and answers
/// NetworkOutputs with kind(). Header-only.
///
/// Example:
///   struct NetOptions : trainyard::EmbeddingHead { double dropout = 0; };
///   t.add("dropout", &NetOptions::dropout, 0.0, "...");  trainyard::EmbeddingHead::add_options(t);
///   fc_ = register_module("fc", torch::nn::Linear(in, head_.outputs(context.dataset.num_classes)));
///   at::Tensor forward(const trainyard::Batch& b) override { return head_.apply(fc_(features(b))); }
///   trainyard::OutputKind output_kind() const override { return head_.kind(); }
#include <cstdint>

#include <ATen/core/Tensor.h>

#include "trainyard/embeddings.h"
#include "trainyard/network.h"
#include "trainyard/options.h"

namespace trainyard {

struct EmbeddingHead {
  int64_t embedding_size = 0;  ///< 0: one score per class; N: an N-dimensional embedding
  bool normalize = false;      ///< each output row divided by its L2 norm

  /// Declares `embedding_size` and `normalize` in the schema of an options
  /// struct O that derives from EmbeddingHead.
  template <class O>
  static void add_options(TypedSchema<O>& t) {
    t.add("embedding_size", static_cast<int64_t O::*>(&EmbeddingHead::embedding_size), 0,
          "outputs of the last layer: 0 gives one score per class; N gives an N-dimensional embedding (for a "
          "metric-learning loss)")
        .min(0);
    t.add("normalize", static_cast<bool O::*>(&EmbeddingHead::normalize), false,
          "L2-normalize the outputs (embeddings on the unit sphere)");
  }
  /// The last layer's outputs: embedding_size, or one per class.
  int64_t outputs(int64_t num_classes) const { return embedding_size > 0 ? embedding_size : num_classes; }
  /// The network's output from the last layer's: normalized when asked.
  at::Tensor apply(const at::Tensor& rows) const { return normalize ? l2_normalize_rows(rows) : rows; }
  /// What the rows are (NetworkOutputs::output_kind).
  OutputKind kind() const { return embedding_size > 0 ? OutputKind::embeddings : OutputKind::class_scores; }
};

}  // namespace trainyard
