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
inline constexpr Kind kAllKinds[] = {Kind::dataset, Kind::network, Kind::loss, Kind::optimizer,
                                     Kind::meter, Kind::callback, Kind::additional_override};
/// "dataset", ..., "additional_override".
const char* kind_name(Kind kind);
/// "datasets", ..., "additional_overrides": for "(known networks: ...)".
std::string kind_plural(Kind kind);

/// What an SDK minor added to the component interfaces. A plugin built
/// against an older minor has no such virtual function in its vtable, so the
/// host must not call it: the registry answers, from the library's API
/// number, once per question (docs/sdk-changes.md, "Adding to the SDK").
/// No other part of the host reads an API minor.
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
  std::variant<Factory<Dataset>, Factory<Network>, Factory<Loss>, Factory<Optimizer>,
               Factory<Meter>, Factory<Callback>, Factory<AdditionalOverride>>
      factory;
  /// "network 'mlp' (libmlp.so)": how errors name a component.
  std::string label() const;
  /// Whether the component's library supports `feature`; false for a
  /// component without a library (one a test built in).
  bool supports(SdkFeature feature) const { return library && library->supports(feature); }
};

class Registry {
 public:
  /// Adds a library's components; on a kind+name clash with another library,
  /// throws ConfigError naming both files and adds nothing.
  void add_library(std::shared_ptr<const LibraryInfo> library, std::vector<Component> components);

  const Component* find(Kind kind, const std::string& name) const;
  /// Throws ConfigError "KIND 'x' is not registered (known KINDs: ...); did you mean ...".
  const Component& get(Kind kind, const std::string& name) const;
  std::vector<std::string> names(Kind kind) const;
  /// Every component of any kind with this name.
  std::vector<const Component*> find_any(const std::string& name) const;
  const std::vector<std::shared_ptr<const LibraryInfo>>& libraries() const { return libraries_; }
  std::vector<const Component*> components_of(const LibraryInfo& library) const;

 private:
  std::map<std::pair<Kind, std::string>, Component> components_;
  std::vector<std::shared_ptr<const LibraryInfo>> libraries_;
};

}  // namespace trainyard::host
