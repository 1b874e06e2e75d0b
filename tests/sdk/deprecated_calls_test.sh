#!/usr/bin/env bash
# The SDK 0.x option calls (Schema::add, Options::get<T>) compile, with a
# deprecation warning that names the TypedSchema call to use; the typed API
# and the SDK's own headers compile without one.
set -euo pipefail
cxx=$1 include=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
check() {  # FILE: -fsyntax-only against the SDK headers
  LC_ALL=C "$cxx" -std=c++20 -fsyntax-only -Wall -Wextra -I"$include" "$1" 2>&1
}
cat > "$work/old.cpp" <<'CPP'
#include <trainyard/options.h>
void declare(trainyard::Schema& s) { s.add("lr", 0.1, "learning rate"); }
double read(const trainyard::Options& o) { return o.get<double>("lr"); }
CPP
cat > "$work/typed.cpp" <<'CPP'
#include <trainyard/options.h>
struct O { double lr = 0; std::vector<int64_t> sizes; std::string file; };
O read(const trainyard::Options& o) {
  trainyard::TypedSchema<O> s;
  s.add("lr", &O::lr, 0.1, "learning rate").min(0.0);
  s.add("sizes", &O::sizes, {1, 2}, "sizes");
  s.add_path("file", &O::file, "", "a file");
  return s.bind(o);
}
CPP
out=$(check "$work/old.cpp")
for expected in "trainyard::Schema::add(const std::string&, double, const std::string&)' is deprecated" \
                "declare options with trainyard::TypedSchema<T>::add(key, &T::field" \
                "trainyard::Options::get(const std::string&) const [with T = double" \
                "read options with trainyard::TypedSchema<T>::bind(options)"; do
  grep -qF -- "$expected" <<< "$out" || { echo "FAIL: no deprecation warning with '$expected':"; echo "$out"; exit 1; }
done
out=$(check "$work/typed.cpp")
[ -z "$out" ] || { echo "FAIL: the typed API warns:"; echo "$out"; exit 1; }
echo "0.x option calls deprecated (warning names TypedSchema); the typed API compiles cleanly"
