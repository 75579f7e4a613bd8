# CUSTOMOPS_SANITIZE=ON: AddressSanitizer and UndefinedBehaviorSanitizer over everything this project compiles
# (the library, the C++ tests and examples). For CPU-only builds (-DCUSTOMOPS_WITH_CUDA=OFF): nvcc's device
# code cannot take these flags, and compute-sanitizer covers the CUDA kernels (scripts/gpu_check.sh).
#
# libtorch and Python are not instrumented, so a Python process loads the ASan runtime first
# (LD_PRELOAD=$(g++ -print-file-name=libasan.so)); scripts/sanitize.sh does that. Undefined behaviour aborts
# at its first report (-fno-sanitize-recover), so a test run cannot pass with one. vptr is left out: it checks
# dynamic types across libtorch's uninstrumented classes and reports what is not wrong.
option(CUSTOMOPS_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer (CPU-only builds)" OFF)

if(CUSTOMOPS_SANITIZE)
  if(CUSTOMOPS_HAVE_CUDA)
    message(FATAL_ERROR "customops: CUSTOMOPS_SANITIZE=ON needs a CPU-only build (-DCUSTOMOPS_WITH_CUDA=OFF)")
  endif()
  # -O1 -g1 (after the build type's flags, so they win): instrumented at -O2 with full debug information, the
  # unrolled depthwise kernels took 12-38 minutes a file to compile; at -O1 -g1, under 2 (and line numbers
  # remain for the reports).
  set(_customops_sanitize -fsanitize=address,undefined -fno-sanitize=vptr -fno-sanitize-recover=undefined
                          -fno-omit-frame-pointer -O1 -g1)
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:${_customops_sanitize}>")
  add_link_options(-fsanitize=address,undefined)
  message(STATUS "customops: AddressSanitizer and UndefinedBehaviorSanitizer ON")
endif()
