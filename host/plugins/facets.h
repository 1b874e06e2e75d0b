#pragma once
// What a built component offers beyond its kind's base interface, resolved
// once, when the host builds it: the only place after loading that asks
// which SDK functions a plugin has or casts to an optional SDK interface.
#include "plugins/registry.h"
#include "trainyard/callback.h"
#include "trainyard/dataset.h"
#include "trainyard/fields.h"
#include "trainyard/loss.h"
#include "trainyard/meter.h"
#include "trainyard/network.h"
#include "trainyard/optimizer.h"
#include "trainyard/override.h"

namespace trainyard::host {

/// One built component's optional parts. The functions SDK 1.1 and 1.2
/// appended to Callback and Dataset are true only when the component's
/// library has them (LibraryInfo::supports: an older plugin's vtable ends
/// before them, so the host must not call them); the interfaces SDK 1.3 to
/// 1.5 added point into the object when it implements them and are null
/// otherwise (they live as long as the object). A field of another kind
/// stays false or null. Code after building reads this record; it neither
/// asks for SDK features nor casts (docs/architecture.md, "The entry point
/// and the version rule").
///
/// Example:
///   if (built.facets.sample_meter) rows = built.facets.sample_meter->rows();
struct Facets {
  bool after_test_batch = false;                    ///< Callback::after_test_batch (SDK 1.1)
  bool image_preprocessing = false;                 ///< Dataset::image_preprocessing (SDK 1.1)
  bool input_normalization = false;                 ///< Dataset::input_normalization (SDK 1.2)
  bool streamed = false;                            ///< Dataset::streamed and begin_pass (SDK 1.2)
  const AllLabels* all_labels = nullptr;            ///< a dataset's labels (SDK 1.3)
  const EmbeddingLoss* embedding_loss = nullptr;    ///< a loss over embeddings (SDK 1.3)
  const NetworkOutputs* network_outputs = nullptr;  ///< what a network's rows are (SDK 1.4)
  const ScriptedModule* scripted_module = nullptr;  ///< the TorchScript file a network was built from (SDK 1.4)
  LossValues* loss_values = nullptr;                ///< values a loss reports (SDK 1.4)
  LossParameters* loss_parameters = nullptr;        ///< a loss's own parameters (SDK 1.4)
  SampleMeter* sample_meter = nullptr;              ///< a meter of one row per sample (SDK 1.4)
  const FieldDataset* field_dataset = nullptr;      ///< a dataset whose samples carry fields (SDK 1.5)
  const AnnotationIds* annotation_ids = nullptr;    ///< a dataset's class and image ids in its source (SDK 1.5)
  FieldLoss* field_loss = nullptr;                  ///< a loss that reads fields (SDK 1.5)
  FieldMeter* field_meter = nullptr;                ///< a meter that reads fields (SDK 1.5)
  const Detector* detector = nullptr;               ///< a network that decodes detections (SDK 1.5)
  /// The torch optimizer an optimizer built, where it can skip a step on the
  /// device (SDK 1.4): set by with_built_optimizer().
  SkippableStep* skippable_step = nullptr;
};

/// `object`'s record, as built by `component`'s factory (null `component`:
/// one the host made itself, which has no SDK-minor functions).
Facets facets_of(const Component* component, const Dataset& object);
Facets facets_of(const Component* component, Network& object);
Facets facets_of(const Component* component, Loss& object);
Facets facets_of(const Component* component, Meter& object);
Facets facets_of(const Component* component, Callback& object);
/// An optimizer's record is empty until it has built its torch optimizer;
/// overrides have no optional parts.
Facets facets_of(const Component* component, Optimizer& object);
/// An optimizer's record once it built `built` (which must outlive the record).
Facets with_built_optimizer(Facets facets, torch::optim::Optimizer& built);
Facets facets_of(const Component* component, AdditionalOverride& object);

}  // namespace trainyard::host
