# customops' kernels for ExecuTorch's runtime (kernels/executorch/): libcustomops_executorch.so registers the ops'
# out variants (customops::<op>.out) with the runtime, libexecutorch.so, when a process or app loads it. It links
# neither libtorch nor libcustomops: the maths comes from kernels/core/, which libtorch's CPU kernels share.
#
# Built against the executorch package of CUSTOMOPS_PYTHON's environment (its wheel ships the headers, the runtime
# and a CMake package), or of executorch_DIR.
# Input:  CUSTOMOPS_WITH_EXECUTORCH (AUTO: when that package is found; ON: fail without it; OFF).
# Output: CUSTOMOPS_HAVE_EXECUTORCH, the target customops_executorch, CUSTOMOPS_EXECUTORCH_LIBRARIES (what a C++
#         app that runs programs links: the runtime and the kernels and delegates the wheel ships).
set(CUSTOMOPS_WITH_EXECUTORCH AUTO CACHE STRING "Build the ExecuTorch kernels: AUTO, ON or OFF")
set(CUSTOMOPS_HAVE_EXECUTORCH OFF)
if(CUSTOMOPS_WITH_EXECUTORCH STREQUAL "OFF")
  return()
endif()

if(NOT executorch_DIR)
  execute_process(
    COMMAND "${CUSTOMOPS_PYTHON}" -c
            "import importlib.util as u; s = u.find_spec('executorch')
print(s.submodule_search_locations[0] if s else '')"
    OUTPUT_VARIABLE _customops_executorch_root OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(_customops_executorch_root)
    set(_customops_executorch_hint PATHS "${_customops_executorch_root}/lib/cmake/executorch" NO_DEFAULT_PATH)
  endif()
endif()
find_package(executorch CONFIG QUIET ${_customops_executorch_hint})
if(NOT EXECUTORCH_FOUND OR NOT EXECUTORCH_INCLUDE_DIRS)
  if(CUSTOMOPS_WITH_EXECUTORCH STREQUAL "ON")
    message(FATAL_ERROR "customops: CUSTOMOPS_WITH_EXECUTORCH=ON, but ${CUSTOMOPS_PYTHON} has no executorch "
                        "package with its runtime (pip install executorch), and executorch_DIR is not set")
  endif()
  message(STATUS "customops: no executorch package: the ExecuTorch kernels are not built")
  return()
endif()
set(CUSTOMOPS_HAVE_EXECUTORCH ON)

# The runtime and its thread pool, as imported targets (CMake >= 3.28) or by path (the package's variables, whose
# first entry is the runtime and whose components are linker flags naming their libraries).
if(TARGET executorch::runtime)
  set(_customops_executorch_runtime executorch::runtime)
  if(TARGET executorch::threadpool)
    list(APPEND _customops_executorch_runtime executorch::threadpool)
  endif()
else()
  list(GET EXECUTORCH_LIBRARIES 0 _customops_executorch_runtime)
  foreach(_lib IN LISTS EXECUTORCH_LIBRARIES)
    if(_lib MATCHES "libexecutorch_threadpool")
      list(APPEND _customops_executorch_runtime "${_lib}")
    endif()
  endforeach()
endif()
set(CUSTOMOPS_EXECUTORCH_LIBRARIES ${EXECUTORCH_LIBRARIES})

file(GLOB CUSTOMOPS_EXECUTORCH_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/kernels/executorch/*.cpp)
customops_pointwise_executorch_sources(_customops_executorch_pointwise_isa _customops_executorch_pointwise)
add_library(customops_executorch SHARED ${CUSTOMOPS_EXECUTORCH_SOURCES} ${_customops_executorch_pointwise})
target_include_directories(customops_executorch PRIVATE ${PROJECT_SOURCE_DIR} ${EXECUTORCH_INCLUDE_DIRS})
target_compile_definitions(customops_executorch PRIVATE ${EXECUTORCH_COMPILE_DEFINITIONS})
target_compile_options(customops_executorch PRIVATE -Wall -Wextra -Wno-unused-parameter)
target_link_libraries(customops_executorch PRIVATE ${_customops_executorch_runtime})
# The kernels whose loops use at::vec (kernels/executorch/isa/), once per instruction set as libtorch's CPU kernels
# are (CUSTOMOPS_CPU_CAPABILITIES), each in namespace customops::executorch_kernels::<capability>. at::vec is
# header-only: torch's headers come first, so that ExecuTorch's headers take torch's c10 (the same types as the
# copy ExecuTorch ships), and nothing of libtorch is linked.
file(GLOB CUSTOMOPS_EXECUTORCH_ISA_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/kernels/executorch/isa/*.cpp)
list(APPEND CUSTOMOPS_EXECUTORCH_ISA_SOURCES ${_customops_executorch_pointwise_isa})
foreach(cap IN LISTS CUSTOMOPS_CPU_CAPABILITIES)
  set(_obj customops_executorch_${cap})
  add_library(${_obj} OBJECT ${CUSTOMOPS_EXECUTORCH_ISA_SOURCES})
  set_target_properties(${_obj} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_include_directories(${_obj} PRIVATE ${PROJECT_SOURCE_DIR})
  target_include_directories(${_obj} SYSTEM PRIVATE ${TORCH_INCLUDE_DIRS} ${EXECUTORCH_INCLUDE_DIRS})
  target_compile_definitions(${_obj} PRIVATE ${EXECUTORCH_COMPILE_DEFINITIONS} CPU_CAPABILITY=${cap}
                                             CPU_CAPABILITY_${cap})
  target_compile_options(${_obj} PRIVATE ${CUSTOMOPS_CPU_FLAGS_${cap}} -Wall -Wextra -Wno-unused-parameter)
  target_sources(customops_executorch PRIVATE $<TARGET_OBJECTS:${_obj}>)
  target_compile_definitions(customops_executorch PRIVATE CUSTOMOPS_ET_HAVE_${cap})
endforeach()
# The kernels register from static initialisers: an app names no symbol of the library.
target_link_options(customops_executorch INTERFACE "LINKER:--no-as-needed")
# Found beside the executorch package it was built against: in a wheel a sibling package, else by absolute path.
set(_customops_executorch_rpath "${EXECUTORCH_RUNTIME_LIBRARY_DIR}")
if(SKBUILD)
  list(PREPEND _customops_executorch_rpath "$ORIGIN/../../executorch/lib")
endif()
set_target_properties(customops_executorch PROPERTIES INSTALL_RPATH "${_customops_executorch_rpath}")
install(TARGETS customops_executorch LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
if(CUSTOMOPS_STAGE_PYTHON AND NOT SKBUILD)
  add_custom_command(TARGET customops_executorch POST_BUILD
    COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_SOURCE_DIR}/python/customops/lib
    COMMAND ${CMAKE_COMMAND} -E copy $<TARGET_FILE:customops_executorch>
            ${PROJECT_SOURCE_DIR}/python/customops/lib/libcustomops_executorch.so
    COMMENT "Staging libcustomops_executorch.so into the Python package")
endif()
message(STATUS "customops: ExecuTorch kernels against executorch ${EXECUTORCH_BUILD_VERSION}")
