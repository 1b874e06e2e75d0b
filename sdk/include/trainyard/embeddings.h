#pragma once
/// Embeddings: one vector per sample (metric learning, retrieval).
///
/// Example:
///   at::Tensor e = trainyard::l2_normalize_rows(head(features));  // [batch, size], unit rows

#include <ATen/core/Tensor.h>

namespace trainyard {

/// Each row divided by its L2 norm (a zero row stays zero; norms are clamped
/// at 1e-12, as torch.nn.functional.normalize does): embeddings on the unit
/// sphere, as the built-in networks' `normalize: true` gives them. Since SDK 1.4.
at::Tensor l2_normalize_rows(const at::Tensor& rows);

}  // namespace trainyard
