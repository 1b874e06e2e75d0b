#pragma once
/// SDK version and build fingerprint.
///
/// A plugin is loaded only when its API major equals the host's, its API minor
/// is not newer than the host's, and its build fingerprint equals the host's
/// (same compiler family and major, C++11 ABI flag, LibTorch version, CUDA).
/// The fingerprint exists because the plugin boundary passes C++ objects
/// (torch::Tensor, torch::nn::Module): a matching version number alone cannot
/// make that safe.
///
/// Example:
///   std::printf("%s\n", TRAINYARD_FINGERPRINT);  // gcc-12;cxx11abi=1;torch=1.13.0;cuda=0

#include <cstddef>  // defines _GLIBCXX_USE_CXX11_ABI
#include <torch/version.h>

#define TRAINYARD_API_MAJOR 1
#define TRAINYARD_API_MINOR 3
#define TRAINYARD_VERSION "0.1.0"

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

// LibTorch generates ATen/cuda/CUDAConfig.h only in CUDA builds.
#if __has_include(<ATen/cuda/CUDAConfig.h>)
#define TRAINYARD_CUDA "1"
#else
#define TRAINYARD_CUDA "0"
#endif

#define TRAINYARD_FINGERPRINT                                              \
  TRAINYARD_COMPILER ";cxx11abi=" TRAINYARD_CXX11_ABI ";torch=" TORCH_VERSION \
                     ";cuda=" TRAINYARD_CUDA

namespace trainyard {

/// The fingerprint the host (or the SDK library) was built with.
const char* sdk_fingerprint();
/// "MAJOR.MINOR" of the SDK library.
const char* sdk_api_version();

}  // namespace trainyard
