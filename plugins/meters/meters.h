#pragma once
#include <memory>
#include <string>

#include <trainyard/context.h>
#include <trainyard/meter.h>
#include <trainyard/options.h>

namespace meters {

/// Numbers in result tables: integers as such, others with 6 significant digits.
std::string cell(double x);

trainyard::Schema loss_schema();
std::shared_ptr<trainyard::Meter> make_loss(const trainyard::Options& options);
trainyard::Schema topk_schema();
std::shared_ptr<trainyard::Meter> make_topk(const trainyard::Options& options, const trainyard::Context& context);
trainyard::Schema confusion_schema();
std::shared_ptr<trainyard::Meter> make_confusion(const trainyard::Options& options, const trainyard::Context& context);
trainyard::Schema miou_schema();
std::shared_ptr<trainyard::Meter> make_miou(const trainyard::Options& options, const trainyard::Context& context);
trainyard::Schema coco_map_schema();
std::shared_ptr<trainyard::Meter> make_coco_map(const trainyard::Options& options, const trainyard::Context& context);

}  // namespace meters
