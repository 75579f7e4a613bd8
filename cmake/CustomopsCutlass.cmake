# CUTLASS (header-only) for conv2d's implicit-GEMM kernels on Hopper, and the per-source CUDA
# architectures those kernels need.
#
# Headers: CUTLASS_INCLUDE_DIR, or the pinned nvidia-cutlass wheel in the project's Python
# (requirements-headers.txt; found without importing it: its Python side pulls in cuda-python).
# CUSTOMOPS_WITH_CUTLASS: AUTO (when the headers are found and TORCH_CUDA_ARCH_LIST has 9.0), ON, OFF.
#
# torch's CMake puts its -gencode flags into CMAKE_CUDA_FLAGS, for every .cu file. The sm_90a kernels
# (*_sm90.cu) use Hopper-only instructions (WGMMA, TMA) that exist only for the arch-specific target
# sm_90a, so the flags move onto each source instead: *_sm90.cu gets sm_90a alone, the others torch's.
#
#   customops_cuda_sources(<out-var> <sources...>)  -> the sources to compile, properties set;
#   sets CUSTOMOPS_HAVE_SM90_CONV in the caller.

set(CUSTOMOPS_WITH_CUTLASS AUTO CACHE STRING "conv2d's CUTLASS implicit-GEMM kernels for sm_90: AUTO, ON or OFF")
set_property(CACHE CUSTOMOPS_WITH_CUTLASS PROPERTY STRINGS AUTO ON OFF)
set(CUTLASS_INCLUDE_DIR "" CACHE PATH "CUTLASS's include directory (holding cutlass/ and cute/); default: the nvidia-cutlass wheel")

function(_customops_find_cutlass out_include out_util)
  set(include "${CUTLASS_INCLUDE_DIR}")
  set(util "")
  if(NOT include AND CUSTOMOPS_PYTHON)
    execute_process(
      COMMAND "${CUSTOMOPS_PYTHON}" -c
        "import importlib.util as u; s = u.find_spec('cutlass_library'); print(s.submodule_search_locations[0] if s else '')"
      OUTPUT_VARIABLE package OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(package)
      set(include "${package}/source/include")
      set(util "${package}/source/tools/util/include")
    endif()
  endif()
  if(include AND NOT util)
    set(util "${include}/../tools/util/include")
  endif()
  # The SM90 conv mainloop includes cutlass/util/packed_stride.hpp, which lives under tools/util.
  if(include AND EXISTS "${include}/cutlass/conv/collective/collective_builder.hpp"
     AND EXISTS "${util}/cutlass/util/packed_stride.hpp")
    file(STRINGS "${include}/cutlass/version.h" version REGEX "#define CUTLASS_(MAJOR|MINOR|PATCH) ")
    string(REGEX REPLACE "[^0-9;]" "" version "${version}")
    string(REPLACE ";" "." version "${version}")
    message(STATUS "customops: CUTLASS ${version} headers at ${include}")
    set(${out_include} "${include}" PARENT_SCOPE)
    set(${out_util} "${util}" PARENT_SCOPE)
  else()
    set(${out_include} "" PARENT_SCOPE)
    set(${out_util} "" PARENT_SCOPE)
  endif()
endfunction()

# torch's gencode pairs ("-gencode;arch=compute_90,code=sm_90;...") as single flags.
set(_customops_gencode "")
set(_customops_has_sm90 OFF)
if(CUSTOMOPS_HAVE_CUDA)
  set(_pending OFF)
  foreach(flag IN LISTS NVCC_FLAGS_EXTRA)
    if(flag STREQUAL "-gencode")
      set(_pending ON)
    elseif(_pending)
      list(APPEND _customops_gencode "--generate-code=${flag}")
      string(REPLACE " -gencode ${flag}" "" CMAKE_CUDA_FLAGS "${CMAKE_CUDA_FLAGS}")
      if(flag MATCHES "(compute|sm)_90[,a]?")
        set(_customops_has_sm90 ON)
      endif()
      set(_pending OFF)
    endif()
  endforeach()
endif()

# CUSTOMOPS_CUDA_PTX_ONLY: device code as PTX alone, no machine code, so ptxas never runs (10-20 s less per
# source on a 2-core machine). For a build that only checks that the CUDA sources compile, as scripts/test.sh's on a
# machine without a GPU; on a GPU, the driver would compile the kernels when the library loads.
option(CUSTOMOPS_CUDA_PTX_ONLY "Device code as PTX alone: to check that the CUDA sources compile" OFF)
set(_customops_sm90_code sm_90a)
if(CUSTOMOPS_CUDA_PTX_ONLY)
  list(TRANSFORM _customops_gencode REPLACE "code=sm_" "code=compute_")
  list(REMOVE_DUPLICATES _customops_gencode)
  set(_customops_sm90_code compute_90a)
endif()

# What the library holds, for its runtime check of each GPU (kernels/cuda/common/device_guard.cpp) and
# customops.build_info(): "80,86,90" machine code, "120" PTX. An arch-specific target (9.0a) counts as its
# architecture: no other GPU shares its major and a lower minor.
set(CUSTOMOPS_CUDA_SASS "")
set(CUSTOMOPS_CUDA_PTX "")
foreach(flag IN LISTS _customops_gencode)
  if(flag MATCHES "code=sm_([0-9]+)[af]?$")
    list(APPEND CUSTOMOPS_CUDA_SASS "${CMAKE_MATCH_1}")
  elseif(flag MATCHES "code=compute_([0-9]+)[af]?$")
    list(APPEND CUSTOMOPS_CUDA_PTX "${CMAKE_MATCH_1}")
  endif()
endforeach()
string(REPLACE ";" "," CUSTOMOPS_CUDA_SASS "${CUSTOMOPS_CUDA_SASS}")
string(REPLACE ";" "," CUSTOMOPS_CUDA_PTX "${CUSTOMOPS_CUDA_PTX}")

set(_customops_cutlass_include "")
set(_customops_cutlass_util "")
if(CUSTOMOPS_HAVE_CUDA AND NOT CUSTOMOPS_WITH_CUTLASS STREQUAL "OFF")
  _customops_find_cutlass(_customops_cutlass_include _customops_cutlass_util)
  if(CUSTOMOPS_WITH_CUTLASS STREQUAL "ON" AND NOT _customops_cutlass_include)
    message(FATAL_ERROR "customops: CUSTOMOPS_WITH_CUTLASS=ON but no CUTLASS 3.x headers were found: "
                        "pip install --no-deps -r requirements-headers.txt, or set CUTLASS_INCLUDE_DIR.")
  endif()
  if(CUSTOMOPS_WITH_CUTLASS STREQUAL "ON" AND NOT _customops_has_sm90)
    message(FATAL_ERROR "customops: CUSTOMOPS_WITH_CUTLASS=ON needs 9.0 in TORCH_CUDA_ARCH_LIST.")
  endif()
endif()

function(customops_cuda_sources out)
  set(kept "")
  set(have_sm90 OFF)
  foreach(source IN LISTS ARGN)
    if(source MATCHES "_sm90\\.cu$")
      if(NOT (_customops_cutlass_include AND _customops_has_sm90))
        continue()
      endif()
      set(have_sm90 ON)
      set_source_files_properties("${source}" PROPERTIES
        COMPILE_OPTIONS "--generate-code=arch=compute_90a,code=${_customops_sm90_code}"
        INCLUDE_DIRECTORIES "${_customops_cutlass_include};${_customops_cutlass_util}")
    elseif(source MATCHES "\\.cu$")
      set_source_files_properties("${source}" PROPERTIES COMPILE_OPTIONS "${_customops_gencode}")
    endif()
    list(APPEND kept "${source}")
  endforeach()
  if(CUSTOMOPS_HAVE_CUDA)
    message(STATUS "customops: conv2d implicit-GEMM kernels for sm_90a: ${have_sm90}")
  endif()
  set(${out} "${kept}" PARENT_SCOPE)
  set(CUSTOMOPS_HAVE_SM90_CONV ${have_sm90} PARENT_SCOPE)
endfunction()
