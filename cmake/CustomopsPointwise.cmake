# A pointwise operator is its maths alone: kernels/<name>.h, one struct over kernels/common/pointwise.h. Its CPU
# and CUDA kernels and its registration are one line each, the same for every such op, so they are written here
# into the build tree, per header found, instead of three one-line files per op in the source tree.
#
#   customops_pointwise_sources(<cpu sources var> <cuda sources var> <other sources var>)
function(customops_pointwise_sources cpu_var cuda_var other_var)
  file(GLOB headers CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/kernels/*.h)
  set(cpu "")
  set(cuda "")
  set(other "")
  set(dir ${PROJECT_BINARY_DIR}/pointwise)
  foreach(header IN LISTS headers)
    file(STRINGS ${header} uses REGEX "^#include \"kernels/common/pointwise.h\"")
    if(NOT uses)
      continue()
    endif()
    file(STRINGS ${header} structs REGEX "^struct [A-Za-z0-9_]+ {")
    list(LENGTH structs count)
    if(NOT count EQUAL 1)
      message(FATAL_ERROR "customops: ${header} includes kernels/common/pointwise.h, so it is a pointwise op's "
                          "maths and must define exactly one struct at the start of a line (found ${count})")
    endif()
    string(REGEX REPLACE "^struct ([A-Za-z0-9_]+) {.*" "\\1" op_struct "${structs}")
    get_filename_component(name ${header} NAME_WE)
    file(CONFIGURE OUTPUT ${dir}/cpu/${name}.cpp @ONLY CONTENT
"// Written by cmake/CustomopsPointwise.cmake from kernels/${name}.h.
#include \"kernels/${name}.h\"

#include \"kernels/cpu/common/pointwise.h\"

template struct customops::cpu::CPU_CAPABILITY::Pointwise<customops::${op_struct}>;
")
    file(CONFIGURE OUTPUT ${dir}/cuda/${name}.cu @ONLY CONTENT
"// Written by cmake/CustomopsPointwise.cmake from kernels/${name}.h.
#include \"kernels/${name}.h\"

#include \"kernels/cuda/common/pointwise.cuh\"

template struct customops::cuda::Pointwise<customops::${op_struct}>;
")
    file(CONFIGURE OUTPUT ${dir}/registration/${name}.cpp @ONLY CONTENT
"// Written by cmake/CustomopsPointwise.cmake from kernels/${name}.h: the op under every dispatch key, its
// kernels, autograd and autocast policy (registration/pointwise.h).
#include \"kernels/${name}.h\"
#include \"registration/pointwise.h\"

CUSTOMOPS_REGISTER_POINTWISE(customops::${op_struct})
")
    list(APPEND cpu ${dir}/cpu/${name}.cpp)
    list(APPEND cuda ${dir}/cuda/${name}.cu)
    list(APPEND other ${dir}/registration/${name}.cpp)
  endforeach()
  set(${cpu_var} ${cpu} PARENT_SCOPE)
  set(${cuda_var} ${cuda} PARENT_SCOPE)
  set(${other_var} ${other} PARENT_SCOPE)
endfunction()
