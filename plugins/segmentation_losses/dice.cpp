// dice: 1 - the soft Dice coefficient between the softmax of dense logits
// [B, C, H, W] and the one-hot of class ids [B, H, W], per class over the
// whole batch, averaged over the classes (the multiclass Dice loss of
// segmentation_models_pytorch: a class absent from the batch's targets adds
// 0, pixels of ignore_index add nothing). It rewards overlap rather than
// per-pixel accuracy, so small structures count as much as the background;
// it is often summed with cross_entropy.
#include "dice.h"

#include <stdexcept>
#include <string>

#include <ATen/ATen.h>

namespace segmentation_losses {
namespace {

struct DiceOptions {
  int64_t ignore_index = -100;
  double smooth = 0.0;
};

const trainyard::TypedSchema<DiceOptions>& typed_schema() {
  static const trainyard::TypedSchema<DiceOptions> s = [] {
    trainyard::TypedSchema<DiceOptions> t;
    t.add("ignore_index", &DiceOptions::ignore_index, int64_t{-100},
          "targets of this value add nothing (a mask's void label, e.g. 255)");
    t.add("smooth", &DiceOptions::smooth, 0.0,
          "added to the overlap and to the sizes: (2 overlap + smooth) / (sizes + smooth)")
        .min(0.0);
    return t;
  }();
  return s;
}

std::string shape(const at::Tensor& t) {
  std::string s = "[";
  for (int64_t d = 0; d < t.dim(); ++d) s += (d ? ", " : "") + std::to_string(t.size(d));
  return s + "]";
}

class Dice : public trainyard::Loss {
 public:
  explicit Dice(const DiceOptions& o) : o_(o) {}
  at::Tensor compute(const at::Tensor& output, const trainyard::Batch& batch) override {
    const at::Tensor& target = batch.target;
    bool fits = output.dim() == target.dim() + 1 && output.dim() >= 2;
    for (int64_t d = 0; fits && d < target.dim(); ++d) fits = target.size(d) == output.size(d == 0 ? 0 : d + 1);
    if (!fits)
      throw std::invalid_argument("expected an output [B, C, ...] whose other sizes are the target's; got output " +
                                  shape(output) + " and target " + shape(target));
    const int64_t b = output.size(0), c = output.size(1);
    const at::Tensor probabilities = output.softmax(1).reshape({b, c, -1});
    const at::Tensor ids = target.reshape({b, -1}).to(at::kLong);
    const at::Tensor kept = ids.ne(o_.ignore_index).unsqueeze(1).to(probabilities.scalar_type());  // [B, 1, N]
    // One-hot of the kept ids ([B, C, N]): an ignored pixel is all zeros.
    const at::Tensor truth = at::one_hot(ids.masked_fill(ids.eq(o_.ignore_index), 0).clamp(0, c - 1), c)
                                 .permute({0, 2, 1})
                                 .to(kept.scalar_type()) *
                             kept;
    const at::Tensor predicted = probabilities * kept;
    const std::vector<int64_t> over{0, 2};  // the batch and the pixels: one score per class
    const at::Tensor overlap = (predicted * truth).sum(over);
    const at::Tensor sizes = predicted.sum(over) + truth.sum(over);
    const at::Tensor score = (2 * overlap + o_.smooth) / (sizes + o_.smooth).clamp_min(1e-7);
    const at::Tensor present = truth.sum(over).gt(0).to(score.scalar_type());
    return ((1 - score) * present).mean();
  }

 private:
  DiceOptions o_;
};

}  // namespace

trainyard::Schema dice_schema() { return typed_schema().schema(); }

std::shared_ptr<trainyard::Loss> make_dice(const trainyard::Options& options, const trainyard::Context&) {
  return std::make_shared<Dice>(typed_schema().bind(options));
}

}  // namespace segmentation_losses
