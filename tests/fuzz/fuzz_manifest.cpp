// Any bytes as a checkpoint's manifest: verification passes or throws
// trainyard::Error, never crashes (the checkpoint file itself is fixed).
#include "fake_registry.h"
#include "train/checkpoint.h"
#include "trainyard/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string checkpoint = [] {
    std::string p = fuzz::scratch("ckpt-e0001-i00000001.pt");
    const std::string bytes = "not really a checkpoint, but bytes with a size and a hash";
    fuzz::write(p, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    return p;
  }();
  fuzz::write(trainyard::host::manifest_path(checkpoint), data, size);
  try {
    trainyard::host::verify_checkpoint(checkpoint);
  } catch (const trainyard::Error&) {}
  return 0;
}
