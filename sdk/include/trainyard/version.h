#pragma once
/// SDK version and build fingerprint.
///
/// The SDK has one version, MAJOR.MINOR.PATCH (TRAINYARD_VERSION, "1.5.0").
/// The API number is its MAJOR.MINOR: SDK 1.0.x is API 1.0. Every plugin's
/// entry record carries both (docs/sdk-changes.md tells the history: the
/// pre-1.0 SDK 0.x called itself API 1.1 to 1.4).
///
/// A plugin is loaded only when its entry record is a 1.0 record (not a 0.x
/// one), its API major equals the host's, its API minor is not newer than the
/// host's, and its build fingerprint equals the host's
/// (same compiler family and major, C++11 ABI flag, LibTorch version, the CUDA
/// version LibTorch was built with, and whether c10d's NCCL backend is in).
/// The fingerprint exists because the plugin boundary passes C++ objects
/// (torch::Tensor, torch::nn::Module): a matching version number alone cannot
/// make that safe.
///
/// Example:
///   std::printf("%s\n", TRAINYARD_FINGERPRINT);  // gcc-12;cxx11abi=1;torch=2.15.0;cuda=13.2;nccl=1

#include <torch/version.h>
#include <cstddef>  // defines _GLIBCXX_USE_CXX11_ABI

#define TRAINYARD_VERSION_MAJOR 1
#define TRAINYARD_VERSION_MINOR 5
#define TRAINYARD_VERSION_PATCH 0
#define TRAINYARD_VERSION "1.5.0"
/// The API number: the SDK version's major and minor.
#define TRAINYARD_API_MAJOR TRAINYARD_VERSION_MAJOR
#define TRAINYARD_API_MINOR TRAINYARD_VERSION_MINOR

#define TRAINYARD_STR_(x) #x
#define TRAINYARD_STR(x) TRAINYARD_STR_(x)

#if defined(__clang__)
#define TRAINYARD_COMPILER "clang-" TRAINYARD_STR(__clang_major__)
#elif defined(__GNUC__)
#define TRAINYARD_COMPILER "gcc-" TRAINYARD_STR(__GNUC__)
#else
#define TRAINYARD_COMPILER "unknown"
#endif

#if defined(_GLIBCXX_USE_CXX11_ABI)
#define TRAINYARD_CXX11_ABI TRAINYARD_STR(_GLIBCXX_USE_CXX11_ABI)
#else
#define TRAINYARD_CXX11_ABI "none"
#endif

// The CUDA version LibTorch was built with ("13.2"): LibTorch's headers do not
// say it, so trainyard_add_plugin() (cmake/TrainyardPlugin.cmake) defines
// TRAINYARD_TORCH_CUDA from the package. Without it, a CUDA LibTorch (which
// alone generates ATen/cuda/CUDAConfig.h) gives "unknown", which no host has.
#if defined(TRAINYARD_TORCH_CUDA)
#define TRAINYARD_CUDA TRAINYARD_TORCH_CUDA
#elif __has_include(<ATen/cuda/CUDAConfig.h>)
#define TRAINYARD_CUDA "unknown"
#else
#define TRAINYARD_CUDA "none"
#endif

// LibTorch's CMake target defines USE_C10D_NCCL when c10d's NCCL backend is in.
#if defined(USE_C10D_NCCL)
#define TRAINYARD_NCCL "1"
#else
#define TRAINYARD_NCCL "0"
#endif

#define TRAINYARD_FINGERPRINT                                                                         \
  TRAINYARD_COMPILER ";cxx11abi=" TRAINYARD_CXX11_ABI ";torch=" TORCH_VERSION ";cuda=" TRAINYARD_CUDA \
                     ";nccl=" TRAINYARD_NCCL

namespace trainyard {

/// The fingerprint the host (or the SDK library) was built with.
const char* sdk_fingerprint();
/// "MAJOR.MINOR" of the SDK library.
const char* sdk_api_version();
/// "MAJOR.MINOR.PATCH" of the SDK library (TRAINYARD_VERSION).
const char* sdk_version();

}  // namespace trainyard
