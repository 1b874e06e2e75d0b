#pragma once
/// Deterministic random numbers from a seed: splitmix64, whose output is
/// fixed by its definition (unlike std::shuffle or the std distributions,
/// which differ between standard libraries). Use it for augmentation in
/// Dataset::get_seeded so a sample is the same everywhere.
///
/// Example:
///   trainyard::SplitMix64 rng(seed);
///   bool flip = rng.uniform() < 0.5;
///   int64_t x = rng.below(width - crop + 1);

#include <cstdint>

namespace trainyard {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, n).
  uint64_t below(uint64_t n) { return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64); }
  /// Uniform in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
  /// One mixing step: a well-spread hash of `value`.
  static uint64_t mix(uint64_t value) { return SplitMix64(value).next(); }

 private:
  uint64_t state_;
};

}  // namespace trainyard
