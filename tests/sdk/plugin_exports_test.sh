#!/usr/bin/env bash
# Every plugin library in the given folders (built by trainyard_add_plugin())
# exports exactly one symbol, trainyard_plugin_entry: no std:: or torch
# template instance leaks into the dynamic symbol table.
set -euo pipefail
count=0
for dir in "$@"; do
  for lib in "$dir"/*.so; do
    [ -e "$lib" ] || { echo "FAIL: no plugin library in $dir"; exit 1; }
    exported=$(nm -D --defined-only "$lib" | awk '{ print $NF }' | sort)
    if [ "$exported" != "trainyard_plugin_entry" ]; then
      echo "FAIL: $lib exports more than trainyard_plugin_entry:"
      nm -D --defined-only -C "$lib" | head -20
      exit 1
    fi
    count=$((count + 1))
  done
done
echo "plugin exports: $count libraries export only trainyard_plugin_entry"
