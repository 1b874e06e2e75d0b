// nvJPEG's batched decode (nvjpegDecodeBatched) on a CUDA stream per decode
// thread, then resample.cu's kernel into the batch rows. libnvjpeg.so is
// loaded when first asked for, not linked: the plugin loads and trains with
// `decode: cpu` on a machine without it, and `decode: gpu` says what is missing.
#include <trainyard/error.h>

#include "gpu_decode.h"

#ifdef TRAINYARD_WITH_NVJPEG
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <unordered_map>

#include <ATen/ATen.h>
#include <ATen/core/CachingHostAllocator.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <nvjpeg.h>

#include "resample_launch.h"
#endif

namespace image_datasets {

#ifndef TRAINYARD_WITH_NVJPEG

std::optional<std::string> nvjpeg_unavailable() { return std::string(TRAINYARD_NVJPEG_MISSING); }
std::string nvjpeg_load_error(const std::string&) { return TRAINYARD_NVJPEG_MISSING; }

std::unique_ptr<JpegBatchDecoder> make_nvjpeg_decoder(c10::Device) {
  throw trainyard::ConfigError(
      "decode: gpu is unavailable: " + *nvjpeg_unavailable(),
      "expected a build with CUDA and nvJPEG (scripts/install-deps.sh installs PyPI's nvidia-nvjpeg)",
      "use decode: cpu, or rebuild after installing it");
}

#else

namespace {

// The entry points trainyard calls, each resolved from the library by its
// name (one list, so that the pointers and the lookups cannot drift apart).
// clang-format off
#define TRAINYARD_NVJPEG_ENTRY_POINTS(X)                                                      \
  X(GetProperty) X(CreateExV2) X(Destroy) X(GetHardwareDecoderInfo)                          \
  X(JpegStateCreate) X(JpegStateDestroy) X(JpegStreamCreate) X(JpegStreamDestroy)            \
  X(JpegStreamParseHeader) X(DecodeBatchedSupported) X(DecodeBatchedInitialize) X(DecodeBatched)              \
  X(SetDeviceMemoryPadding) X(SetPinnedMemoryPadding)
// clang-format on

struct NvJpegLibrary {
  std::string error;  ///< why the library is unusable; empty when loaded
#define TRAINYARD_NVJPEG_POINTER(name) decltype(&::nvjpeg##name) name = nullptr;
  TRAINYARD_NVJPEG_ENTRY_POINTS(TRAINYARD_NVJPEG_POINTER)
#undef TRAINYARD_NVJPEG_POINTER
};

template <class F>
void bind(void* library, const char* name, F& function, std::string& error) {
  function = reinterpret_cast<F>(dlsym(library, name));
  if (!function && error.empty()) error = std::string("it has no ") + name + " (an nvJPEG older than this build's)";
}

// TRAINYARD_NVJPEG_LIBRARY names the file; else the soname of the header's
// major version, found as any library is (the plugin's RUNPATH holds the
// torch environment's nvidia/*/lib; a package puts its lib/ on LD_LIBRARY_PATH).
std::string default_library() {
  const char* named = std::getenv("TRAINYARD_NVJPEG_LIBRARY");
  return named && *named ? std::string(named) : "libnvjpeg.so." + std::to_string(NVJPEG_VER_MAJOR);
}

NvJpegLibrary load_library(const std::string& file) {
  NvJpegLibrary n;
  void* library = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char* why = dlerror();
    n.error = "cannot load " + file + " (" + (why ? why : "dlopen failed") +
              "); expected PyPI's nvidia-nvjpeg in the torch environment (scripts/install-deps.sh), or "
              "TRAINYARD_NVJPEG_LIBRARY=/path/to/libnvjpeg.so." +
              std::to_string(NVJPEG_VER_MAJOR);
    return n;
  }
#define TRAINYARD_NVJPEG_BIND(name) bind(library, "nvjpeg" #name, n.name, n.error);
  TRAINYARD_NVJPEG_ENTRY_POINTS(TRAINYARD_NVJPEG_BIND)
#undef TRAINYARD_NVJPEG_BIND
  if (!n.error.empty()) n.error = file + ": " + n.error;
  return n;  // the library stays loaded for the process
}

const NvJpegLibrary& nvjpeg() {
  static const NvJpegLibrary library = load_library(default_library());
  return library;
}

std::string status_text(nvjpegStatus_t status) {
  switch (status) {
    case NVJPEG_STATUS_SUCCESS:
      return "success";
    case NVJPEG_STATUS_NOT_INITIALIZED:
      return "NVJPEG_STATUS_NOT_INITIALIZED";
    case NVJPEG_STATUS_INVALID_PARAMETER:
      return "NVJPEG_STATUS_INVALID_PARAMETER";
    case NVJPEG_STATUS_BAD_JPEG:
      return "NVJPEG_STATUS_BAD_JPEG";
    case NVJPEG_STATUS_JPEG_NOT_SUPPORTED:
      return "NVJPEG_STATUS_JPEG_NOT_SUPPORTED";
    case NVJPEG_STATUS_ALLOCATOR_FAILURE:
      return "NVJPEG_STATUS_ALLOCATOR_FAILURE";
    case NVJPEG_STATUS_EXECUTION_FAILED:
      return "NVJPEG_STATUS_EXECUTION_FAILED";
    case NVJPEG_STATUS_ARCH_MISMATCH:
      return "NVJPEG_STATUS_ARCH_MISMATCH";
    case NVJPEG_STATUS_INTERNAL_ERROR:
      return "NVJPEG_STATUS_INTERNAL_ERROR";
    case NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED:
      return "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED";
    case NVJPEG_STATUS_INCOMPLETE_BITSTREAM:
      return "NVJPEG_STATUS_INCOMPLETE_BITSTREAM";
  }
  return "nvJPEG status " + std::to_string(static_cast<int>(status));
}

// nvJPEG's device buffers come from LibTorch's caching allocator, so that
// they count against the same memory as the training's tensors. `context`
// is the decoder's device index (nvJPEG may call from a thread whose
// current device is another). No exception may cross nvJPEG's C frames.
// Each buffer's allocation stream is kept: the allocator gives a freed block
// back to that stream, whose later work is ordered after nvJPEG's, so a
// free on it needs no wait.
struct DeviceBlocks {
  std::mutex mutex;
  std::unordered_map<void*, cudaStream_t> allocated_on;
};
DeviceBlocks& device_blocks() {
  static auto* blocks = new DeviceBlocks;  // never destroyed: nvJPEG may free at exit
  return *blocks;
}
int device_malloc(void* context, void** ptr, size_t size, cudaStream_t stream) {
  try {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(*static_cast<const int*>(context)));
    *ptr = c10::cuda::CUDACachingAllocator::raw_alloc_with_stream(size, stream);
    std::lock_guard<std::mutex> lock(device_blocks().mutex);
    device_blocks().allocated_on[*ptr] = stream;
    return 0;
  } catch (...) {
    return 1;
  }
}
// A buffer last used on another stream than its allocation's (nvJPEG says
// which) waits for that stream first: nothing else orders the reuse.
int device_free(void* context, void* ptr, size_t, cudaStream_t stream) {
  try {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(*static_cast<const int*>(context)));
    cudaStream_t allocated_on = nullptr;
    {
      std::lock_guard<std::mutex> lock(device_blocks().mutex);
      if (const auto found = device_blocks().allocated_on.find(ptr); found != device_blocks().allocated_on.end()) {
        allocated_on = found->second;
        device_blocks().allocated_on.erase(found);
      }
    }
    if (stream && stream != allocated_on) cudaStreamSynchronize(stream);
    c10::cuda::CUDACachingAllocator::raw_delete(ptr);
    return 0;
  } catch (...) {
    return 1;
  }
}
// nvJPEG's pinned buffers from LibTorch's caching host allocator, not
// cudaHostAlloc/cudaFreeHost: cudaFreeHost waits for the whole device (a
// stall of the training's stream, and not allowed while the training thread
// captures a CUDA graph). A freed block goes back to the allocator's cache,
// reused once the work `stream` had queued is done (an event it records).
struct PinnedBlocks {
  std::mutex mutex;
  std::unordered_map<void*, at::DataPtr> live;
};
PinnedBlocks& pinned_blocks() {
  static auto* blocks = new PinnedBlocks;  // never destroyed: nvJPEG may free at exit
  return *blocks;
}
int pinned_malloc(void*, void** ptr, size_t size, cudaStream_t) {
  try {
    at::DataPtr block = at::getHostAllocator(at::kCUDA)->allocate(size);
    *ptr = block.get();
    if (!*ptr) return size == 0 ? 0 : 1;
    std::lock_guard<std::mutex> lock(pinned_blocks().mutex);
    pinned_blocks().live.emplace(*ptr, std::move(block));
    return 0;
  } catch (...) {
    return 1;
  }
}
int pinned_free(void* context, void* ptr, size_t, cudaStream_t stream) {
  try {
    at::DataPtr block;
    {
      std::lock_guard<std::mutex> lock(pinned_blocks().mutex);
      const auto found = pinned_blocks().live.find(ptr);
      if (found == pinned_blocks().live.end()) return 1;
      block = std::move(found->second);
      pinned_blocks().live.erase(found);
    }
    if (stream) {
      const auto device = static_cast<c10::DeviceIndex>(*static_cast<const int*>(context));
      at::getHostAllocator(at::kCUDA)->record_event(block.get(), block.get_context(),
                                                    c10::cuda::getStreamFromExternal(stream, device).unwrap());
    }
    return 0;  // `block` goes back to the cache here
  } catch (...) {
    return 1;
  }
}

// Buffers grown by this much more than asked (NVIDIA DALI's defaults), so
// that a slightly larger photograph than the last does not free and
// allocate again.
constexpr size_t kDevicePadding = size_t(16) << 20, kPinnedPadding = size_t(8) << 20;

// At most this many bytes of whole-size decoded pixels at once per decode
// thread (a batch of ImageNet-sized photographs, 256 x 500 x 375 x 3, is one
// group; 12-megapixel photographs go 3 at a time). The caching allocator
// keeps each decode stream's freed blocks for that stream: this bounds what
// the training's stream cannot use.
constexpr size_t kMaxDecodedBytes = size_t(128) << 20;
constexpr size_t kAlignment = 256;
size_t aligned(size_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

class NvJpegDecoder : public JpegBatchDecoder {
 public:
  explicit NvJpegDecoder(c10::Device device) : device_(device), device_index_(device.index()) {
    const NvJpegLibrary& n = nvjpeg();
    c10::cuda::CUDAGuard guard(device_);
    nvjpegDevAllocatorV2_t device_allocator{device_malloc, device_free, &device_index_};
    nvjpegPinnedAllocatorV2_t pinned_allocator{pinned_malloc, pinned_free, &device_index_};
    // Chroma upsampled by interpolation, as libjpeg's (the CPU path's) fancy
    // upsampling; a release that refuses the flag decodes without it.
    const auto create = [&](nvjpegBackend_t backend, nvjpegHandle_t* handle) {
      nvjpegStatus_t status = n.CreateExV2(backend, &device_allocator, &pinned_allocator,
                                           NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION, handle);
      if (status != NVJPEG_STATUS_SUCCESS)
        status = n.CreateExV2(backend, &device_allocator, &pinned_allocator, NVJPEG_FLAGS_DEFAULT, handle);
      if (status == NVJPEG_STATUS_SUCCESS) {  // padding is an optimisation: a refusal changes nothing else
        n.SetDeviceMemoryPadding(kDevicePadding, *handle);
        n.SetPinnedMemoryPadding(kPinnedPadding, *handle);
      }
      return status;
    };
    // The JPEG engines where the GPU has them (ARCH_MISMATCH or
    // NOT_SUPPORTED elsewhere), and the CUDA backend for what they refuse.
    if (const nvjpegStatus_t hardware = create(NVJPEG_BACKEND_HARDWARE, &hardware_);
        hardware != NVJPEG_STATUS_SUCCESS) {
      hardware_ = nullptr;
      no_hardware_ = "no hardware backend on this GPU (" + status_text(hardware) + ")";
    }
    // GPU-assisted Huffman decoding (for batches of more than 50 baseline
    // JPEGs, nvjpeg.h says): the decode threads are the scarce part.
    nvjpegStatus_t status = create(NVJPEG_BACKEND_GPU_HYBRID, &cuda_);
    if (status != NVJPEG_STATUS_SUCCESS) status = create(NVJPEG_BACKEND_DEFAULT, &cuda_);
    if (status != NVJPEG_STATUS_SUCCESS) {
      if (hardware_) n.Destroy(hardware_);
      throw trainyard::ConfigError(
          "decode: gpu: nvJPEG cannot start on " + device_.str() + " (" + status_text(status) + ")",
          "expected an nvJPEG that runs on this GPU and driver", "use decode: cpu");
    }
    if (hardware_ && n.GetHardwareDecoderInfo(hardware_, &engines_, &cores_per_engine_) == NVJPEG_STATUS_SUCCESS &&
        engines_ == 0) {
      n.Destroy(hardware_);
      hardware_ = nullptr;
      no_hardware_ = "this GPU has no JPEG engines";
    }
    int major = 0, minor = 0, patch = 0;
    n.GetProperty(MAJOR_VERSION, &major), n.GetProperty(MINOR_VERSION, &minor), n.GetProperty(PATCH_LEVEL, &patch);
    version_ = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
  }

  ~NvJpegDecoder() override {
    const NvJpegLibrary& n = nvjpeg();
    try {
      c10::cuda::CUDAGuard guard(device_);
      for (auto& slot : slots_) {
        slot->stream.synchronize();
        if (slot->parsed) n.JpegStreamDestroy(slot->parsed);
        if (slot->hardware_state) n.JpegStateDestroy(slot->hardware_state);
        if (slot->cuda_state) n.JpegStateDestroy(slot->cuda_state);
      }
      if (hardware_) n.Destroy(hardware_);
      if (cuda_) n.Destroy(cuda_);
    } catch (...) {
      // At exit the CUDA context may be gone already: nothing left to free.
    }
  }

  c10::Device device() const override { return device_; }

  std::string description() const override {
    const std::string backend =
        hardware_ ? "hardware backend, " + std::to_string(engines_) + " JPEG engines, CUDA backend for what they refuse"
                  : "CUDA backend; " + no_hardware_;
    return "nvJPEG " + version_ + " (" + backend + ") on " + device_.str();
  }

  at::Tensor decode(const std::vector<GpuJob>& jobs, int64_t rows, cv::Size out, const CpuRow& cpu_row) const override {
    const NvJpegLibrary& n = nvjpeg();
    std::vector<std::optional<std::string> > refused(jobs.size());
    c10::cuda::CUDAGuard guard(device_);
    std::optional<Lease> lease;
    try {
      lease.emplace(*this);
    } catch (const std::exception& e) {
      return decode_on_cpu(jobs, rows, out, cpu_row, std::string("no nvJPEG decode slot (") + e.what() + ")");
    }
    Slot& slot = *lease->slot;
    c10::cuda::CUDAStreamGuard on_stream(slot.stream);  // every allocation and copy below on the slot's stream
    at::Tensor batch = at::empty({rows, 3, out.height, out.width}, at::TensorOptions(at::kByte).device(device_));

    // Which backend takes each JPEG: the engines where they support it.
    std::vector<size_t> on_hardware, on_cuda;
    for (size_t k = 0; k < jobs.size(); ++k) {
      if (hardware_) {
        const nvjpegStatus_t parsed = n.JpegStreamParseHeader(hardware_, jobs[k].data, jobs[k].size, slot.parsed);
        int unsupported = 1;
        if (parsed == NVJPEG_STATUS_SUCCESS &&
            n.DecodeBatchedSupported(hardware_, slot.parsed, &unsupported) == NVJPEG_STATUS_SUCCESS &&
            unsupported == 0) {
          on_hardware.push_back(k);
          continue;
        }
      }
      on_cuda.push_back(k);
    }

    // The compressed bytes, staged in pinned memory for the copies nvJPEG
    // makes on the stream: one buffer for the call, reused by the next.
    size_t staged = 0;
    for (const GpuJob& job : jobs) staged += aligned(job.size);
    if (!slot.staging.defined() || static_cast<size_t>(slot.staging.numel()) < staged)
      slot.staging = at::empty({static_cast<int64_t>(staged)}, at::TensorOptions(at::kByte).pinned_memory(true));
    std::vector<const unsigned char*> data(jobs.size());
    uint8_t* stage = slot.staging.data_ptr<uint8_t>();
    for (size_t k = 0, at = 0; k < jobs.size(); ++k) {
      std::memcpy(stage + at, jobs[k].data, jobs[k].size);
      data[k] = stage + at;
      at += aligned(jobs[k].size);
    }

    Pass pass{*this, slot, jobs, data, batch, out, refused, {}};
    pass.run(hardware_, slot.hardware_state, on_hardware, "hardware");
    pass.run(cuda_, slot.cuda_state, on_cuda, "CUDA");
    fill_cpu_rows(batch, jobs, refused, cpu_row);  // on the slot's stream, not the legacy default one
    // Complete before the batch leaves: this decode thread waits here, the
    // training loop's stream never does (the loader hands the batch over).
    slot.stream.synchronize();
    return batch;
  }

 private:
  // Every row through the CPU path (a decode slot could not be made): on a
  // pool stream, complete when this returns, as decode()'s batches are.
  at::Tensor decode_on_cpu(const std::vector<GpuJob>& jobs, int64_t rows, cv::Size out, const CpuRow& cpu_row,
                           const std::string& why) const {
    const c10::cuda::CUDAStream stream = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device_.index());
    c10::cuda::CUDAStreamGuard on_stream(stream);
    at::Tensor batch = at::empty({rows, 3, out.height, out.width}, at::TensorOptions(at::kByte).device(device_));
    fill_cpu_rows(batch, jobs, std::vector<std::optional<std::string> >(jobs.size(), why), cpu_row);
    stream.synchronize();
    return batch;
  }

  // What one decode thread uses at a time: a stream, nvJPEG's per-thread
  // states, the header parser, the pinned staging buffer.
  struct Slot {
    c10::cuda::CUDAStream stream;
    nvjpegJpegState_t hardware_state = nullptr, cuda_state = nullptr;
    nvjpegJpegStream_t parsed = nullptr;
    at::Tensor staging;  ///< the compressed bytes of a call, pinned
    explicit Slot(c10::cuda::CUDAStream s) : stream(s) {}
  };

  // A slot taken for one decode() call; a thread finding none free makes one.
  struct Lease {
    const NvJpegDecoder& owner;
    Slot* slot = nullptr;
    explicit Lease(const NvJpegDecoder& o) : owner(o) {
      {
        std::lock_guard<std::mutex> lock(owner.mutex_);
        if (!owner.free_.empty()) {
          slot = owner.free_.back();
          owner.free_.pop_back();
          return;
        }
      }
      auto made = owner.make_slot();
      std::lock_guard<std::mutex> lock(owner.mutex_);
      owner.slots_.push_back(std::move(made));
      slot = owner.slots_.back().get();
    }
    ~Lease() {
      // Nothing queued on the stream may outlive this call's buffers (an
      // exception left some): the next user of the slot starts clean.
      try {
        slot->stream.synchronize();
      } catch (...) {}
      std::lock_guard<std::mutex> lock(owner.mutex_);
      owner.free_.push_back(slot);
    }
  };

  std::unique_ptr<Slot> make_slot() const {
    const NvJpegLibrary& n = nvjpeg();
    auto slot = std::make_unique<Slot>(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device_.index()));
    const auto check = [](nvjpegStatus_t status, const char* what) {
      if (status != NVJPEG_STATUS_SUCCESS)
        throw trainyard::Error(std::string("decode: gpu: nvJPEG ") + what + " failed (" + status_text(status) + ")");
    };
    try {
      check(n.JpegStateCreate(cuda_, &slot->cuda_state), "nvjpegJpegStateCreate");
      if (hardware_) {
        check(n.JpegStateCreate(hardware_, &slot->hardware_state), "nvjpegJpegStateCreate (hardware)");
        check(n.JpegStreamCreate(hardware_, &slot->parsed), "nvjpegJpegStreamCreate");
      }
    } catch (...) {  // what was made is not leaked
      if (slot->parsed) n.JpegStreamDestroy(slot->parsed);
      if (slot->hardware_state) n.JpegStateDestroy(slot->hardware_state);
      if (slot->cuda_state) n.JpegStateDestroy(slot->cuda_state);
      throw;
    }
    return slot;
  }

  // One decode() call's work on its slot's stream: the JPEGs of a backend in
  // groups of at most kMaxDecodedBytes, each decoded whole-size into planar
  // RGB, then cropped, resized and flipped into its row by one kernel launch.
  struct Pass {
    const NvJpegDecoder& decoder;
    Slot& slot;
    const std::vector<GpuJob>& jobs;
    const std::vector<const unsigned char*>& data;
    at::Tensor& batch;
    cv::Size out;
    std::vector<std::optional<std::string> >& refused;
    std::vector<at::Tensor> alive;  ///< decoded pixels and job tables, until the stream is synchronized

    void run(nvjpegHandle_t handle, nvjpegJpegState_t state, const std::vector<size_t>& picked, const char* backend) {
      for (size_t start = 0; start < picked.size();) {
        size_t end = start, bytes = 0;
        while (end < picked.size()) {
          const GpuJob& job = jobs[picked[end]];
          const size_t image = aligned(size_t(3) * job.full.width * job.full.height);
          if (end > start && bytes + image > kMaxDecodedBytes) break;
          bytes += image, ++end;
        }
        const std::vector<size_t> members(picked.begin() + start, picked.begin() + end);
        try {
          group(handle, state, members, bytes, backend);
        } catch (const std::exception& e) {
          // Out of device memory, a kernel that did not start: the CPU path
          // decodes the group rather than the run stopping.
          for (size_t k : members) refused[k] = std::string("the GPU path failed on its group: ") + e.what();
        }
        start = end;
      }
    }

    void group(nvjpegHandle_t handle, nvjpegJpegState_t state, const std::vector<size_t>& picked, size_t bytes,
               const char* backend) {
      const NvJpegLibrary& n = nvjpeg();
      const c10::Device device = decoder.device_;
      at::Tensor decoded = at::empty({static_cast<int64_t>(bytes)}, at::TensorOptions(at::kByte).device(device));
      alive.push_back(decoded);
      std::vector<nvjpegImage_t> images(picked.size());
      std::vector<const unsigned char*> inputs(picked.size());
      std::vector<size_t> lengths(picked.size());
      std::vector<ResampleJob> table(picked.size());
      const size_t row_bytes = size_t(3) * out.width * out.height;
      uint8_t* base = decoded.data_ptr<uint8_t>();
      for (size_t i = 0, at = 0; i < picked.size(); ++i) {
        const GpuJob& job = jobs[picked[i]];
        const size_t plane = static_cast<size_t>(job.full.width) * job.full.height;
        std::memset(&images[i], 0, sizeof(nvjpegImage_t));
        for (int c = 0; c < 3; ++c) {
          images[i].channel[c] = base + at + c * plane;
          images[i].pitch[c] = static_cast<size_t>(job.full.width);
        }
        inputs[i] = data[picked[i]];
        lengths[i] = job.size;
        table[i] = ResampleJob{base + at,      batch.data_ptr<uint8_t>() + static_cast<size_t>(job.row) * row_bytes,
                               job.full.width, job.full.height,
                               job.hflip,      job.vflip,
                               job.x,          job.y,
                               job.w,          job.h};
        at += aligned(3 * plane);
      }
      const cudaStream_t stream = slot.stream.stream();
      nvjpegStatus_t status =
          n.DecodeBatchedInitialize(handle, state, static_cast<int>(picked.size()), 1, NVJPEG_OUTPUT_RGB);
      if (status == NVJPEG_STATUS_SUCCESS)
        status = n.DecodeBatched(handle, state, inputs.data(), lengths.data(), images.data(), stream);
      if (status != NVJPEG_STATUS_SUCCESS) {
        // One JPEG it cannot decode fails the group: all of it goes through
        // the CPU path, which decodes them or names the damaged one.
        for (size_t k : picked)
          refused[k] =
              std::string("nvJPEG's ") + backend + " backend failed on its group (" + status_text(status) + ")";
        return;
      }
      at::Tensor table_host = at::empty({static_cast<int64_t>(table.size() * sizeof(ResampleJob))},
                                        at::TensorOptions(at::kByte).pinned_memory(true));
      std::memcpy(table_host.data_ptr(), table.data(), table.size() * sizeof(ResampleJob));
      at::Tensor table_device = table_host.to(device, /*non_blocking=*/true);  // on the slot's stream
      alive.push_back(table_host), alive.push_back(table_device);
      if (const char* error = launch_resample(reinterpret_cast<const ResampleJob*>(table_device.data_ptr()),
                                              static_cast<int>(table.size()), out.width, out.height, stream))
        throw trainyard::Error(std::string("decode: gpu: the crop-and-resize kernel did not start: ") + error);
    }
  };

  c10::Device device_;
  int device_index_;  ///< nvJPEG's allocator context
  nvjpegHandle_t hardware_ = nullptr, cuda_ = nullptr;
  std::string no_hardware_;  ///< why the JPEG engines are not used
  unsigned engines_ = 0, cores_per_engine_ = 0;
  std::string version_;
  mutable std::mutex mutex_;
  mutable std::vector<std::unique_ptr<Slot> > slots_;
  mutable std::vector<Slot*> free_;
};

}  // namespace

std::optional<std::string> nvjpeg_unavailable() {
  const NvJpegLibrary& n = nvjpeg();
  if (n.error.empty()) return std::nullopt;
  return n.error;
}

std::string nvjpeg_load_error(const std::string& file) { return load_library(file).error; }

std::unique_ptr<JpegBatchDecoder> make_nvjpeg_decoder(c10::Device device) {
  if (auto why = nvjpeg_unavailable())
    throw trainyard::ConfigError("decode: gpu is unavailable: " + *why, "expected nvJPEG's library on this machine",
                                 "use decode: cpu");
  if (!device.is_cuda())
    throw trainyard::ConfigError("decode: gpu on " + device.str(), "expected a run on a CUDA device",
                                 "use decode: cpu (or auto) for a run on the CPU");
  if (!device.has_index()) device = c10::Device(c10::DeviceType::CUDA, c10::cuda::current_device());
  return std::make_unique<NvJpegDecoder>(device);
}

#endif

}  // namespace image_datasets
