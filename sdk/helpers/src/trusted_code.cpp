#include "trainyard/trusted_code.h"

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

#include "trainyard/error.h"

namespace fs = std::filesystem;

namespace trainyard {
namespace {

std::string user_name(uid_t uid) {
  if (const passwd* p = ::getpwuid(uid)) return p->pw_name;
  return "uid " + std::to_string(uid);
}

std::string mode_text(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// A user-private group: named as its owner, its only member (by primary group).
bool private_group_of(gid_t gid, uid_t owner) {
  const passwd* user = ::getpwuid(owner);
  const group* g = ::getgrgid(gid);
  if (!user || !g || user->pw_gid != gid || std::strcmp(g->gr_name, user->pw_name) != 0) return false;
  return g->gr_mem == nullptr || g->gr_mem[0] == nullptr;
}

// Why `path` (a file or folder, called `named` in the text) is not safe, or "".
std::string check_one(const fs::path& path, const std::string& named) {
  struct stat s {};
  if (::stat(path.c_str(), &s) != 0) return "";  // what does not exist is reported by whoever opens it
  std::vector<std::string> why;
  const uid_t me = ::geteuid();
  if (s.st_uid != me && s.st_uid != 0)
    why.push_back("owned by " + user_name(s.st_uid) + ", not by " + (me == 0 ? "root" : user_name(me) + " or root"));
  if (s.st_mode & S_IWOTH)
    why.push_back("writable by others");
  else if ((s.st_mode & S_IWGRP) && !private_group_of(s.st_gid, s.st_uid))
    why.push_back("writable by its group");
  if (why.empty()) return "";
  std::string text;
  for (const auto& w : why) text += (text.empty() ? "" : " and ") + w;
  return named + " is " + text + " (mode " + mode_text(s.st_mode) + ", owner " + user_name(s.st_uid) + ")";
}

}  // namespace

std::string untrusted_because(const std::string& path) {
  const fs::path given(path);
  const fs::path folder = given.parent_path().empty() ? fs::path(".") : given.parent_path();
  std::vector<std::pair<fs::path, std::string>> checked{{given, "it"}, {folder, "its folder " + folder.string()}};
  std::error_code ec;
  if (fs::is_symlink(given, ec)) {
    const fs::path target = fs::canonical(given, ec);
    if (!ec)
      checked.insert(checked.end(),
                     {{target, "the file it links to, " + target.string() + ","},
                      {target.parent_path(), "the folder it links into, " + target.parent_path().string() + ","}});
  }
  for (const auto& [p, named] : checked)
    if (std::string why = check_one(p, named); !why.empty()) return why;
  return "";
}

bool insecure_code_allowed() {
  const char* allowed = std::getenv("TRAINYARD_ALLOW_INSECURE_PLUGINS");
  return allowed && std::string(allowed) == "1";
}

std::string check_trusted_code(const std::string& path, const std::string& what) {
  const std::string why = untrusted_because(path);
  if (why.empty()) return "";
  if (insecure_code_allowed())
    return "warning: " + path + ": " + what + " loaded although " + why +
           " (--allow-insecure-plugins): whoever can write there runs code in this job";
  throw ConfigError(path + ": refusing to load this " + what + ": " + why,
                    "expected a " + what +
                        " and folder that only you or root can change (anyone who can write "
                        "there would run code inside this training job)",
                    "fix it (chmod go-w, chown), or pass --allow-insecure-plugins (or set "
                    "TRAINYARD_ALLOW_INSECURE_PLUGINS=1) to load it anyway");
}

}  // namespace trainyard
