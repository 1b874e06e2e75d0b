// segmentation_losses: losses on dense class logits against masks of class ids.
#include <trainyard/plugin.h>

#include "dice.h"

namespace {

void register_components(trainyard::Registrar& r) {
  r.add_loss("dice",
             "1 - soft Dice of softmax([B, C, H, W]) against one-hot [B, H, W] class ids, per class over the batch, "
             "mean over classes; ignore_index",
             segmentation_losses::dice_schema(), segmentation_losses::make_dice);
}

}  // namespace

TRAINYARD_PLUGIN("segmentation_losses", "1.0.0", "losses for segmentation masks", register_components)
