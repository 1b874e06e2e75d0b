#pragma once
// How messages show a tensor shape: [16, 1, 28, 28].
#include <string>

#include <c10/util/ArrayRef.h>

namespace trainyard::host {

/// "[16, 1, 28, 28]" (a std::vector<int64_t> converts too); "[]" for a scalar.
std::string shape_text(c10::IntArrayRef shape);

}  // namespace trainyard::host
