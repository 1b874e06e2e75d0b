#include "data/normalize.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "trainyard/error.h"

namespace trainyard::host {
namespace {

// Per-channel factors of x -> x * scale + shift on raw 0..255 values.
struct Affine {
  std::vector<float> scale, shift;
};

Affine affine(int64_t channels, const InputNormalization& n) {
  const bool plain = n.mean.empty() && n.std.empty();
  if (!plain && (static_cast<int64_t>(n.mean.size()) != channels || static_cast<int64_t>(n.std.size()) != channels))
    throw ConfigError("input_normalization has " + std::to_string(n.mean.size()) + " means and " +
                          std::to_string(n.std.size()) + " stds for inputs of " + std::to_string(channels) +
                          " channels",
                      "one mean and one std per channel", "check the dataset's mean and std against its color setting");
  Affine a;
  for (int64_t c = 0; c < channels; ++c) {
    const double mean = plain ? 0.0 : n.mean[size_t(c)], std = plain ? 1.0 : n.std[size_t(c)];
    if (!(std > 0))
      throw ConfigError("input_normalization std " + std::to_string(std) + " for channel " + std::to_string(c),
                        "a positive std", "");
    a.scale.push_back(static_cast<float>(1.0 / (255.0 * std)));
    a.shift.push_back(static_cast<float>(-mean / std));
  }
  return a;
}

// The CPU path: one table lookup per value, no temporary float tensor.
// `inner` is how many consecutive values share a channel (H*W for NCHW, 1
// for channels-last), `channels` how often the channel cycles.
void lookup(const uint8_t* in, float* out, int64_t numel, int64_t channels, int64_t inner, const Affine& a) {
  std::vector<float> table(static_cast<size_t>(channels) * 256);
  for (int64_t c = 0; c < channels; ++c)
    for (int v = 0; v < 256; ++v)
      table[size_t(c * 256 + v)] = static_cast<float>(v) * a.scale[size_t(c)] + a.shift[size_t(c)];
  const int64_t run = inner;  // values in a row with one channel
  const int64_t runs = numel / run;
  at::parallel_for(0, runs, std::max<int64_t>(1, (1 << 16) / run), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* t = table.data() + (r % channels) * 256;
      const uint8_t* i = in + r * run;
      float* o = out + r * run;
      for (int64_t k = 0; k < run; ++k) o[k] = t[i[k]];
    }
  });
}

// The factors as {1, C, 1, ...} float tensors on `device`, copied there once
// per device and normalization: a copy from pageable host memory at every
// batch would wait for the device's queue (cudaMemcpy from pageable memory
// is synchronous with the host).
std::pair<at::Tensor, at::Tensor> factors_on(const c10::Device& device, int64_t dims, const Affine& a) {
  using Key = std::tuple<std::string, int64_t, std::vector<float>, std::vector<float>>;
  static std::mutex mutex;
  // Never destroyed: device tensors freed by a static destructor would meet a CUDA runtime already unloaded.
  static auto* made = new std::map<Key, std::pair<at::Tensor, at::Tensor>>;
  Key key{device.str(), dims, a.scale, a.shift};
  std::lock_guard<std::mutex> lock(mutex);
  if (const auto found = made->find(key); found != made->end()) return found->second;
  std::vector<int64_t> shape(static_cast<size_t>(dims), 1);
  shape[1] = static_cast<int64_t>(a.scale.size());
  auto factors = std::make_pair(at::tensor(a.scale, at::kFloat).view(shape).to(device),
                                at::tensor(a.shift, at::kFloat).view(shape).to(device));
  // Complete before any thread's stream reads them (a copy from pageable
  // memory may still be in flight when it returns).
  if (!device.is_cpu()) c10::impl::VirtualGuardImpl(device.type()).getStream(device).synchronize();
  return made->emplace(std::move(key), std::move(factors)).first->second;
}

}  // namespace

at::Tensor normalize_pixels(const at::Tensor& pixels, const InputNormalization& normalization) {
  if (pixels.scalar_type() != at::kByte || pixels.dim() < 2)
    throw ConfigError("a batch of " + std::string(c10::toString(pixels.scalar_type())) + " inputs with " +
                          std::to_string(pixels.dim()) + " dimensions from a dataset that declares input_normalization",
                      "uint8 inputs {N, C, ...}", "return uint8 pixels, or no input_normalization");
  const int64_t channels = pixels.size(1);
  const Affine a = affine(channels, normalization);
  const bool channels_last =
      pixels.dim() == 4 && !pixels.is_contiguous() && pixels.is_contiguous(at::MemoryFormat::ChannelsLast);
  if (pixels.device().is_cpu() && (pixels.is_contiguous() || channels_last)) {
    at::Tensor out = at::empty(pixels.sizes(), pixels.options().dtype(at::kFloat),
                               channels_last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous);
    const int64_t inner = channels_last ? 1 : (channels == 0 ? 1 : pixels[0][0].numel());
    if (pixels.numel() > 0)
      lookup(pixels.const_data_ptr<uint8_t>(), out.data_ptr<float>(), pixels.numel(), channels, inner, a);
    return out;
  }
  const auto [scale, shift] = factors_on(pixels.device(), pixels.dim(), a);
  // to(kFloat) keeps the memory format; addcmul writes the result in one kernel.
  return at::addcmul(shift, pixels.to(at::kFloat), scale);
}

}  // namespace trainyard::host
