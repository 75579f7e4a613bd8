# Compiles the CPU kernels once per instruction set and links every variant into
# <target>. Each variant defines its kernels in namespace
# customops::cpu::<CPU_CAPABILITY>; kernels/common/cpu_capability.h picks one at load time
# from ATen's own CPU-capability detection (so ATEN_CPU_CAPABILITY=default also
# applies to customops). CPU_CAPABILITY also names at::vec's inline namespace,
# which keeps the two builds of its templates apart.

set(_customops_cpu_capabilities DEFAULT)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  list(APPEND _customops_cpu_capabilities AVX2)
endif()
# DEFAULT alone builds in half the time and runs everywhere (at the speed of ATEN_CPU_CAPABILITY=default); the
# sanitized build takes it, with ATen told to match (scripts/sanitize.sh), so that that path is tested too.
set(CUSTOMOPS_CPU_CAPABILITIES "${_customops_cpu_capabilities}" CACHE STRING
    "CPU kernel variants to build: DEFAULT, plus AVX2 on x86-64")
foreach(cap IN LISTS CUSTOMOPS_CPU_CAPABILITIES)
  if(NOT cap IN_LIST _customops_cpu_capabilities)
    message(FATAL_ERROR "customops: CUSTOMOPS_CPU_CAPABILITIES has ${cap}; this processor takes: "
                        "${_customops_cpu_capabilities}")
  endif()
endforeach()
if(NOT "DEFAULT" IN_LIST CUSTOMOPS_CPU_CAPABILITIES)
  message(FATAL_ERROR "customops: CUSTOMOPS_CPU_CAPABILITIES must include DEFAULT (the kernels of any processor)")
endif()
set(CUSTOMOPS_CPU_FLAGS_DEFAULT "")
set(CUSTOMOPS_CPU_FLAGS_AVX2 -mavx2 -mfma -mf16c)

# at::parallel_for is a header template. With an OpenMP build of ATen it only
# runs in parallel in files compiled with OpenMP, so the kernels get the flag;
# they link the libgomp that torch ships, so that the process has one OpenMP
# runtime and torch.set_num_threads governs our kernels too.
set(CUSTOMOPS_CPU_OPENMP OFF)
find_file(_customops_aten_config ATen/Config.h PATHS ${TORCH_INCLUDE_DIRS} NO_DEFAULT_PATH NO_CACHE)
if(_customops_aten_config)
  file(STRINGS "${_customops_aten_config}" _customops_aten_openmp REGEX "^#define AT_PARALLEL_OPENMP 1")
  if(_customops_aten_openmp)
    set(CUSTOMOPS_CPU_OPENMP ON)
  endif()
endif()
if(CUSTOMOPS_CPU_OPENMP)
  find_package(OpenMP REQUIRED COMPONENTS CXX)
  find_library(CUSTOMOPS_TORCH_GOMP NAMES libgomp.so.1 gomp PATHS "${TORCH_INSTALL_PREFIX}/lib" NO_DEFAULT_PATH NO_CACHE)
  if(CUSTOMOPS_TORCH_GOMP)
    set(CUSTOMOPS_OPENMP_LINK "${CUSTOMOPS_TORCH_GOMP}")
  else()
    set(CUSTOMOPS_OPENMP_LINK OpenMP::OpenMP_CXX)
  endif()
  message(STATUS "customops: CPU kernels use OpenMP (${CUSTOMOPS_OPENMP_LINK})")
endif()

function(customops_add_cpu_kernels target)
  foreach(cap IN LISTS CUSTOMOPS_CPU_CAPABILITIES)
    set(obj ${target}_cpu_${cap})
    add_library(${obj} OBJECT ${ARGN})
    target_include_directories(${obj} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/ops/include)
    target_link_libraries(${obj} PRIVATE ${TORCH_LIBRARIES})
    target_compile_definitions(${obj} PRIVATE CPU_CAPABILITY=${cap} CPU_CAPABILITY_${cap})
    target_compile_options(${obj} PRIVATE ${CUSTOMOPS_CPU_FLAGS_${cap}} -Wall -Wextra -Wno-unused-parameter)
    if(CUSTOMOPS_CPU_OPENMP)
      target_compile_options(${obj} PRIVATE ${OpenMP_CXX_FLAGS})
    endif()
    customops_precompile_headers(${obj} <ATen/core/Tensor.h> <ATen/Dispatch.h> <ATen/Parallel.h> <ATen/OpMathType.h>
                                 <ATen/cpu/vec/vec.h> <ATen/cpu/vec/functional.h>)
    target_sources(${target} PRIVATE $<TARGET_OBJECTS:${obj}>)
    target_compile_definitions(${target} PRIVATE CUSTOMOPS_CPU_HAVE_${cap})
  endforeach()
  if(CUSTOMOPS_CPU_OPENMP)
    target_link_libraries(${target} PRIVATE ${CUSTOMOPS_OPENMP_LINK})
  endif()
endfunction()
