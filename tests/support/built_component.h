#pragma once
// One built-in component built as the host builds it from an experiment: its
// schema's defaults, the options given, and a context whose dataset has
// `classes` classes (and samples of `sample_shape`). For tests that call a
// loss, meter or network directly.
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "plugins/registry.h"
#include "support/support.h"

namespace trainyard::test {

template <class T>
std::shared_ptr<T> build_builtin(host::Kind kind, const std::string& plugin, std::map<std::string, Value> set,
                                 int64_t classes = 0, std::vector<int64_t> sample_shape = {}) {
  const host::Component& c = builtin_registry().get(kind, plugin);
  std::map<std::string, Value> values;
  for (const auto& spec : c.schema.specs())
    if (spec.default_value) values[spec.key] = *spec.default_value;
  for (auto& [k, v] : set) values[k] = v;
  Context context;
  context.dataset.num_classes = classes;
  context.dataset.sample_shape = std::move(sample_shape);
  return std::get<Factory<T>>(c.factory)(Options(values), context);
}

}  // namespace trainyard::test
