#pragma once
// The error a component's own code raised: a crash, not bad input.
#include "trainyard/error.h"

namespace trainyard::host {

/// A component threw while it was built or the loop ran (exit code 1); the
/// message names the component and its library (train/guard.h's guarded()).
class ComponentFailure : public Error {
 public:
  using Error::Error;
};

}  // namespace trainyard::host
