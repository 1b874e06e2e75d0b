// How the executables are linked: libstdc++ is the first library the
// dynamic loader searches, so that std:: symbols bind to it even when a
// LibTorch build exports copies of its own (torch 2.11's libtorch.so exports
// 64 std::filesystem symbols; binding to them crashed remove_all).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "support/support.h"

namespace trainyard::test {
namespace {

// The DT_NEEDED entries of an ELF file, in order.
std::vector<std::string> needed(const std::string& file) {
  const auto r = run_command("readelf -d '" + file + "'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> libraries;
  for (const auto& line : nonempty_lines(r.out)) {
    const size_t open = line.find("Shared library: ["), close = line.rfind(']');
    if (line.find("(NEEDED)") != std::string::npos && open != std::string::npos && close != std::string::npos)
      libraries.push_back(line.substr(open + 17, close - open - 17));
  }
  return libraries;
}

TEST(LinkOrder, LibstdcxxIsSearchedBeforeLibTorchByTheExecutables) {
  // The host, and this test program (as the fuzz targets, linked with the same flags).
  for (const std::string& binary : {trainyard_binary(), std::filesystem::read_symlink("/proc/self/exe").string()}) {
    const auto libraries = needed(binary);
    ASSERT_FALSE(libraries.empty()) << binary;
    EXPECT_EQ(libraries.front(), "libstdc++.so.6") << binary;
    bool torch = false;
    for (const auto& l : libraries) torch = torch || l.rfind("libtorch", 0) == 0;
    EXPECT_TRUE(torch) << binary << " links no LibTorch library: the check would prove nothing";
  }
}

}  // namespace
}  // namespace trainyard::test
