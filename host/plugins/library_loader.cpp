#include "plugins/library_loader.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>

#include "log/log.h"
#include "trainyard/error.h"
#include "trainyard/trusted_code.h"
#include "util/text.h"

namespace fs = std::filesystem;

namespace trainyard::host {
namespace {

// Receives one library's registrations; they reach the registry only if the
// whole registration succeeds.
class CollectingRegistrar : public Registrar {
 public:
  std::vector<Component> components;

  void add_dataset(const std::string& n, const std::string& d, Schema s, Factory<Dataset> f) override {
    add(Kind::dataset, n, d, std::move(s), std::move(f));
  }
  void add_network(const std::string& n, const std::string& d, Schema s, Factory<Network> f) override {
    add(Kind::network, n, d, std::move(s), std::move(f));
  }
  void add_loss(const std::string& n, const std::string& d, Schema s, Factory<Loss> f) override {
    add(Kind::loss, n, d, std::move(s), std::move(f));
  }
  void add_optimizer(const std::string& n, const std::string& d, Schema s, Factory<Optimizer> f) override {
    add(Kind::optimizer, n, d, std::move(s), std::move(f));
  }
  void add_meter(const std::string& n, const std::string& d, Schema s, Factory<Meter> f) override {
    add(Kind::meter, n, d, std::move(s), std::move(f));
  }
  void add_callback(const std::string& n, const std::string& d, Schema s, Factory<Callback> f) override {
    add(Kind::callback, n, d, std::move(s), std::move(f));
  }
  void add_override(const std::string& n, const std::string& d, Schema s, Factory<AdditionalOverride> f) override {
    add(Kind::additional_override, n, d, std::move(s), std::move(f));
  }

 private:
  template <class F>
  void add(Kind kind, const std::string& name, const std::string& description, Schema schema, F factory) {
    if (name.empty() || name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos)
      throw Error("component name '" + name + "' must be snake_case (a-z, 0-9, _)");
    if (!factory) throw Error(std::string(kind_name(kind)) + " '" + name + "' was registered without a factory");
    Component c{kind, name, description, std::move(schema), nullptr, std::move(factory)};
    components.push_back(std::move(c));
  }
};

// Libraries are never unloaded: objects they made may live until exit.
std::vector<boost::dll::shared_library*>& resident_libraries() {
  static auto* libs = new std::vector<boost::dll::shared_library*>();
  return *libs;
}

std::string fingerprint_difference(const std::string& plugin, const std::string& host) {
  auto a = split(plugin, ';'), b = split(host, ';');
  std::vector<std::string> diffs;
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    std::string x = i < a.size() ? a[i] : "(absent)", y = i < b.size() ? b[i] : "(absent)";
    if (x != y) diffs.push_back("plugin " + x + " vs host " + y);
  }
  return join(diffs);
}

// The SDK 1.0 entry record: what every plugin must provide. A record of
// the pre-1.0 SDK (0.x, which called itself API 1.1 to 1.4) is shorter: it
// has no sdk_version field.
constexpr size_t kMinimumInfoSize = sizeof(TrainyardPluginInfo);
// The 0.x record: magic, struct_size, api_major, api_minor, then five pointers.
constexpr size_t kPreOneInfoSize = 4 * sizeof(uint32_t) + 5 * sizeof(void*);

// A plugin built by the pre-1.0 SDK: what changed, and where to read it.
ConfigError pre_one_plugin(const std::string& path, const TrainyardPluginInfo& info) {
  return ConfigError(path + ": built by the pre-1.0 SDK 0.x (API " + std::to_string(info.api_major) + "." +
                         std::to_string(info.api_minor) +
                         "), which this host no longer loads; SDK " TRAINYARD_VERSION
                         " changed the entry record (it now carries the SDK version), folded SeededDataset into "
                         "Dataset::get_seeded and get_batch(indices, seeds), and gave meters structured results() "
                         "and the loop meter_readings()",
                     "expected SDK " TRAINYARD_VERSION " (API " TRAINYARD_STR(TRAINYARD_API_MAJOR) "." TRAINYARD_STR(
                         TRAINYARD_API_MINOR) "), got SDK 0.x",
                     "port the plugin as the SDK's docs/sdk-changes.md says (installed as share/doc/trainyard/"
                     "sdk-changes.md), then rebuild it against this SDK");
}

}  // namespace

std::string builtin_plugin_dir() {
  fs::path exe_dir = boost::dll::program_location().parent_path().string();
  fs::path build_tree = exe_dir.parent_path() / "plugins";
  if (fs::is_directory(build_tree)) return build_tree.string();
  return (exe_dir.parent_path() / TRAINYARD_INSTALLED_PLUGIN_DIR).string();
}

std::string user_plugin_dir() {
  const char* data = std::getenv("XDG_DATA_HOME");
  if (data && *data == '/') return (fs::path(data) / "trainyard" / "plugins").string();
  const char* home = std::getenv("HOME");
  if (!home || !*home) return "";
  return (fs::path(home) / ".local" / "share" / "trainyard" / "plugins").string();
}

std::string searched_folders_text(const std::vector<PluginFolder>& folders) {
  std::vector<std::string> listed;
  for (const auto& f : folders)
    listed.push_back(f.path + " (" + f.origin + (fs::is_directory(f.path) ? "" : ", absent") + ")");
  return "searched " + join(listed) +
         "; add a folder with --plugin-dir DIR, plugin_dirs: [DIR] in the experiment or "
         "TRAINYARD_PLUGIN_PATH, or copy the library into " +
         (user_plugin_dir().empty() ? "a plugin folder" : user_plugin_dir());
}

std::vector<PluginFolder> plugin_search_path(const std::vector<std::string>& experiment_dirs,
                                             const std::vector<std::string>& cli_dirs) {
  std::vector<PluginFolder> folders{{builtin_plugin_dir(), "built-in"}};
  if (const std::string user = user_plugin_dir(); !user.empty())
    folders.push_back({user, "user folder", PluginFolder::IfMissing::skip});
  if (const char* env = std::getenv("TRAINYARD_PLUGIN_PATH"))
    for (const auto& dir : split(env, ':'))
      if (!dir.empty()) folders.push_back({dir, "TRAINYARD_PLUGIN_PATH", PluginFolder::IfMissing::warn});
  for (const auto& dir : experiment_dirs) folders.push_back({dir, "plugin_dirs"});
  for (const auto& dir : cli_dirs) folders.push_back({dir, "--plugin-dir"});
  // A folder named twice is loaded once.
  std::vector<PluginFolder> unique;
  for (auto& f : folders) {
    std::error_code ec;
    auto canonical = fs::weakly_canonical(f.path, ec).string();
    bool seen = std::any_of(unique.begin(), unique.end(), [&](const PluginFolder& u) {
      return fs::weakly_canonical(u.path, ec).string() == canonical;
    });
    if (!seen) unique.push_back(std::move(f));
  }
  return unique;
}

void load_plugin_folders(const std::vector<PluginFolder>& folders, Registry& registry,
                         std::vector<std::string>* refused) {
  for (const auto& folder : folders) {
    if (!fs::is_directory(folder.path) && folder.if_missing == PluginFolder::IfMissing::skip) continue;
    if (!fs::is_directory(folder.path) && folder.if_missing == PluginFolder::IfMissing::warn) {
      log_warning("warning: " + folder.path +
                  (fs::exists(folder.path) ? ": is a file, not a plugin folder" : ": plugin folder does not exist") +
                  " (named by " + folder.origin + "); skipped");
      continue;
    }
    if (!fs::is_directory(folder.path)) {
      // A library named where its folder belongs is the usual slip: say so, and which folder.
      const bool file = fs::exists(folder.path);
      const std::string parent = fs::path(folder.path).parent_path().string();
      ConfigError error(folder.path + (file ? ": is a file, not a plugin folder" : ": plugin folder does not exist") +
                            " (named by " + folder.origin + ")",
                        "expected a folder holding plugin libraries (*.so)",
                        file ? "name the folder that holds it (" + (parent.empty() ? std::string(".") : parent) + ")"
                             : "create it or remove it from " + folder.origin);
      if (!refused) throw error;
      refused->push_back(error.what());
      continue;
    }
    std::vector<std::string> libraries;
    for (const auto& entry : fs::directory_iterator(folder.path))
      if (entry.is_regular_file() && entry.path().extension() == ".so") libraries.push_back(entry.path().string());
    std::sort(libraries.begin(), libraries.end());
    for (const auto& path : libraries) {
      try {
        load_plugin_library(path, registry);
      } catch (const ConfigError& e) {
        if (!refused) throw;
        refused->push_back(e.what());
      }
    }
  }
}

namespace {

// The machine an ELF file was built for, by its e_machine number.
std::string elf_machine_name(unsigned machine) {
  switch (machine) {
    case 3:
      return "x86 (32-bit)";
    case 8:
      return "MIPS";
    case 20:
      return "PowerPC";
    case 21:
      return "PowerPC64";
    case 22:
      return "s390";
    case 40:
      return "ARM (32-bit)";
    case 62:
      return "x86-64";
    case 183:
      return "aarch64";
    case 243:
      return "RISC-V";
    case 258:
      return "LoongArch";
    default:
      return "machine " + std::to_string(machine);
  }
}

// This host's ELF machine, class (1: 32-bit, 2: 64-bit) and byte order (1: little, 2: big endian).
constexpr unsigned kHostMachine =
#if defined(__x86_64__)
    62;
#elif defined(__aarch64__)
    183;
#elif defined(__powerpc64__)
    21;
#elif defined(__riscv)
    243;
#else
    0;  // unknown: not checked
#endif
constexpr unsigned char kHostClass = sizeof(void*) == 8 ? 2 : 1;
constexpr unsigned char kHostData = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? 1 : 2;

// A library built for another machine: dlopen's reason is lost on the way
// (Boost.DLL reports "No such file or directory"), so the ELF header is read
// first and what it says is named.
void check_elf_machine(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char h[20] = {};
  if (!in.read(reinterpret_cast<char*>(h), sizeof h)) return;  // too short for ELF: dlopen says what it is
  if (h[0] != 0x7f || h[1] != 'E' || h[2] != 'L' || h[3] != 'F') return;
  const unsigned char elf_class = h[4], data = h[5];
  const unsigned machine = data == 2 ? (unsigned(h[18]) << 8 | h[19]) : (unsigned(h[19]) << 8 | h[18]);
  auto refuse = [&](const std::string& got) {
    throw ConfigError(path + ": a library built for another machine",
                      "expected ELF machine " + elf_machine_name(kHostMachine) + " (this host's), got " + got,
                      "rebuild the plugin on (or cross-compile it for) " + elf_machine_name(kHostMachine));
  };
  if (kHostMachine != 0 && machine != kHostMachine) refuse(elf_machine_name(machine));
  if (elf_class != kHostClass)
    refuse(std::string(elf_class == 1 ? "32-bit" : elf_class == 2 ? "64-bit" : "unknown class") + " ELF");
  if (data != kHostData)
    refuse(std::string(data == 2 ? "big-endian" : data == 1 ? "little-endian" : "unknown byte order") + " ELF");
}

}  // namespace

void load_plugin_library(const std::string& path, Registry& registry) {
  namespace mode = boost::dll::load_mode;
  // Before a byte of it runs: a library others can replace is their code in this job.
  if (const std::string warning = check_trusted_code(path, "plugin library"); !warning.empty()) log_warning(warning);
  check_elf_machine(path);
  auto* library = new boost::dll::shared_library();
  try {
    library->load(path, mode::rtld_now | mode::rtld_local);
  } catch (const std::exception& e) {
    delete library;
    throw ConfigError(path + ": cannot load the library: " + e.what(),
                      "expected a shared library built with trainyard_add_plugin()",
                      "check that its dependencies resolve (ldd " + path + ")");
  }
  resident_libraries().push_back(library);

  if (!library->has(TRAINYARD_PLUGIN_ENTRY_SYMBOL))
    throw ConfigError(path + ": not a trainyard plugin: no '" TRAINYARD_PLUGIN_ENTRY_SYMBOL "' entry point",
                      "expected a library defining TRAINYARD_PLUGIN(...)",
                      "add TRAINYARD_PLUGIN(...) to its plugin.cpp, or move the file out of the plugin folder");
  auto entry = library->get<const TrainyardPluginInfo*()>(TRAINYARD_PLUGIN_ENTRY_SYMBOL);
  const TrainyardPluginInfo* info = entry();
  if (info == nullptr || info->magic != TRAINYARD_PLUGIN_MAGIC)
    throw ConfigError(path + ": the entry point returned no valid plugin info",
                      "expected magic 'TYPL' from TRAINYARD_PLUGIN(...)", "rebuild the plugin against this SDK");

  // Checked before the version: a 0.x record's api_minor (1 to 4) would read as a newer SDK.
  if (info->api_major == 1 && info->struct_size <= kPreOneInfoSize) throw pre_one_plugin(path, *info);
  const std::string host_api = std::to_string(TRAINYARD_API_MAJOR) + "." + std::to_string(TRAINYARD_API_MINOR);
  const std::string plugin_api = std::to_string(info->api_major) + "." + std::to_string(info->api_minor);
  if (info->api_major != TRAINYARD_API_MAJOR)
    throw ConfigError(path + ": SDK API major version differs",
                      "expected " + host_api + " (same major), got " + plugin_api,
                      "rebuild the plugin against this host's SDK");
  if (info->api_minor > TRAINYARD_API_MINOR)
    throw ConfigError(path + ": built against a newer SDK than this host",
                      "expected API " + host_api + " or an older minor, got " + plugin_api,
                      "upgrade the host or rebuild the plugin against this host's SDK");
  if (info->struct_size < kMinimumInfoSize)
    throw ConfigError(
        path + ": plugin info is truncated",
        "expected at least " + std::to_string(kMinimumInfoSize) + " bytes, got " + std::to_string(info->struct_size),
        "rebuild the plugin against this SDK");
  const std::string host_fingerprint = TRAINYARD_FINGERPRINT;
  const std::string plugin_fingerprint = info->fingerprint ? info->fingerprint : "";
  if (plugin_fingerprint != host_fingerprint)
    throw ConfigError(
        path + ": build fingerprint differs (" + fingerprint_difference(plugin_fingerprint, host_fingerprint) + ")",
        "expected " + host_fingerprint + ", got " + plugin_fingerprint,
        "rebuild the plugin against this SDK with the same compiler and LibTorch");

  auto lib = std::make_shared<LibraryInfo>();
  lib->path = path;
  lib->name = info->name ? info->name : "";
  lib->version = info->version ? info->version : "";
  lib->description = info->description ? info->description : "";
  lib->fingerprint = plugin_fingerprint;
  lib->api_major = info->api_major;
  lib->api_minor = info->api_minor;

  CollectingRegistrar registrar;
  try {
    if (info->register_components == nullptr) throw Error("register_components is null");
    info->register_components(registrar);
  } catch (const std::exception& e) {
    throw ConfigError(path + ": library '" + lib->name + "' failed while registering its components: " + e.what(),
                      "expected registration to succeed", "fix or remove the library");
  } catch (...) {
    throw ConfigError(path + ": library '" + lib->name + "' threw a non-standard exception while registering",
                      "expected registration to succeed", "fix or remove the library");
  }
  registry.add_library(std::move(lib), std::move(registrar.components));
}

}  // namespace trainyard::host
