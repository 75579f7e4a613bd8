# Locates libtorch through the Python interpreter that has torch installed and
# decides whether the CUDA kernels are built.
#
# Inputs:  CUSTOMOPS_PYTHON (interpreter; default: under pip the one running it, else the
#          first python3 found),
#          CUSTOMOPS_WITH_CUDA (AUTO/ON/OFF), TORCH_CUDA_ARCH_LIST (default 9.0).
# Outputs: TORCH_LIBRARIES and friends, CUSTOMOPS_HAVE_CUDA, CUSTOMOPS_TORCH_VERSION,
#          CUSTOMOPS_TORCH_CMAKE_PREFIX (torch.utils.cmake_prefix_path), CUSTOMOPS_CXX_STANDARD
#          (also set as CMAKE_CXX_STANDARD and CMAKE_CUDA_STANDARD).

if(NOT CUSTOMOPS_PYTHON AND SKBUILD AND Python_EXECUTABLE)
  # pip (scikit-build-core) builds against the torch of the Python running it.
  set(CUSTOMOPS_PYTHON "${Python_EXECUTABLE}")
elseif(NOT CUSTOMOPS_PYTHON)
  find_package(Python3 REQUIRED COMPONENTS Interpreter)
  set(CUSTOMOPS_PYTHON "${Python3_EXECUTABLE}")
elseif(NOT IS_ABSOLUTE "${CUSTOMOPS_PYTHON}")
  # A bare name such as python3: look it up on PATH. The cache keeps the path found (FORCE): a -D entry of no
  # type would otherwise be made a FILEPATH relative to the build's working directory, which the next configure
  # (a regenerate when a source is added) would take for the interpreter.
  find_program(_customops_python_path "${CUSTOMOPS_PYTHON}" NO_CACHE REQUIRED)
  set(CUSTOMOPS_PYTHON "${_customops_python_path}" CACHE FILEPATH "Python interpreter whose torch is built against"
      FORCE)
endif()
set(CUSTOMOPS_PYTHON "${CUSTOMOPS_PYTHON}" CACHE FILEPATH "Python interpreter whose torch is built against")

execute_process(
  COMMAND "${CUSTOMOPS_PYTHON}" -c
          "import torch; print(torch.utils.cmake_prefix_path); print(torch.__version__); print(torch.version.cuda or '')"
  OUTPUT_VARIABLE _customops_torch_info
  RESULT_VARIABLE _customops_torch_rc
  OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _customops_torch_rc EQUAL 0)
  message(FATAL_ERROR "customops: '${CUSTOMOPS_PYTHON} -c \"import torch\"' failed; "
                      "set CUSTOMOPS_PYTHON to an interpreter that has torch installed.")
endif()
string(REPLACE "\n" ";" _customops_torch_info "${_customops_torch_info}")
list(GET _customops_torch_info 0 CUSTOMOPS_TORCH_CMAKE_PREFIX)
list(GET _customops_torch_info 1 CUSTOMOPS_TORCH_VERSION)
list(LENGTH _customops_torch_info _n)
set(CUSTOMOPS_TORCH_CUDA_VERSION "")
if(_n GREATER 2)
  list(GET _customops_torch_info 2 CUSTOMOPS_TORCH_CUDA_VERSION)
endif()
list(APPEND CMAKE_PREFIX_PATH "${CUSTOMOPS_TORCH_CMAKE_PREFIX}")

# The supported releases are declared once, as pyproject.toml's build requirement on torch.
file(STRINGS "${PROJECT_SOURCE_DIR}/pyproject.toml" _customops_torch_range REGEX "\"torch>=[0-9.]+,<[0-9.]+\"")
if(NOT _customops_torch_range MATCHES "torch>=([0-9.]+),<([0-9.]+)")
  message(FATAL_ERROR "customops: pyproject.toml's build requirements lack \"torch>=A,<B\"")
endif()
set(CUSTOMOPS_TORCH_MIN "${CMAKE_MATCH_1}")
set(CUSTOMOPS_TORCH_BELOW "${CMAKE_MATCH_2}")
string(REGEX MATCH "^[0-9.]+" _customops_torch_release "${CUSTOMOPS_TORCH_VERSION}")
if(_customops_torch_release VERSION_LESS CUSTOMOPS_TORCH_MIN OR NOT _customops_torch_release VERSION_LESS CUSTOMOPS_TORCH_BELOW)
  message(FATAL_ERROR "customops: torch ${CUSTOMOPS_TORCH_VERSION} (${CUSTOMOPS_PYTHON}) is outside the supported "
    "releases; pip install 'torch>=${CUSTOMOPS_TORCH_MIN},<${CUSTOMOPS_TORCH_BELOW}' or set CUSTOMOPS_PYTHON to a Python that has one.")
endif()
message(STATUS "customops: torch ${CUSTOMOPS_TORCH_VERSION} (CUDA '${CUSTOMOPS_TORCH_CUDA_VERSION}') from ${CUSTOMOPS_PYTHON}")

include(customopsTorchLinking)
include(CustomopsCudaToolchain)

find_package(Torch REQUIRED)
customops_torch_link_fixes(torch)
if(CMAKE_CUDA_COMPILER_LOADED)
  # nvcc's system include directories as `-isystem <dir>`, not CMake's `-isystem=<dir>`: nvcc takes both, and the
  # compiler cache (ccache) hashes only the first form relative to the checkout, so that torch's headers in the
  # checkout's environment leave a clone in another folder hitting the objects another checkout compiled.
  set(CMAKE_INCLUDE_SYSTEM_FLAG_CUDA "-isystem ")
endif()

# The C++ standard is the one torch's headers need: C++17 up to torch 2.11, C++20 from releases whose
# CMake package puts cxx_std_20 (or, for a compiler CMake knows no features of, -std=c++20) on the torch
# target. Torch's CUDA settings copy CMAKE_CXX_STANDARD as it was before find_package, so nvcc gets
# the same standard here, and every target defined after this point compiles host and device code alike.
get_target_property(_customops_torch_features torch INTERFACE_COMPILE_FEATURES)
get_target_property(_customops_torch_options torch INTERFACE_COMPILE_OPTIONS)
set(CUSTOMOPS_CXX_STANDARD 17)
foreach(_std 20 23)
  if("cxx_std_${_std}" IN_LIST _customops_torch_features OR "${_customops_torch_options}" MATCHES "std[=:]c\\+\\+${_std}")
    set(CUSTOMOPS_CXX_STANDARD ${_std})
  endif()
endforeach()
set(CMAKE_CXX_STANDARD ${CUSTOMOPS_CXX_STANDARD})
if(CMAKE_CUDA_COMPILER_LOADED)
  # CMake releases before 3.26 know no C++20 flag for nvcc (CUDA_STANDARD 20 is a generate-time
  # error there); nvcc takes -std=c++20 from CUDA 12.0 on.
  if(NOT DEFINED CMAKE_CUDA${CUSTOMOPS_CXX_STANDARD}_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA${CUSTOMOPS_CXX_STANDARD}_STANDARD_COMPILE_OPTION "-std=c++${CUSTOMOPS_CXX_STANDARD}")
    set(CMAKE_CUDA${CUSTOMOPS_CXX_STANDARD}_EXTENSION_COMPILE_OPTION "-std=c++${CUSTOMOPS_CXX_STANDARD}")
  endif()
  set(CMAKE_CUDA_STANDARD ${CUSTOMOPS_CXX_STANDARD})
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
endif()
message(STATUS "customops: C++${CUSTOMOPS_CXX_STANDARD} (what torch ${CUSTOMOPS_TORCH_VERSION}'s headers need)")

set(CUSTOMOPS_HAVE_CUDA OFF)
if(CUSTOMOPS_WITH_CUDA STREQUAL "ON" AND NOT CUSTOMOPS_TORCH_CUDA_VERSION)
  message(FATAL_ERROR "customops: CUSTOMOPS_WITH_CUDA=ON but torch ${CUSTOMOPS_TORCH_VERSION} has no CUDA.")
endif()
if(CUSTOMOPS_TORCH_CUDA_VERSION AND NOT CUSTOMOPS_WITH_CUDA STREQUAL "OFF")
  # The CUDA runtime's soname carries its major version: kernels built by one
  # major release cannot share a process with a torch built against another.
  string(REGEX MATCH "^[0-9]+\\.[0-9]+" _nvcc_mm "${CMAKE_CUDA_COMPILER_VERSION}")
  string(REGEX MATCH "^[0-9]+" _nvcc_major "${CMAKE_CUDA_COMPILER_VERSION}")
  string(REGEX MATCH "^[0-9]+" _torch_major "${CUSTOMOPS_TORCH_CUDA_VERSION}")
  if(NOT _nvcc_major STREQUAL _torch_major)
    message(FATAL_ERROR
      "customops: nvcc ${CMAKE_CUDA_COMPILER_VERSION} (${CMAKE_CUDA_COMPILER}) does not match torch's "
      "CUDA ${CUSTOMOPS_TORCH_CUDA_VERSION}. Point CMAKE_CUDA_COMPILER/CUDAToolkit_ROOT at a CUDA "
      "${CUSTOMOPS_TORCH_CUDA_VERSION} toolkit, or configure with -DCUSTOMOPS_WITH_CUDA=OFF.")
  elseif(NOT _nvcc_mm STREQUAL CUSTOMOPS_TORCH_CUDA_VERSION)
    message(WARNING "customops: nvcc ${CMAKE_CUDA_COMPILER_VERSION} differs in minor version from "
                    "torch's CUDA ${CUSTOMOPS_TORCH_CUDA_VERSION}.")
  endif()
  set(CUSTOMOPS_HAVE_CUDA ON)
  set(_archs "${TORCH_CUDA_ARCH_LIST}")
  if(DEFINED ENV{TORCH_CUDA_ARCH_LIST})
    set(_archs "$ENV{TORCH_CUDA_ARCH_LIST}")
  endif()
  message(STATUS "customops: CUDA kernels ON (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, TORCH_CUDA_ARCH_LIST=${_archs})")
else()
  message(STATUS "customops: CUDA kernels OFF")
endif()
