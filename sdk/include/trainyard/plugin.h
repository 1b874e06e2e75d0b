#pragma once
/// The plugin entry point and component registration.
///
/// A plugin library exports exactly one C symbol, `trainyard_plugin_entry`,
/// returning a TrainyardPluginInfo (trainyard_add_plugin() hides every other
/// symbol). The host reads the first four fields (magic, struct_size,
/// api_major, api_minor) before anything else; they never change layout, and
/// struct_size tells a 1.0 record from a pre-1.0 (0.x) one, which the host
/// refuses. It then checks the API version and the fingerprint and only then calls
/// register_components, once, with a Registrar. Nothing registers itself from
/// static initialisers. Libraries stay loaded until the process exits.
///
/// Example (plugin.cpp of a library):
///   #include <trainyard/plugin.h>
///   #include "mlp.h"
///   static void register_components(trainyard::Registrar& r) {
///     r.add_network("mlp", "multi-layer perceptron", mlp_schema(),
///                   [](const trainyard::Options& o, const trainyard::Context& c) {
///                     return std::make_shared<Mlp>(o, c);
///                   });
///   }
///   TRAINYARD_PLUGIN("mlp", "1.0.0", "a multi-layer perceptron", register_components)

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "trainyard/context.h"
#include "trainyard/options.h"
#include "trainyard/version.h"

namespace trainyard {

class Dataset;
class Network;
class Loss;
class Optimizer;
class Meter;
class Callback;
class AdditionalOverride;

/// Builds a component from its validated options.
template <class T>
using Factory = std::function<std::shared_ptr<T>(const Options&, const Context&)>;

/// Receives a library's components. Implemented by the host.
class Registrar {
 public:
  virtual ~Registrar();
  virtual void add_dataset(const std::string& name, const std::string& description, Schema schema,
                           Factory<Dataset> make) = 0;
  virtual void add_network(const std::string& name, const std::string& description, Schema schema,
                           Factory<Network> make) = 0;
  virtual void add_loss(const std::string& name, const std::string& description, Schema schema, Factory<Loss> make) = 0;
  virtual void add_optimizer(const std::string& name, const std::string& description, Schema schema,
                             Factory<Optimizer> make) = 0;
  virtual void add_meter(const std::string& name, const std::string& description, Schema schema,
                         Factory<Meter> make) = 0;
  virtual void add_callback(const std::string& name, const std::string& description, Schema schema,
                            Factory<Callback> make) = 0;
  virtual void add_override(const std::string& name, const std::string& description, Schema schema,
                            Factory<AdditionalOverride> make) = 0;
};

}  // namespace trainyard

extern "C" {

#define TRAINYARD_PLUGIN_MAGIC 0x4c505954u /* "TYPL" */

/// What `trainyard_plugin_entry` returns: the SDK 1.0 entry record. Within
/// SDK 1.x, fields are only ever appended; struct_size tells the host how
/// many the plugin knows.
///
/// Example: TRAINYARD_PLUGIN(...) fills it; nothing else should.
struct TrainyardPluginInfo {
  uint32_t magic;           ///< TRAINYARD_PLUGIN_MAGIC
  uint32_t struct_size;     ///< sizeof(TrainyardPluginInfo) when the plugin was built
  uint32_t api_major;       ///< TRAINYARD_API_MAJOR (the SDK's major) when the plugin was built
  uint32_t api_minor;       ///< TRAINYARD_API_MINOR (the SDK's minor)
  const char* sdk_version;  ///< TRAINYARD_VERSION ("1.0.0") when the plugin was built
  const char* fingerprint;  ///< TRAINYARD_FINGERPRINT when the plugin was built
  const char* name;
  const char* version;
  const char* description;
  void (*register_components)(trainyard::Registrar& registrar);
};

typedef const TrainyardPluginInfo* (*TrainyardPluginEntry)();
}

#define TRAINYARD_PLUGIN_ENTRY_SYMBOL "trainyard_plugin_entry"

/// Defines the entry point. Use once per library, in plugin.cpp.
#define TRAINYARD_PLUGIN(NAME, VERSION, DESCRIPTION, REGISTER_FUNCTION)                                   \
  extern "C" __attribute__((visibility("default"))) const TrainyardPluginInfo* trainyard_plugin_entry() { \
    static const TrainyardPluginInfo info = {TRAINYARD_PLUGIN_MAGIC,                                      \
                                             sizeof(TrainyardPluginInfo),                                 \
                                             TRAINYARD_API_MAJOR,                                         \
                                             TRAINYARD_API_MINOR,                                         \
                                             TRAINYARD_VERSION,                                           \
                                             TRAINYARD_FINGERPRINT,                                       \
                                             NAME,                                                        \
                                             VERSION,                                                     \
                                             DESCRIPTION,                                                 \
                                             &REGISTER_FUNCTION};                                         \
    return &info;                                                                                         \
  }
