#pragma once
// Durations the host measures and reports (checkpoint blocking, throughput,
// collectives' time), on the steady clock.
#include <chrono>

namespace trainyard::host {

/// Seconds since `t0`.
inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace trainyard::host
