// The console's live line in a real terminal (tmux) of 40, 80 and 200
// columns: it fits, and nothing of it is left behind on the screen.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "support/support.h"

namespace trainyard::test {
namespace {

// Each terminal gets a tmux server of its own (-L: its own socket; -f /dev/null:
// no user configuration). With one shared server, killing the last session makes
// the server exit, and a new-session at that moment can reach the exiting server
// and fail ("server exited unexpectedly"): CI saw exactly that between widths.
std::string tmux(const std::string& server, const std::string& args) {
  return "tmux -L " + server + " -f /dev/null " + args;
}

std::vector<std::string> screen(const std::string& server) {
  // The whole history, as the terminal shows it (wrapped lines as rows).
  const std::string text = run_command(tmux(server, "capture-pane -p -S - -t main")).out;
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
    const std::string server = "trainyard-console-" + std::to_string(::getpid()) + "-" + std::to_string(width);
    const std::string command = trainyard_binary() + " run " + dir + "/console.yaml --output-dir " + dir + "/runs-" +
                                std::to_string(width) + "; echo EXIT=$?; sleep 600";
    // Starting the terminal is the test's scaffolding, not what it checks: a
    // failed start (tmux's own, under load) is tried twice more, and what tmux
    // said each time is kept for the failure message.
    std::string start_errors;
    bool started = false;
    for (int attempt = 0; attempt < 3 && !started; ++attempt) {
      const CommandResult r =
          run_command(tmux(server, "new-session -d -s main -x " + std::to_string(width) + " -y 60 '" + command + "'"));
      started = r.exit_code == 0;
      if (!started) {
        start_errors += "exit " + std::to_string(r.exit_code) + ": " + r.err + "\n";
        run_command(tmux(server, "kill-server"));
        std::this_thread::sleep_for(std::chrono::seconds(1));
      }
    }
    ASSERT_TRUE(started) << width << ": tmux did not start:\n" << start_errors;
    // While it trains: a live line, within the width (one column to spare).
    bool seen_live = false, ended = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (!ended && std::chrono::steady_clock::now() < deadline) {
      for (const auto& row : screen(server)) {
        ended = ended || row.rfind("EXIT=", 0) == 0;
        if (contains(row, "ETA ")) {
          seen_live = true;
          EXPECT_LT(row.size(), size_t(width)) << width << ": " << row;
          EXPECT_EQ(row.rfind("epoch ", 0), 0u) << width << ": " << row;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    const std::vector<std::string> rows = screen(server);
    run_command(tmux(server, "kill-server"));
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
