#include "plugins/registry.h"

#include <filesystem>

#include "trainyard/error.h"
#include "trainyard/version.h"
#include "util/text.h"

namespace trainyard::host {

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::dataset: return "dataset";
    case Kind::network: return "network";
    case Kind::loss: return "loss";
    case Kind::optimizer: return "optimizer";
    case Kind::meter: return "meter";
    case Kind::callback: return "callback";
    case Kind::additional_override: return "additional_override";
  }
  return "?";
}

std::string kind_plural(Kind kind) {
  return kind == Kind::loss ? "losses" : std::string(kind_name(kind)) + "s";
}

bool LibraryInfo::supports(SdkFeature feature) const {
  unsigned since = 0;  // the API minor that added the feature
  switch (feature) {
    case SdkFeature::test_batch_callback:
    case SdkFeature::image_preprocessing: since = 1; break;
    case SdkFeature::input_normalization:
    case SdkFeature::streamed_data: since = 2; break;
  }
  return api_major == TRAINYARD_API_MAJOR && api_minor >= since;
}

std::string Component::label() const {
  return std::string(kind_name(kind)) + " '" + name + "' (" +
         std::filesystem::path(library->path).filename().string() + ")";
}

void Registry::add_library(std::shared_ptr<const LibraryInfo> library, std::vector<Component> components) {
  std::map<std::pair<Kind, std::string>, const Component*> own;
  for (const auto& c : components) {
    auto key = std::make_pair(c.kind, c.name);
    auto it = components_.find(key);
    if (it != components_.end() || own.count(key)) {
      std::string other = it != components_.end() ? it->second.library->path : library->path;
      throw ConfigError(std::string(kind_name(c.kind)) + " '" + c.name + "' is registered twice: by " +
                            other + " and by " + library->path,
                        "expected one library per kind and name, got two",
                        "remove one of the libraries from the plugin folders or rename the component");
    }
    own[key] = &c;
  }
  for (auto& c : components) {
    c.library = library;
    auto key = std::make_pair(c.kind, c.name);
    components_.emplace(key, std::move(c));
  }
  libraries_.push_back(std::move(library));
}

const Component* Registry::find(Kind kind, const std::string& name) const {
  auto it = components_.find({kind, name});
  return it == components_.end() ? nullptr : &it->second;
}

std::vector<std::string> Registry::names(Kind kind) const {
  std::vector<std::string> out;
  for (const auto& [key, c] : components_)
    if (key.first == kind) out.push_back(key.second);
  return out;
}

const Component& Registry::get(Kind kind, const std::string& name) const {
  if (const Component* c = find(kind, name)) return *c;
  auto known = names(kind);
  std::string hint = closest(name, known);
  throw ConfigError(std::string(kind_name(kind)) + " '" + name + "' is not registered (known " +
                    kind_plural(kind) + ": " + join(known) + ")" +
                    (hint.empty() ? "; check the plugin folders with 'trainyard plugins'"
                                  : "; did you mean '" + hint + "'?"));
}

std::vector<const Component*> Registry::find_any(const std::string& name) const {
  std::vector<const Component*> out;
  for (const auto& [key, c] : components_)
    if (key.second == name) out.push_back(&c);
  return out;
}

std::vector<const Component*> Registry::components_of(const LibraryInfo& library) const {
  std::vector<const Component*> out;
  for (const auto& [key, c] : components_)
    if (c.library.get() == &library) out.push_back(&c);
  return out;
}

}  // namespace trainyard::host
