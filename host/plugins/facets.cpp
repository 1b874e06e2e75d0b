#include "plugins/facets.h"

namespace trainyard::host {

namespace {
bool has(const Component* component, SdkFeature feature) {
  return component && component->library && component->library->supports(feature);
}
}  // namespace

Facets facets_of(const Component* component, const Dataset& object) {
  Facets f;
  f.image_preprocessing = has(component, SdkFeature::image_preprocessing);
  f.input_normalization = has(component, SdkFeature::input_normalization);
  f.streamed = has(component, SdkFeature::streamed_data);
  f.all_labels = dynamic_cast<const AllLabels*>(&object);
  f.field_dataset = dynamic_cast<const FieldDataset*>(&object);
  f.annotation_ids = dynamic_cast<const AnnotationIds*>(&object);
  return f;
}

Facets facets_of(const Component*, Network& object) {
  Facets f;
  f.network_outputs = dynamic_cast<const NetworkOutputs*>(&object);
  f.scripted_module = dynamic_cast<const ScriptedModule*>(&object);
  f.detector = dynamic_cast<const Detector*>(&object);
  return f;
}

Facets facets_of(const Component*, Loss& object) {
  Facets f;
  f.embedding_loss = dynamic_cast<const EmbeddingLoss*>(&object);
  f.loss_values = dynamic_cast<LossValues*>(&object);
  f.loss_parameters = dynamic_cast<LossParameters*>(&object);
  f.field_loss = dynamic_cast<FieldLoss*>(&object);
  return f;
}

Facets facets_of(const Component*, Meter& object) {
  Facets f;
  f.sample_meter = dynamic_cast<SampleMeter*>(&object);
  f.field_meter = dynamic_cast<FieldMeter*>(&object);
  return f;
}

Facets facets_of(const Component* component, Callback&) {
  Facets f;
  f.after_test_batch = has(component, SdkFeature::test_batch_callback);
  return f;
}

Facets facets_of(const Component*, Optimizer&) { return {}; }

Facets with_built_optimizer(Facets facets, torch::optim::Optimizer& built) {
  facets.skippable_step = dynamic_cast<SkippableStep*>(&built);
  return facets;
}
Facets facets_of(const Component*, AdditionalOverride&) { return {}; }

}  // namespace trainyard::host
