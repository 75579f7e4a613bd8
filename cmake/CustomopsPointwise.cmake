# A pointwise operator is its maths alone: kernels/<name>.h, one struct deriving from pw::Formula
# (kernels/core/pointwise.h). Its CPU and CUDA kernels and its registration are one line each, the same for every
# such op, so they are written here into the build tree, per header found, instead of three one-line files per op
# in the source tree.
#
#   customops_pointwise_ops_of(<headers> <names var> <structs var>)
#   customops_pointwise_sources(<cpu sources var> <cuda sources var> <other sources var>)
#   customops_pointwise_executorch_sources(<per instruction set sources var> <registration sources var>)

# The pointwise ops among <headers>: each header that defines a struct deriving from pw::Formula (at the start of
# a line, as kernels/<name>.h do), <name> in <names_var> and that struct in <structs_var>, in the same order. What
# marks an op is the base, not an include of kernels/core/pointwise.h: a header may use the formulas' functions
# without being an op. The scaffold (customops.dev.new_op) finds the pointwise ops by the same line.
function(customops_pointwise_ops_of headers names_var structs_var)
  set(names "")
  set(op_structs "")
  foreach(header IN LISTS headers)
    file(STRINGS ${header} structs REGEX "^struct [A-Za-z0-9_]+ : pw::Formula {")
    list(LENGTH structs count)
    if(count EQUAL 0)
      continue()
    elseif(NOT count EQUAL 1)
      message(FATAL_ERROR "customops: ${header} defines ${count} structs deriving from pw::Formula; a pointwise "
                          "op's header (kernels/<op>.h) defines one, the op's")
    endif()
    string(REGEX REPLACE "^struct ([A-Za-z0-9_]+) : .*" "\\1" op_struct "${structs}")
    get_filename_component(name ${header} NAME_WE)
    list(APPEND names ${name})
    list(APPEND op_structs ${op_struct})
  endforeach()
  set(${names_var} ${names} PARENT_SCOPE)
  set(${structs_var} ${op_structs} PARENT_SCOPE)
endfunction()

function(_customops_pointwise_ops names_var structs_var)
  file(GLOB headers CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/kernels/*.h)
  customops_pointwise_ops_of("${headers}" names op_structs)
  set(${names_var} ${names} PARENT_SCOPE)
  set(${structs_var} ${op_structs} PARENT_SCOPE)
endfunction()

# The sources of libtorch's kernels and registration.
function(customops_pointwise_sources cpu_var cuda_var other_var)
  set(cpu "")
  set(cuda "")
  set(other "")
  set(dir ${PROJECT_BINARY_DIR}/pointwise)
  _customops_pointwise_ops(names op_structs)
  foreach(name op_struct IN ZIP_LISTS names op_structs)
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

# The sources of ExecuTorch's kernels (cmake/CustomopsExecutorch.cmake): each op's forward, compiled once per
# instruction set, and its out variant's registration with ExecuTorch's runtime (kernels/executorch/pointwise.h).
function(customops_pointwise_executorch_sources isa_var registration_var)
  set(isa "")
  set(registration "")
  set(dir ${PROJECT_BINARY_DIR}/pointwise/executorch)
  _customops_pointwise_ops(names op_structs)
  foreach(name op_struct IN ZIP_LISTS names op_structs)
    file(CONFIGURE OUTPUT ${dir}/isa/${name}.cpp @ONLY CONTENT
"// Written by cmake/CustomopsPointwise.cmake from kernels/${name}.h.
#include \"kernels/${name}.h\"

#include \"kernels/executorch/isa/pointwise.h\"

template struct customops::executorch_kernels::CPU_CAPABILITY::PointwiseForward<customops::${op_struct}>;
")
    file(CONFIGURE OUTPUT ${dir}/${name}.cpp @ONLY CONTENT
"// Written by cmake/CustomopsPointwise.cmake from kernels/${name}.h: ${name}.out in ExecuTorch's runtime.
#include \"kernels/${name}.h\"

#include \"kernels/executorch/pointwise.h\"

EXECUTORCH_LIBRARY(customops, \"${name}.out\",
                   customops::executorch_kernels::PointwiseOut<customops::${op_struct}>::out);
")
    list(APPEND isa ${dir}/isa/${name}.cpp)
    list(APPEND registration ${dir}/${name}.cpp)
  endforeach()
  set(${isa_var} ${isa} PARENT_SCOPE)
  set(${registration_var} ${registration} PARENT_SCOPE)
endfunction()
