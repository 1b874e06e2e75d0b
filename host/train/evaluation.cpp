#include "train/evaluation.h"

#include <algorithm>

#include <ATen/ATen.h>

#include "distributed/communicator.h"
#include "train/detections.h"
#include "train/guard.h"
#include "train/loader_settings.h"
#include "train/meter_results.h"
#include "train/output_fit.h"
#include "train/precision.h"

namespace trainyard::host {

MeterValues meter_values_over_ranks(const std::vector<Built<Meter>>& meters, const std::string& prefix,
                                    Communicator* comm) {
  MeterValues out;
  for (const auto& m : meters) {
    // The summed accumulators (and gathered rows) give the exact value over all shards.
    std::map<std::string, double> values;
    with_all_ranks_state(m, comm, [&] { values = guarded(*m.config, "values", [&] { return m.object->values(); }); });
    for (const auto& [k, v] : values) out[prefix + k] = v;
  }
  return out;
}

TestPassSettings test_pass_settings(const LoopConfig& loop, std::string where,
                                    std::function<LoaderOptions(int64_t batch_size)> loader) {
  TestPassSettings s;
  s.samples = loop.test_samples;
  s.batch_size = loop.test_batch_per_device > 0 ? loop.test_batch_per_device : loop.batch_per_device;
  s.loader = std::move(loader);
  s.where = std::move(where);
  return s;
}

Evaluator::Evaluator(const Components& components, const Context& context, std::string precision,
                     TestPassSettings settings, Communicator* comm)
    : c_(components),
      context_(context),
      precision_(std::move(precision)),
      settings_(std::move(settings)),
      comm_(comm) {}

at::Tensor Evaluator::forward(const Batch& batch) const {
  return forward_in_precision(context_.device.type(), precision_, [&] {
    return guarded(*c_.network.config, "forward", [&] { return c_.network.object->forward(batch); });
  });
}

MeterValues Evaluator::test_pass(const std::function<void(int64_t done, int64_t total)>& after_batch) {
  if (!c_.test_data.object)
    throw LocatedConfigError(settings_.where + ": dataset.test: the experiment has no test dataset",
                             "expected dataset.test: {plugin: ...}", "");
  for (auto& m : c_.test_meters) guarded(*m.config, "reset", [&] { m.object->reset(); });
  stats_->reset();  // counted per test pass
  Network& net = *c_.network.object;
  if (comm_) comm_->broadcast_buffers(net);  // every rank tests the model rank 0 saves
  net.eval();
  {
    at::NoGradGuard no_grad;
    const int64_t size = c_.test_data.object->size();
    const int64_t count = settings_.samples > 0 ? std::min(settings_.samples, size) : size;
    std::vector<int64_t> order;  // this rank's share: every world_size-th sample
    for (int64_t i = context_.rank; i < count; i += context_.world_size) order.push_back(i);
    const int64_t batch_size = settings_.batch_size;
    // Test samples are decoded as in epoch 0: the same pass every time.
    const LoaderOptions options = settings_.loader(batch_size);
    const std::shared_ptr<FieldsBeside> fields = options.fields_beside;
    BatchStream batches = guarded(*c_.test_data.config, "get_batch", [&] {
      return batch_stream(*c_.test_data.object, std::move(order), 0, 0, options, stats_);
    });
    const int64_t total =
        ((count - context_.rank + context_.world_size - 1) / context_.world_size + batch_size - 1) / batch_size;
    for (int64_t done = 1;; ++done) {
      std::optional<Batch> batch = guarded(*c_.test_data.config, "get_batch", batches);
      if (!batch) break;
      at::Tensor output = forward(*batch);
      at::Tensor loss = checked_loss(c_, output, *batch, fields->of(*batch), "test");
      const Fields measured = fields_for_meters(c_, c_.test_meters, output, *batch, fields->of(*batch));
      for (auto& m : c_.test_meters) update_meter(m, {*batch, output, loss}, measured);
      if (after_batch) after_batch(done, total);
    }
  }
  net.train();
  MeterValues v = meter_values_over_ranks(c_.test_meters, "test_", comm_);
  if (c_.test_data.config->skip_bad_records) {
    v["test_bad_records"] = static_cast<double>(stats_->bad_records.load());
    report_bad_records(*c_.test_data.config, *stats_, "the test pass");
  }
  return v;
}

}  // namespace trainyard::host
