#pragma once
// Every component the loaded plugin libraries registered, by kind and name.
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "trainyard/plugin.h"

namespace trainyard::host {

enum class Kind { dataset, network, loss, optimizer, meter, callback, additional_override };
inline constexpr Kind kAllKinds[] = {
    Kind::dataset, Kind::network, Kind::loss, Kind::optimizer, Kind::meter, Kind::callback, Kind::additional_override};
/// "dataset", ..., "additional_override".
const char* kind_name(Kind kind);
/// "datasets", ..., "additional_overrides": for "(known networks: ...)".
std::string kind_plural(Kind kind);

/// What an SDK minor added to the component interfaces. A plugin built
/// against an older minor has no such virtual function in its vtable, so the
/// host must not call it: the registry answers, from the library's API
/// number (docs/sdk-changes.md, "Adding to the SDK"), asked once per built
/// component by facets_of (plugins/facets.h), whose record the rest of the
/// host reads. No other part of the host reads an API minor.
enum class SdkFeature {
  test_batch_callback,  ///< 1.1: Callback::after_test_batch
  image_preprocessing,  ///< 1.1: Dataset::image_preprocessing
  input_normalization,  ///< 1.2: Dataset::input_normalization
  streamed_data,        ///< 1.2: Dataset::streamed and begin_pass
};

/// Where a component came from.
struct LibraryInfo {
  std::string path;
  std::string name;
  std::string version;
  std::string description;
  std::string fingerprint;
  unsigned api_major = 0, api_minor = 0;
  /// Whether this library's components have `feature`'s functions.
  bool supports(SdkFeature feature) const;
};

struct Component {
  Kind kind;
  std::string name;
  std::string description;
  Schema schema;
  std::shared_ptr<const LibraryInfo> library;
  std::variant<Factory<Dataset>, Factory<Network>, Factory<Loss>, Factory<Optimizer>, Factory<Meter>, Factory<Callback>,
               Factory<AdditionalOverride>>
      factory;
  /// "network 'mlp' (libmlp.so)": how errors name a component.
  std::string label() const;
  /// "LIBRARY::NAME" ("meters::confusion_matrix"): the name no other
  /// library's component can take; NAME for a component without a library.
  std::string qualified_name() const;
};

/// Component names are namespaced by library: `meters::confusion_matrix` is
/// the `confusion_matrix` of the library named `meters`. The short name
/// (`confusion_matrix`) names it while no other library has a component of
/// that kind and name; two libraries with the same short name both load, and
/// the short name becomes ambiguous (an error listing the qualified names).
/// So a built-in added later never refuses an outside library.
class Registry {
 public:
  /// Adds a library's components. Throws ConfigError, adding nothing, when
  /// the library registers one kind and name twice, or when a library of the
  /// same name is already in (the qualified names would clash: the same
  /// library found in two folders).
  void add_library(std::shared_ptr<const LibraryInfo> library, std::vector<Component> components);

  /// By qualified name (LIB::NAME) or by short name; null when there is
  /// none, or when the short name is ambiguous.
  const Component* find(Kind kind, const std::string& name) const;
  /// Every component of `kind` that `name` (qualified or short) names.
  std::vector<const Component*> matches(Kind kind, const std::string& name) const;
  /// Throws ConfigError "KIND 'x' is not registered (known KINDs: ...); did
  /// you mean ..." or "KIND 'x' is ambiguous ...; write one of LIB::x, ...".
  const Component& get(Kind kind, const std::string& name) const;
  /// The names that work in `plugin:`: each short name that is unambiguous,
  /// and the qualified names of those that are not; sorted.
  std::vector<std::string> names(Kind kind) const;
  /// Every component of any kind that this name (qualified or short) names.
  std::vector<const Component*> find_any(const std::string& name) const;
  const std::vector<std::shared_ptr<const LibraryInfo>>& libraries() const { return libraries_; }
  std::vector<const Component*> components_of(const LibraryInfo& library) const;

 private:
  std::map<std::pair<Kind, std::string>, Component> components_;  ///< by kind and qualified name
  std::vector<std::shared_ptr<const LibraryInfo>> libraries_;
};

}  // namespace trainyard::host
