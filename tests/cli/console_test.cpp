// The console's live line in a real terminal (tmux) of 40, 80 and 200
// columns: it fits, and nothing of it is left behind on the screen.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "support/support.h"

namespace trainyard::test {
namespace {

std::vector<std::string> screen(const std::string& session) {
  // The whole history, as the terminal shows it (wrapped lines as rows).
  const std::string text = run_command("tmux capture-pane -p -S - -t " + session).out;
  std::vector<std::string> rows;
  for (size_t start = 0; start < text.size();) {
    const size_t end = std::min(text.find('\n', start), text.size());
    rows.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return rows;
}

TEST(Console, TheLiveLineFitsTheTerminalAndLeavesNothingBehind) {
  const std::string dir = temp_dir("console");
  // Long enough for many redraws, with test values appended to the line after epoch 1.
  std::string yaml = synthetic_experiment("console", "callbacks: [{plugin: console, refresh_secs: 0.02}]\n");
  yaml.replace(yaml.find("size: 512,"), 10, "size: 60000,");
  write_file(dir + "/console.yaml", yaml);
  for (const int width : {40, 80, 200}) {
    const std::string session = "trainyard-console-" + std::to_string(::getpid()) + "-" + std::to_string(width);
    const std::string command = trainyard_binary() + " run " + dir + "/console.yaml --output-dir " + dir + "/runs-" +
                                std::to_string(width) + "; echo EXIT=$?; sleep 600";
    ASSERT_EQ(
        run_command("tmux new-session -d -s " + session + " -x " + std::to_string(width) + " -y 60 '" + command + "'")
            .exit_code,
        0);
    // While it trains: a live line, within the width (one column to spare).
    bool seen_live = false, ended = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (!ended && std::chrono::steady_clock::now() < deadline) {
      for (const auto& row : screen(session)) {
        ended = ended || row.rfind("EXIT=", 0) == 0;
        if (contains(row, "ETA ")) {
          seen_live = true;
          EXPECT_LT(row.size(), size_t(width)) << width << ": " << row;
          EXPECT_EQ(row.rfind("epoch ", 0), 0u) << width << ": " << row;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    const std::vector<std::string> rows = screen(session);
    run_command("tmux kill-session -t " + session);
    ASSERT_TRUE(ended) << width;
    EXPECT_TRUE(seen_live) << width;
    // Afterwards: no row of a live line is left, and the permanent lines are there.
    std::string all;
    for (const auto& row : rows) {
      all += row + "\n";
      EXPECT_FALSE(contains(row, "ETA ")) << width << ": a stale progress row: " << row;
      EXPECT_LE(row.size(), size_t(width)) << row;
    }
    EXPECT_TRUE(contains(all, "EXIT=0")) << all;
    EXPECT_TRUE(contains(all, "epoch 2/2 iteration")) << all;
    EXPECT_TRUE(contains(all, "epoch 2/2 done in")) << all;
  }
}

}  // namespace
}  // namespace trainyard::test
