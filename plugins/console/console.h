#pragma once
#include <memory>
#include <string>
#include <vector>

#include <trainyard/callback.h>
#include <trainyard/context.h>
#include <trainyard/options.h>

namespace console {

trainyard::Schema schema();
std::shared_ptr<trainyard::Callback> make(const trainyard::Options& options, const trainyard::Context& context);

/// One piece of a progress line: its text, its priority (0 is kept first),
/// and for the bar, the fraction done (its text is drawn to fit).
struct Part {
  std::string text;
  int priority = 0;
  double bar_fraction = -1;
};
/// The parts that fit in `width` columns (less one), in their order.
std::string fit_line(const std::vector<Part>& parts, int width);
/// The terminal's columns (TIOCGWINSZ on stdout), else $COLUMNS, else 80.
int terminal_width();

}  // namespace console
