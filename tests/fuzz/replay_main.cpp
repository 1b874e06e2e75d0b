// Without libFuzzer: runs LLVMFuzzerTestOneInput once per file named on the
// command line (the seed corpus), so the suite replays the seeds with the
// ordinary build; the target prints one line per input (what it became).
// With --expect FILE (lines "NAME<TAB>TEXT"), each input named there must
// print TEXT. Prints "N inputs replayed"; exit 1 when an expectation failed,
// and a crash ends the process.
#include <unistd.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

// What the target printed for one input (its stdout, captured in a pipe-less
// way: a temporary file put in place of stdout).
std::string run_captured(const std::vector<char>& bytes) {
  std::fflush(stdout);
  char path[] = "/tmp/trainyard-replay-XXXXXX";
  const int fd = ::mkstemp(path);
  const int saved = ::dup(STDOUT_FILENO);
  ::dup2(fd, STDOUT_FILENO);
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  std::fflush(stdout);
  ::dup2(saved, STDOUT_FILENO);
  ::close(saved);
  ::close(fd);
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ::unlink(path);
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  setenv("TRAINYARD_FUZZ_TELL", "1", 1);
  std::map<std::string, std::string> expected;
  int first = 1;
  if (argc > 2 && std::string(argv[1]) == "--expect") {
    std::ifstream in(argv[2]);
    for (std::string line; std::getline(in, line);)
      if (const size_t tab = line.find('\t'); tab != std::string::npos && line[0] != '#')
        expected[line.substr(0, tab)] = line.substr(tab + 1);
    first = 3;
  }
  int replayed = 0, failed = 0;
  for (int i = first; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "error: %s: cannot read\n", argv[i]);
      return 2;
    }
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string said = run_captured(bytes);
    const std::string name = std::string(argv[i]).substr(std::string(argv[i]).find_last_of('/') + 1);
    std::printf("%s: %s", name.c_str(), said.c_str());
    if (const auto it = expected.find(name); it != expected.end() && said.find(it->second) == std::string::npos) {
      std::printf("  FAILED: expected '%s'\n", it->second.c_str());
      ++failed;
    }
    ++replayed;
  }
  std::printf("%d inputs replayed, %d against expectations failed\n", replayed, failed);
  return replayed == 0 ? 2 : failed ? 1 : 0;
}
