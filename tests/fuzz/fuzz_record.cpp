// Any bytes as an LMDB record or a metadata entry: decoded, or a
// trainyard::BadRecord / trainyard::Error, never a crash or an overread.
#include <cstdint>
#include <string>

#include "trainyard/error.h"
#include "trainyard/record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    trainyard::Record r = trainyard::decode_record(data, size);
    (void)trainyard::encode_record(r);  // what decoded must encode again
  } catch (const trainyard::Error&) {}
  try {
    (void)trainyard::decode_metadata(std::string(reinterpret_cast<const char*>(data), size));
  } catch (const trainyard::Error&) {}
  return 0;
}
