#include "plugins/registry.h"

#include <algorithm>
#include <filesystem>

#include "trainyard/error.h"
#include "trainyard/version.h"
#include "util/text.h"

namespace trainyard::host {

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::dataset:
      return "dataset";
    case Kind::network:
      return "network";
    case Kind::loss:
      return "loss";
    case Kind::optimizer:
      return "optimizer";
    case Kind::meter:
      return "meter";
    case Kind::callback:
      return "callback";
    case Kind::additional_override:
      return "additional_override";
  }
  return "?";
}

std::string kind_plural(Kind kind) { return kind == Kind::loss ? "losses" : std::string(kind_name(kind)) + "s"; }

bool LibraryInfo::supports(SdkFeature feature) const {
  unsigned since = 0;  // the API minor that added the feature
  switch (feature) {
    case SdkFeature::test_batch_callback:
    case SdkFeature::image_preprocessing:
      since = 1;
      break;
    case SdkFeature::input_normalization:
    case SdkFeature::streamed_data:
      since = 2;
      break;
  }
  return api_major == TRAINYARD_API_MAJOR && api_minor >= since;
}

std::string Component::label() const {
  return std::string(kind_name(kind)) + " '" + name + "' (" + std::filesystem::path(library->path).filename().string() +
         ")";
}

std::string Component::qualified_name() const {
  return library && !library->name.empty() ? library->name + "::" + name : name;
}

namespace {
constexpr const char* kSeparator = "::";
}  // namespace

void Registry::add_library(std::shared_ptr<const LibraryInfo> library, std::vector<Component> components) {
  for (const auto& other : libraries_)
    if (other->name == library->name)
      throw ConfigError(
          "library '" + library->name + "' is loaded twice: from " + other->path + " and from " + library->path,
          "expected one library per name (its components are named " + library->name + "::NAME)",
          "remove one of the two files from the plugin folders");
  std::map<std::pair<Kind, std::string>, const Component*> own;
  for (const auto& c : components) {
    auto key = std::make_pair(c.kind, c.name);
    if (own.count(key))
      throw ConfigError(library->path + ": " + kind_name(c.kind) + " '" + c.name +
                            "' is registered twice by library '" + library->name + "'",
                        "expected one component per kind and name in a library, got two",
                        "rename one of them in the library's register_components()");
    own[key] = &c;
  }
  for (auto& c : components) {
    c.library = library;
    auto key = std::make_pair(c.kind, c.qualified_name());
    components_.emplace(key, std::move(c));
  }
  libraries_.push_back(std::move(library));
}

std::vector<const Component*> Registry::matches(Kind kind, const std::string& name) const {
  std::vector<const Component*> out;
  if (name.find(kSeparator) != std::string::npos) {
    if (auto it = components_.find({kind, name}); it != components_.end()) out.push_back(&it->second);
    return out;
  }
  for (const auto& [key, c] : components_)
    if (key.first == kind && c.name == name) out.push_back(&c);
  return out;
}

const Component* Registry::find(Kind kind, const std::string& name) const {
  auto found = matches(kind, name);
  return found.size() == 1 ? found.front() : nullptr;
}

std::vector<std::string> Registry::names(Kind kind) const {
  std::map<std::string, std::vector<std::string>> by_short;  // short name -> qualified names
  for (const auto& [key, c] : components_)
    if (key.first == kind) by_short[c.name].push_back(key.second);
  std::vector<std::string> out;
  for (const auto& [short_name, qualified] : by_short) {
    if (qualified.size() == 1)
      out.push_back(short_name);
    else
      out.insert(out.end(), qualified.begin(), qualified.end());
  }
  std::sort(out.begin(), out.end());
  return out;
}

const Component& Registry::get(Kind kind, const std::string& name) const {
  auto found = matches(kind, name);
  if (found.size() == 1) return *found.front();
  if (found.size() > 1) {
    std::vector<std::string> choices, from;
    for (const Component* c : found) {
      choices.push_back(c->qualified_name());
      from.push_back(c->qualified_name() + " from " + c->library->path);
    }
    throw ConfigError(std::string(kind_name(kind)) + " " + quoted_value(name) + " is ambiguous: " +
                          std::to_string(found.size()) + " libraries register it (" + join(from) + ")",
                      "expected a name that one library registers, or LIBRARY::NAME, got " + quoted_value(name),
                      "write one of " + join(choices));
  }
  auto known = names(kind);
  std::string hint = closest(name, known);
  throw ConfigError(
      std::string(kind_name(kind)) + " " + quoted_value(name) + " is not registered (known " + kind_plural(kind) +
      ": " + join(known) + ")" +
      (hint.empty() ? "; check the plugin folders with 'trainyard plugins'" : "; did you mean '" + hint + "'?"));
}

std::vector<const Component*> Registry::find_any(const std::string& name) const {
  std::vector<const Component*> out;
  for (Kind kind : kAllKinds)
    for (const Component* c : matches(kind, name)) out.push_back(c);
  return out;
}

std::vector<const Component*> Registry::components_of(const LibraryInfo& library) const {
  std::vector<const Component*> out;
  for (const auto& [key, c] : components_)
    if (c.library.get() == &library) out.push_back(&c);
  return out;
}

}  // namespace trainyard::host
