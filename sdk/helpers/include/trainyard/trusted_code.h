#pragma once
/// Files that hold code (a plugin library, a TorchScript file) are loaded
/// only when no stranger can change them.
///
/// A file is trusted when it and the folder it is loaded from are owned by
/// the user running trainyard or by root, and writable by neither group nor
/// others (a group that only the owner belongs to, the user-private group a
/// umask of 002 gives on Debian and Ubuntu, counts as the owner). Otherwise
/// anyone who can write there runs code inside every training job that loads
/// it, with that job's credentials and data. `--allow-insecure-plugins`
/// (or TRAINYARD_ALLOW_INSECURE_PLUGINS=1, which the host sets for the flag)
/// loads such files anyway, with a warning.
///
/// Example (a network plugin that runs a TorchScript file):
///   if (std::string warning = trainyard::check_trusted_code(path, "TorchScript file"); !warning.empty())
///     context.log(warning);
///   auto script = torch::jit::load(path);
#include <string>

namespace trainyard {

/// Why someone other than you or root could change `path` or its folder:
/// "it is writable by others (mode 0666, owner alice)", "its folder plugins
/// is writable by its group (mode 0775, owner root)"; "" when nobody can.
/// Then the whole path as the kernel resolves it, as sudo and ssh check the
/// files they trust: every folder it passes through from the root (a sticky
/// one such as /tmp only by its owner), and every symbolic link on the way,
/// followed wherever it leads and owned by you or root ("the folder /srv it
/// passes through is writable by others (mode 0777, owner root)").
std::string untrusted_because(const std::string& path);

/// True when TRAINYARD_ALLOW_INSECURE_PLUGINS is 1 (or --allow-insecure-plugins was given).
bool insecure_code_allowed();

/// Throws ConfigError (exit 2) naming the path, its mode and owner when
/// untrusted_because(path) is not empty, unless insecure_code_allowed():
/// then returns the warning to show ("warning: ..."). Returns "" for a
/// trusted file. `what`: "plugin library", "TorchScript file".
std::string check_trusted_code(const std::string& path, const std::string& what);

}  // namespace trainyard
