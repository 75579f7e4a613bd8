# libcustomops passes C++ objects (std::string, streams, exceptions) to and
# from libtorch, so both must use the one shared libstdc++ of the process. A
# compiler that links libstdc++ statically (some toolchains do so by default)
# builds a library that crashes when, e.g., an error message is formatted.
# Refuse it at configure time.
set(_probe_dir "${CMAKE_BINARY_DIR}/CMakeFiles/customops_libstdcxx_probe")
file(WRITE "${_probe_dir}/probe.cpp" "#include <iostream>\nint main() { std::cout << 1L << std::endl; }\n")
try_compile(_probe_ok "${_probe_dir}/build" SOURCES "${_probe_dir}/probe.cpp"
            COPY_FILE "${_probe_dir}/probe" OUTPUT_VARIABLE _probe_log)
if(_probe_ok)
  file(STRINGS "${_probe_dir}/probe" _needs_shared_libstdcxx REGEX "libstdc\\+\\+\\.so" LIMIT_COUNT 1)
  if(NOT _needs_shared_libstdcxx)
    message(FATAL_ERROR
      "customops: ${CMAKE_CXX_COMPILER} links libstdc++ statically, so libcustomops would carry a "
      "second libstdc++ beside libtorch's and crash. Use a compiler that links it dynamically, "
      "e.g. CXX=/usr/bin/g++ CUDAHOSTCXX=/usr/bin/g++ (and a fresh build directory).")
  endif()
endif()
