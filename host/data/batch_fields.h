#pragma once
// The fields of a batch (SDK 1.5, trainyard/fields.h) on their way from the
// dataset to the loss and meters: checked as the batch is made, and kept
// beside the batch once it is handed out. Batch itself cannot hold them: its
// layout is the one plugins of SDK 1.0-1.4 construct.
#include <cstdint>
#include <optional>
#include <string>

#include "trainyard/batch.h"
#include "trainyard/context.h"
#include "trainyard/fields.h"

namespace trainyard::host {

/// The fields of the batch a loader handed out last. A consumer asks with
/// the batch it was given: a batch whose input is the same tensor (the batch
/// itself, or a copy of it: StepResult's) has them; any other batch (one an
/// additional_override made) has none.
///
///   auto beside = std::make_shared<FieldsBeside>();  // LoaderOptions::fields_beside
///   std::optional<Batch> b = stream();
///   const Fields& f = beside->of(*b);
class FieldsBeside {
 public:
  void hand_out(const Batch& batch, Fields fields);
  const Fields& of(const Batch& batch) const;

 private:
  at::Tensor input_;  ///< held, so that its TensorImpl is not reused while the fields are kept
  Fields fields_;
};

/// What is wrong with a batch's fields: the position of the sample at fault
/// in the batch (-1: the batch as a whole) and a sentence naming the field.
struct FieldProblem {
  int64_t position = -1;
  std::string what;
};

/// The first problem of a collated batch's fields: each kind's shape rules
/// (one row, or one count, per sample; counts that add up to a ragged field's
/// rows), then the well-known fields' contents (field_name: finite boxes with
/// x1 < x2 and y1 < y2 inside the input's height and width, box labels from
/// 0 to info.num_classes - 1 with the boxes' counts, ...). `input` is the
/// batch's input (its last two dimensions are the image's height and width).
std::optional<FieldProblem> first_field_problem(const Fields& fields, const at::Tensor& input, int64_t rows,
                                                const DatasetInfo& info);

}  // namespace trainyard::host
