# The CUDA compiler and architectures of a build against a CUDA torch (included by CustomopsTorch.cmake before
# find_package(Torch)).
#
# CUSTOMOPS_WITH_CUDA=OFF: no compiler is looked for; torch's CMake package is told the CUDA runtime is the one
# of its wheels (customops_torch_cuda_runtime_target), so configure needs no toolkit.
# Otherwise the compiler is CMAKE_CUDA_COMPILER when given (its major version must be torch's), else the one
# cmake/python/customops_cuda_toolchain.py picks: a system toolkit of torch's CUDA major, or nvcc from PyPI
# (installed into the environment of CUSTOMOPS_PYTHON when missing). CUSTOMOPS_CUDA_FROM_PYPI=ON takes the PyPI
# one even where a system toolkit fits.
#
# Architectures (TORCH_CUDA_ARCH_LIST, read by torch's CMake): when unset, the GPUs of this machine if torch sees
# any (a fast build for development), else those people train and serve on, with PTX of the newest for GPUs
# to come (CUSTOMOPS_DEFAULT_CUDA_ARCHS, filtered by what the compiler supports).

option(CUSTOMOPS_CUDA_FROM_PYPI "Build with nvcc from PyPI (nvidia-cuda-nvcc) even where a system toolkit fits" OFF)
set(CUSTOMOPS_DEFAULT_CUDA_ARCHS "8.0;8.6;8.9;9.0;10.0;12.0"
    CACHE STRING "The architectures a build on a machine without a GPU targets (PTX is added for the newest)")

# A toolkit layout over the PyPI wheels: torch's FindCUDA/FindCUDAToolkit look for the unversioned libcudart.so
# & co. that the wheels (runtime files only) lack, and some nvcc releases look for lib64/ beside bin/. bin/ is a
# folder of links, not a link: nvcc finds the rest relative to the path it was started from, and `bin/..` of a
# linked folder would lead back into the wheels.
function(_customops_pypi_toolkit_root nvcc out)
  get_filename_component(bin "${nvcc}" DIRECTORY)
  get_filename_component(wheels "${bin}" DIRECTORY)
  set(root "${CMAKE_BINARY_DIR}/pypi-cuda-toolkit")
  file(REMOVE_RECURSE "${root}")
  file(MAKE_DIRECTORY "${root}/lib64" "${root}/bin")
  file(GLOB tools LIST_DIRECTORIES true "${bin}/*")
  foreach(tool IN LISTS tools)
    get_filename_component(name "${tool}" NAME)
    file(CREATE_LINK "${tool}" "${root}/bin/${name}" SYMBOLIC)
  endforeach()
  foreach(dir include nvvm)
    file(CREATE_LINK "${wheels}/${dir}" "${root}/${dir}" SYMBOLIC)
  endforeach()
  file(GLOB libs "${wheels}/lib/*.so*" "${wheels}/lib/*.a")
  foreach(lib IN LISTS libs)
    get_filename_component(name "${lib}" NAME)
    file(CREATE_LINK "${lib}" "${root}/lib64/${name}" SYMBOLIC)
    string(REGEX REPLACE "\\.so\\.[0-9.]+$" ".so" dev "${name}")
    if(NOT dev STREQUAL name AND NOT EXISTS "${root}/lib64/${dev}")
      file(CREATE_LINK "${lib}" "${root}/lib64/${dev}" SYMBOLIC)
    endif()
  endforeach()
  file(CREATE_LINK "${root}/lib64" "${root}/lib" SYMBOLIC)
  set(${out} "${root}" PARENT_SCOPE)
endfunction()

function(_customops_pick_cuda_compiler)
  set(args find)
  if(CUSTOMOPS_CUDA_FROM_PYPI)
    list(APPEND args --pypi-only)
  endif()
  execute_process(
    COMMAND "${CUSTOMOPS_PYTHON}" "${PROJECT_SOURCE_DIR}/cmake/python/customops_cuda_toolchain.py" ${args}
    OUTPUT_VARIABLE found ERROR_VARIABLE why RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    string(STRIP "${why}" why)
    message(FATAL_ERROR "${why}")
  endif()
  list(GET found 0 nvcc)
  list(GET found 1 source)
  message(STATUS "customops: CUDA compiler ${nvcc} (${source})")
  if(source STREQUAL "pypi")
    _customops_pypi_toolkit_root("${nvcc}" root)
    # customops_cuda_toolkit_root() then points torch's CMake at the layout, as at any toolkit.
    set(nvcc "${root}/bin/nvcc")
  endif()
  set(CMAKE_CUDA_COMPILER "${nvcc}" CACHE FILEPATH "CUDA compiler" FORCE)
  set(CUSTOMOPS_CUDA_COMPILER_SOURCE "${source}" CACHE INTERNAL "")
endfunction()

# torch's own view of this machine's GPUs, as "8.6;9.0"; empty without one.
function(_customops_local_cuda_archs out)
  execute_process(
    COMMAND "${CUSTOMOPS_PYTHON}" -c
      "import torch; print(';'.join(sorted({'%d.%d' % torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())})) if torch.cuda.is_available() else '')"
    OUTPUT_VARIABLE archs OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  set(${out} "${archs}" PARENT_SCOPE)
endfunction()

function(_customops_default_cuda_archs out)
  _customops_local_cuda_archs(archs)
  if(archs)
    message(STATUS "customops: building for this machine's GPUs (${archs}); set TORCH_CUDA_ARCH_LIST for others")
    set(${out} "${archs}" PARENT_SCOPE)
    return()
  endif()
  execute_process(COMMAND "${CMAKE_CUDA_COMPILER}" --list-gpu-code OUTPUT_VARIABLE supported ERROR_QUIET)
  set(archs "")
  foreach(arch IN LISTS CUSTOMOPS_DEFAULT_CUDA_ARCHS)
    string(REPLACE "." "" sm "${arch}")
    if(supported MATCHES "sm_${sm}[\r\n]")
      list(APPEND archs "${arch}")
    endif()
  endforeach()
  list(POP_BACK archs newest)
  list(APPEND archs "${newest}+PTX")
  message(STATUS "customops: no GPU here; building for ${archs} (set TORCH_CUDA_ARCH_LIST to choose)")
  set(${out} "${archs}" PARENT_SCOPE)
endfunction()

if(CUSTOMOPS_TORCH_CUDA_VERSION)
  if(CUSTOMOPS_WITH_CUDA STREQUAL "OFF")
    customops_torch_cuda_runtime_target("${CUSTOMOPS_TORCH_CMAKE_PREFIX}")
  else()
    if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
      _customops_pick_cuda_compiler()
    elseif(NOT DEFINED CUSTOMOPS_CUDA_COMPILER_SOURCE)
      set(CUSTOMOPS_CUDA_COMPILER_SOURCE "given" CACHE INTERNAL "")
    endif()
    include(CheckLanguage)
    check_language(CUDA)
    customops_cuda_toolkit_root()
    if(NOT TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
      _customops_default_cuda_archs(TORCH_CUDA_ARCH_LIST)
    endif()
    # torch chooses architectures itself and ignores (with a warning) CMake's own.
    set(CMAKE_CUDA_ARCHITECTURES OFF)
  endif()
endif()
