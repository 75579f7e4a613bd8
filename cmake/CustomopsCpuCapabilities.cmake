# Compiles the CPU kernels once per instruction set and links every variant into
# <target>. Each variant defines its kernels in namespace
# customops::cpu::<CPU_CAPABILITY>; registration/cpu.cpp picks one at load time
# from ATen's own CPU-capability detection (so ATEN_CPU_CAPABILITY=default also
# applies to customops). CPU_CAPABILITY also names at::vec's inline namespace,
# which keeps the two builds of its templates apart.

set(CUSTOMOPS_CPU_CAPABILITIES DEFAULT)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  list(APPEND CUSTOMOPS_CPU_CAPABILITIES AVX2)
endif()
set(CUSTOMOPS_CPU_FLAGS_DEFAULT "")
set(CUSTOMOPS_CPU_FLAGS_AVX2 -mavx2 -mfma -mf16c)

function(customops_add_cpu_kernels target)
  foreach(cap IN LISTS CUSTOMOPS_CPU_CAPABILITIES)
    set(obj ${target}_cpu_${cap})
    add_library(${obj} OBJECT ${ARGN})
    target_include_directories(${obj} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/ops/include)
    target_link_libraries(${obj} PRIVATE ${TORCH_LIBRARIES})
    target_compile_definitions(${obj} PRIVATE CPU_CAPABILITY=${cap} CPU_CAPABILITY_${cap})
    target_compile_options(${obj} PRIVATE ${CUSTOMOPS_CPU_FLAGS_${cap}} -Wall -Wextra -Wno-unused-parameter)
    target_sources(${target} PRIVATE $<TARGET_OBJECTS:${obj}>)
    target_compile_definitions(${target} PRIVATE CUSTOMOPS_CPU_HAVE_${cap})
  endforeach()
endfunction()
