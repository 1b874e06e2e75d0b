# trainyard_torch_build_info(CUDA_VAR NCCL_VAR)
#
# What the LibTorch found by find_package(Torch) was built with, for the build
# fingerprint: CUDA_VAR is its CUDA version ("13.2") or "none"; NCCL_VAR is 1
# when c10d's NCCL backend is in (torch_cuda defines USE_C10D_NCCL), else 0.
# The CUDA version comes from the package itself (the wheel's torch/version.py,
# or LibTorch archives' build-version such as "2.5.1+cu124"), not from the
# local toolkit, which may be another minor version.
function(trainyard_torch_build_info cuda_var nccl_var)
  set(cuda "none")
  if(TARGET torch_cuda)
    set(cuda "unknown")
    if(EXISTS "${TORCH_INSTALL_PREFIX}/version.py")
      file(STRINGS "${TORCH_INSTALL_PREFIX}/version.py" line REGEX "^cuda[:= ]")
      if(line MATCHES "'([0-9]+\\.[0-9]+)'")
        set(cuda "${CMAKE_MATCH_1}")
      endif()
    elseif(EXISTS "${TORCH_INSTALL_PREFIX}/build-version")
      file(STRINGS "${TORCH_INSTALL_PREFIX}/build-version" line)
      if(line MATCHES "\\+cu([0-9]+)([0-9])$")
        set(cuda "${CMAKE_MATCH_1}.${CMAKE_MATCH_2}")
      endif()
    endif()
  endif()
  set(nccl 0)
  if(TARGET torch_cuda)  # the torch target takes its definitions from here
    get_target_property(cuda_defs torch_cuda INTERFACE_COMPILE_DEFINITIONS)
    if("USE_C10D_NCCL" IN_LIST cuda_defs)
      set(nccl 1)
    endif()
  endif()
  set(${cuda_var} "${cuda}" PARENT_SCOPE)
  set(${nccl_var} "${nccl}" PARENT_SCOPE)
endfunction()

# trainyard_use_wheel_cuda_libraries()
#
# With PyPI's torch wheel, the CUDA libraries LibTorch runs with are the
# nvidia-* wheels' (site-packages/nvidia/*/lib), which libtorch_cuda.so finds
# through its RPATH. LibTorch's CMake package links the CUDA runtime of the
# local toolkit instead (another minor version, loaded first, and its NCCL is
# older than the one libtorch_cuda.so needs). Point CUDA::cudart at the wheel's
# runtime and let the linker resolve libtorch_cuda.so's own dependencies there.
# Call it after find_package(Torch); it does nothing for other LibTorch layouts.
macro(trainyard_use_wheel_cuda_libraries)
  file(GLOB _trainyard_wheel_cuda_dirs LIST_DIRECTORIES true "${TORCH_INSTALL_PREFIX}/../nvidia/*/lib")
  if(_trainyard_wheel_cuda_dirs AND (TARGET CUDA::cudart OR TRAINYARD_TORCH_CUDART_FROM_WHEEL))
    if(TARGET CUDA::cudart)
      find_library(TRAINYARD_WHEEL_CUDART NAMES libcudart.so.13 libcudart.so.12 cudart
                   PATHS ${_trainyard_wheel_cuda_dirs} NO_DEFAULT_PATH)
      if(TRAINYARD_WHEEL_CUDART)
        set_target_properties(CUDA::cudart PROPERTIES IMPORTED_LOCATION "${TRAINYARD_WHEEL_CUDART}")
      endif()
    endif()
    foreach(_dir ${_trainyard_wheel_cuda_dirs})
      add_link_options("LINKER:-rpath-link,${_dir}")
    endforeach()
  endif()
endmacro()

# trainyard_provide_torch_cudart()
#
# Called before find_package(Torch) by TrainyardConfig.cmake. LibTorch's
# package (Caffe2/public/cuda.cmake) enables the CUDA language, which needs
# nvcc, even for a project that compiles no CUDA; it skips all of that when
# the target torch::cudart exists already (its include guard). Unless the
# project enabled CUDA itself or set TRAINYARD_PLUGIN_CUDA_TOOLKIT ON, this
# defines torch::cudart as the CUDA runtime LibTorch runs with (the nvidia-*
# wheel's libcudart beside the torch wheel, found from Torch_DIR), so that a
# C++ plugin configures and links with no toolkit, no nvcc, no CUDA_HOME.
# Sets TRAINYARD_TORCH_CUDART_FROM_WHEEL when it did.
macro(trainyard_provide_torch_cudart)
  option(TRAINYARD_PLUGIN_CUDA_TOOLKIT "let LibTorch's CMake package set up CUDA (needs nvcc) in a C++-only project" OFF)
  get_property(_trainyard_languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  set(TRAINYARD_TORCH_CUDART_FROM_WHEEL OFF)
  if(NOT "CUDA" IN_LIST _trainyard_languages AND NOT TRAINYARD_PLUGIN_CUDA_TOOLKIT AND NOT TARGET torch::cudart
     AND Torch_DIR)
    # Torch_DIR is .../site-packages/torch/share/cmake/Torch; the runtime is in .../site-packages/nvidia/*/lib.
    file(GLOB _trainyard_wheel_cudart "${Torch_DIR}/../../../../nvidia/*/lib/libcudart.so.*")
    add_library(torch::cudart INTERFACE IMPORTED)
    if(_trainyard_wheel_cudart)
      list(GET _trainyard_wheel_cudart 0 _trainyard_wheel_cudart)
      get_filename_component(_trainyard_wheel_cudart "${_trainyard_wheel_cudart}" REALPATH)
      set_property(TARGET torch::cudart PROPERTY INTERFACE_LINK_LIBRARIES "${_trainyard_wheel_cudart}")
    endif()
    # Without the wheel's runtime (a LibTorch archive), libtorch_cuda.so names
    # its own: a plugin that calls the CUDA runtime directly enables CUDA.
    set(TRAINYARD_TORCH_CUDART_FROM_WHEEL ON)
  endif()
endmacro()

# trainyard_stamp_fingerprint(TARGET [PUBLIC|PRIVATE])
#
# Defines TRAINYARD_TORCH_CUDA for TARGET, so that trainyard/version.h's
# fingerprint names the CUDA version of the LibTorch TARGET compiles against.
function(trainyard_stamp_fingerprint target)
  set(scope PRIVATE)
  if(ARGC GREATER 1)
    set(scope ${ARGV1})
  endif()
  trainyard_torch_build_info(cuda nccl)
  target_compile_definitions(${target} ${scope} TRAINYARD_TORCH_CUDA="${cuda}")
endfunction()

# trainyard_compile_like_a_plugin(TARGET)
#
# Compiles TARGET's sources as trainyard_add_plugin() compiles a plugin's:
# position-independent, hidden visibility, the fingerprint's definition, and
# -O2 -DNDEBUG when the project sets no build type. For a static library of
# code that plugins link (it adds no exported symbol to them), or an object
# library whose precompiled header plugins reuse (GCC ignores a header
# compiled with other flags).
#
# Example:
#   add_library(my_backbone STATIC backbone.cpp)
#   target_link_libraries(my_backbone PUBLIC Trainyard::sdk)
#   trainyard_compile_like_a_plugin(my_backbone)
#   trainyard_add_plugin(my_net SOURCES plugin.cpp LINK_LIBRARIES my_backbone)
function(trainyard_compile_like_a_plugin target)
  set_target_properties(${target} PROPERTIES
    POSITION_INDEPENDENT_CODE ON
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  get_property(multi_config GLOBAL PROPERTY GENERATOR_IS_MULTI_CONFIG)
  if(NOT CMAKE_BUILD_TYPE AND NOT multi_config)
    target_compile_options(${target} PRIVATE -O2)
    target_compile_definitions(${target} PRIVATE NDEBUG)
  endif()
  trainyard_stamp_fingerprint(${target})
endfunction()

# trainyard_add_plugin(NAME SOURCES src... [OUTPUT_DIRECTORY dir] [LINK_LIBRARIES lib...])
#
# Builds a trainyard plugin: a MODULE library named lib<NAME>.so, linked to the
# SDK core (Trainyard::sdk; add Trainyard::sdk_helpers to LINK_LIBRARIES for
# the helpers), marked nodelete (a plugin's objects may outlive any attempt to
# unload it), and
#  - exporting trainyard_plugin_entry and nothing else: hidden visibility,
#    plus a linker version script that makes local even the std:: and torch
#    template instances that headers declare with default visibility;
#  - optimized: when the project sets no build type (CMAKE_BUILD_TYPE empty,
#    single-config generator), the plugin compiles with -O2 -DNDEBUG anyway,
#    since an unoptimized plugin makes a whole run slow.
# Drop the result into a plugin folder; the host needs no rebuild.
#
# Example:
#   find_package(Trainyard 1.0 REQUIRED)
#   trainyard_add_plugin(my_net SOURCES plugin.cpp my_net.cpp)
function(trainyard_add_plugin name)
  cmake_parse_arguments(ARG "" "OUTPUT_DIRECTORY" "SOURCES;LINK_LIBRARIES" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "trainyard_add_plugin(${name}): SOURCES is required")
  endif()
  add_library(${name} MODULE ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE Trainyard::sdk ${ARG_LINK_LIBRARIES})
  set_target_properties(${name} PROPERTIES PREFIX "lib")
  trainyard_compile_like_a_plugin(${name})
  set(exports "${CMAKE_BINARY_DIR}/trainyard_plugin_exports.map")
  file(CONFIGURE OUTPUT "${exports}" CONTENT "{\n  global: trainyard_plugin_entry;\n  local: *;\n};\n")
  target_link_options(${name} PRIVATE "LINKER:-z,nodelete" "LINKER:--version-script=${exports}")
  set_property(TARGET ${name} APPEND PROPERTY LINK_DEPENDS "${exports}")
  if(ARG_OUTPUT_DIRECTORY)
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${ARG_OUTPUT_DIRECTORY})
  elseif(DEFINED TRAINYARD_PLUGIN_OUTPUT_DIR)
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${TRAINYARD_PLUGIN_OUTPUT_DIR})
  endif()
endfunction()
