# CUSTOMOPS_PRECOMPILE_HEADERS=ON (the default): the torch headers that a target's C++ sources include are
# parsed once per target, into a precompiled header, instead of once per source. They are most of a source's
# compile time here: quick_gelu's registration took 24.5 s, of which 16 s parsing <ATen/ATen.h>,
# <torch/library.h> and <torch/autograd.h>, and 11.7 s with them precompiled (g++ 12, -O3). CUDA sources
# are left out: nvcc takes no precompiled header. Each target gets its own, since its flags (a CPU kernel
# variant's instruction set, the sanitizers) must match its sources'.
option(CUSTOMOPS_PRECOMPILE_HEADERS "Precompile the torch headers once per target (C++ sources)" ON)

function(customops_precompile_headers target)
  if(NOT CUSTOMOPS_PRECOMPILE_HEADERS)
    return()
  endif()
  set(headers)
  foreach(header IN LISTS ARGN)
    # `>` would close the generator expression: $<ANGLE-R> writes it.
    string(REPLACE ">" "$<ANGLE-R>" header "${header}")
    list(APPEND headers "$<$<COMPILE_LANGUAGE:CXX>:${header}>")
  endforeach()
  target_precompile_headers(${target} PRIVATE ${headers})
endfunction()
