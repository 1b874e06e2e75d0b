#pragma once
// Calls into plugin code, so that a failure names the component and library.
#include <exception>
#include <string>
#include <utility>

#include <c10/util/Exception.h>

#include "config/experiment.h"
#include "plugins/component_failure.h"
#include "trainyard/error.h"
#include "util/process.h"

namespace trainyard::host {

/// A ConfigError that already names its entry and file position. An enclosing
/// guarded() (an override's stage wrapped around a default stage that calls a
/// component) passes it on as it is: the innermost location is the true one.
class LocatedConfigError : public ConfigError {
 public:
  using ConfigError::ConfigError;
};

/// "network 'mlp' from libmlp.so 1.0.0"
std::string component_label(const ComponentConfig& config);

/// Runs `f`; rethrows a failure with the component named. A ConfigError stays
/// one (exit 2) and gets the entry's key and file position in front, once.
template <class F>
auto guarded(const ComponentConfig& who, const char* action, F&& f) -> decltype(f()) {
  // Marks whose code runs, for the fatal-signal and exit() reports and, on
  // the training thread, for the stall watchdog (util/process.h).
  struct Running {
    const char* saved;
    const char* saved_action;
    Running(const ComponentConfig* c, const char* action) : saved(running_component()), saved_action(running_action()) {
      set(c->crash_label.empty() ? nullptr : c->crash_label.c_str(), action);
    }
    ~Running() { set(saved, saved_action); }
    static void set(const char* component, const char* action) {
      running_component() = component;
      running_action() = action;
      if (this_thread_watched()) {
        WatchedProgress& p = watched_progress();
        p.component.store(component, std::memory_order_relaxed);
        p.action.store(action, std::memory_order_relaxed);
        heartbeat();
      }
    }
  } running(&who, action);
  try {
    return f();
  } catch (const ComponentFailure&) {
    throw;  // already names the innermost component
  } catch (const LocatedConfigError&) {
    throw;
  } catch (const ConfigError& e) {
    throw LocatedConfigError(who.where + " (" + component_label(who) + "): " + e.what());
  } catch (const BadRecord& e) {
    // A sample read outside the loader (a dataset's constructor reading its
    // first one): the data is wrong, not the code.
    throw LocatedConfigError(
        who.where + " (" + component_label(who) + "): unreadable data in " + action + ": " + e.what(),
        "expected readable records", "check the data or convert it again");
  } catch (const std::bad_alloc&) {
    // Sizes the user chose (an image side, a layer width, a batch): bad input, not a crash.
    throw LocatedConfigError(who.where + " (" + component_label(who) + "): ran out of memory in " + action,
                             "sizes that fit in this machine's memory",
                             "check the sizes in its options and loop.batch_per_device");
  } catch (const c10::OutOfMemoryError& e) {
    throw LocatedConfigError(who.where + " (" + component_label(who) + "): ran out of memory in " + action + " (" +
                                 e.what_without_backtrace() + ")",
                             "sizes that fit in the device's memory",
                             "check the sizes in its options and loop.batch_per_device");
  } catch (const c10::Error& e) {
    // The CPU allocator reports failure as a plain c10::Error (an enforce).
    const std::string message = e.what_without_backtrace();
    if (const size_t at = message.find("can't allocate memory"); at != std::string::npos)
      throw LocatedConfigError(who.where + " (" + component_label(who) + "): ran out of memory in " + action + " (" +
                                   message.substr(at, message.find(". Error code", at) - at) + ")",
                               "sizes that fit in this machine's memory",
                               "check the sizes in its options and loop.batch_per_device");
    throw ComponentFailure(component_label(who) + " failed in " + action + ": " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    throw ComponentFailure(component_label(who) + " failed in " + action + ": " + e.what());
  } catch (...) {
    throw ComponentFailure(component_label(who) + " failed in " + action + ": a non-standard exception");
  }
}

}  // namespace trainyard::host
