// Any bytes as a local WebDataset shard (a tar): indexed by the real
// image_datasets plugin (tar headers, GNU long names, pax records, base-256
// sizes, keys and duplicate members, labels) and its first samples read
// (JPEG and PNG headers, the pixel bound, decoding): a trainyard::Error
// naming what is wrong, or samples; never a crash, an overread or an
// allocation beyond the bounds docs/data.md states.
//
// Built two ways: with libFuzzer by scripts/fuzz.sh (TRAINYARD_FUZZ), and
// without it as shard_corpus_replay, which the suite runs over the seeds in
// tests/fuzz/corpus/shard (every file must index or fail with an Error).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include <unistd.h>

#include "plugins/library_loader.h"
#include "plugins/registry.h"
#include "trainyard/context.h"
#include "trainyard/dataset.h"
#include "trainyard/error.h"
#include "trainyard/plugin.h"

namespace {

using trainyard::host::Registry;

const Registry& plugins() {
  static const Registry registry = [] {
    Registry r;
    trainyard::host::load_plugin_folders({{FUZZ_PLUGIN_DIR, "built-in"}}, r);
    return r;
  }();
  return registry;
}

// The webdataset options: the schema's defaults, this shard, 16 classes.
trainyard::Options shard_options(const std::string& shard) {
  std::map<std::string, trainyard::Value> values;
  const auto& component = plugins().get(trainyard::host::Kind::dataset, "webdataset");
  for (const auto& spec : component.schema.specs())
    if (spec.default_value) values[spec.key] = *spec.default_value;
  values["urls"] = shard;
  values["num_classes"] = int64_t{16};
  return trainyard::Options(values);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string shard = "/tmp/trainyard-fuzz-" + std::to_string(::getpid()) + "-shard.tar";
  std::ofstream(shard, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  const auto& component = plugins().get(trainyard::host::Kind::dataset, "webdataset");
  const auto& make = std::get<trainyard::Factory<trainyard::Dataset>>(component.factory);
  trainyard::Context context;
  // The replay (not the fuzzer) says what became of each input.
  static const bool tell = std::getenv("TRAINYARD_FUZZ_TELL") != nullptr;
  try {
    const auto dataset = make(shard_options(shard), context);
    const int64_t n = std::min<int64_t>(dataset->size(), 8);
    int64_t read = 0, bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      try {
        (void)dataset->get(i);
        ++read;
      } catch (const trainyard::BadRecord& err) {
        // a damaged image or label: counted and skipped under on_bad_record: skip
        ++bad;
        if (tell) std::printf("  bad record: %s\n", err.what());
      }
    }
    if (tell)
      std::printf("indexed %lld samples; read %lld, %lld bad\n", static_cast<long long>(dataset->size()),
                  static_cast<long long>(read), static_cast<long long>(bad));
  } catch (const trainyard::Error& err) {
    if (tell) std::printf("error: %s\n", err.what());
  }
  return 0;
}
