# Lets programs link against a torch installed from PyPI whatever else is on the machine.
#
# Such a torch loads CUDA's libraries, cuDNN and NCCL from the nvidia-* wheels beside it (its
# libraries' RPATH names site-packages/nvidia/*/lib). When a program links libtorch_cuda.so, the
# linker looks for that library's own dependencies along the program's rpath first, which CMake
# fills with the CUDA toolkit's lib folder; a toolkit NCCL older than the wheel's then leaves
# symbols undefined (libtorch_cuda.so: undefined reference to `ncclCommResume'). Pointing
# -rpath-link at the wheels' folders makes the link resolve what the program will load at run time.
#
# Used by the build (cmake/CustomopsTorch.cmake) and by the installed package's
# customopsConfig.cmake, after find_package(Torch):
#   customops_torch_link_fixes(<target>)   # adds the options to <target>'s INTERFACE_LINK_OPTIONS

function(customops_torch_runtime_dirs out)
  set(dirs "")
  if(TORCH_INSTALL_PREFIX AND CMAKE_SYSTEM_NAME STREQUAL "Linux")
    file(GLOB wheel_dirs LIST_DIRECTORIES true "${TORCH_INSTALL_PREFIX}/../nvidia/*/lib")
    foreach(dir IN LISTS wheel_dirs)
      if(IS_DIRECTORY "${dir}")
        get_filename_component(dir "${dir}" REALPATH)
        list(APPEND dirs "${dir}")
      endif()
    endforeach()
  endif()
  set(${out} "${dirs}" PARENT_SCOPE)
endfunction()

function(customops_torch_link_fixes target)
  customops_torch_runtime_dirs(dirs)
  foreach(dir IN LISTS dirs)
    set_property(TARGET ${target} APPEND PROPERTY INTERFACE_LINK_OPTIONS "LINKER:-rpath-link,${dir}")
  endforeach()
endfunction()

# The CUDA runtime torch's wheels brought (site-packages/nvidia/cu<major>/lib/libcudart.so.N), found from torch's
# CMake prefix (site-packages/torch/share/cmake); empty where there is none.
#   customops_torch_cuda_runtime(<out> <torch cmake prefixes...>)
function(customops_torch_cuda_runtime out)
  set(runtime "")
  foreach(prefix IN LISTS ARGN)
    file(GLOB found "${prefix}/../../../nvidia/cu*/lib/libcudart.so.*")
    if(found)
      list(GET found 0 runtime)
      get_filename_component(runtime "${runtime}" REALPATH)
      break()
    endif()
  endforeach()
  set(${out} "${runtime}" PARENT_SCOPE)
endfunction()

# torch's CMake package, for a CUDA torch, looks for a whole CUDA toolkit (nvcc included) only to define
# torch::cudart. A build or program that compiles no CUDA code needs just the runtime torch's wheels brought:
# defined here first, torch's CMake takes it and looks for nothing more.
#   customops_torch_cuda_runtime_target(<torch cmake prefixes...>)   # before find_package(Torch)
function(customops_torch_cuda_runtime_target)
  if(TARGET torch::cudart)
    return()
  endif()
  add_library(torch::cudart INTERFACE IMPORTED GLOBAL)
  customops_torch_cuda_runtime(runtime ${ARGN})
  if(runtime)
    get_filename_component(lib "${runtime}" DIRECTORY)
    get_filename_component(root "${lib}" DIRECTORY)
    set_target_properties(torch::cudart PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${root}/include" INTERFACE_LINK_LIBRARIES "${runtime}")
    message(STATUS "customops: no CUDA compiler; linking torch's CUDA runtime (${runtime})")
  endif()
endfunction()

# torch's CMake package finds the toolkit through the first nvcc on PATH, not through CMAKE_CUDA_COMPILER: with
# no nvcc on PATH (nvcc from PyPI) or another one first, it fails or mixes toolkits. Points it at the toolkit of
# CMAKE_CUDA_COMPILER where that compiler sits in a toolkit's layout (bin/nvcc beside include/cuda_runtime.h).
#   customops_cuda_toolkit_root()   # before find_package(Torch)
function(customops_cuda_toolkit_root)
  if(NOT CMAKE_CUDA_COMPILER OR CUDA_TOOLKIT_ROOT_DIR)
    return()
  endif()
  get_filename_component(bin "${CMAKE_CUDA_COMPILER}" DIRECTORY)
  get_filename_component(root "${bin}" DIRECTORY)
  if(EXISTS "${root}/include/cuda_runtime.h")
    set(CUDA_TOOLKIT_ROOT_DIR "${root}" CACHE PATH "The CUDA toolkit of CMAKE_CUDA_COMPILER")
    set(CUDAToolkit_ROOT "${root}" CACHE PATH "The CUDA toolkit of CMAKE_CUDA_COMPILER")
  endif()
endfunction()
