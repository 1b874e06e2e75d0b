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

// A sticky folder: only its owner matters (root's /tmp is fine, a stranger's is not).
std::string owner_only(const fs::path& folder, const struct stat& s) {
  const uid_t me = ::geteuid();
  if (s.st_uid == me || s.st_uid == 0) return "";
  return "the folder " + folder.string() + " it passes through is owned by " + user_name(s.st_uid) + " (mode " +
         mode_text(s.st_mode) + ")";
}

// A folder the path passes through on its way (an ancestor, or one a link
// leads through): safe when only you or root can change which entries it
// holds. A sticky folder (/tmp, mode 1777) is safe to pass through: no one
// may rename or remove an entry there that is not theirs, and the entry's own
// owner is checked next.
std::string check_passed(const fs::path& folder) {
  struct stat s {};
  if (::stat(folder.c_str(), &s) != 0) return "";
  if (s.st_mode & S_ISVTX) return owner_only(folder, s);
  return check_one(folder, "the folder " + folder.string() + " it passes through");
}

// The whole path resolved as the kernel resolves it, component by component
// from the root, following every symbolic link (up to 40, as the kernel):
// each folder passed through, and each link and its owner, checked as sudo
// and ssh check the files they trust.
std::string check_every_step(const fs::path& given) {
  std::error_code ec;
  const fs::path absolute = fs::absolute(given, ec);
  if (ec) return "";
  std::vector<std::string> todo;  // the components still to walk, the next one last
  auto push_front = [&todo](const fs::path& p) {
    std::vector<std::string> parts;
    for (const auto& part : p.relative_path()) parts.push_back(part.string());
    todo.insert(todo.end(), parts.rbegin(), parts.rend());
  };
  push_front(absolute);
  fs::path at = "/";
  int links = 0;
  while (!todo.empty()) {
    if (std::string why = check_passed(at); !why.empty()) return why;
    const std::string name = todo.back();
    todo.pop_back();
    if (name.empty() || name == ".") continue;
    if (name == "..") {
      at = at.parent_path();
      continue;
    }
    const fs::path next = at / name;
    struct stat s {};
    if (::lstat(next.c_str(), &s) != 0) return "";  // what does not exist is reported by whoever opens it
    if (!S_ISLNK(s.st_mode)) {
      at = next;
      continue;
    }
    if (++links > 40) return "its path passes through more than 40 symbolic links";
    const uid_t me = ::geteuid();
    if (s.st_uid != me && s.st_uid != 0)
      return "the link " + next.string() + " it passes through is owned by " + user_name(s.st_uid) + ", not by " +
             (me == 0 ? "root" : user_name(me) + " or root");
    const fs::path target = fs::read_symlink(next, ec);
    if (ec) return "";
    if (target.is_absolute()) at = "/";
    push_front(target);
  }
  return "";
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
  return check_every_step(given);
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
