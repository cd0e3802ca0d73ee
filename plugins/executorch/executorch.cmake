# Our kernel library for ExecuTorch's runtime (plugins/executorch/): the
# libreyolo::ms_deform_attn.out operator registered with ExecuTorch's kernel
# registry, libreyolo_executorch_kernels.a. Included from the top-level
# CMakeLists.txt only when LIBREYOLO_EXECUTORCH_ROOT names an ExecuTorch tree:
# ROOT/executorch (the sources) and ROOT/build (a build of them, as
# ../shared/tools/peers/executorch/build.sh makes: its generated headers). The
# default build needs none of it.
#
# Not enable_language(CXX) for the project: only this archive is C++, compiled
# with ExecuTorch's own flags and defines.
enable_language(CXX)
set(ly_et_src ${LIBREYOLO_EXECUTORCH_ROOT}/executorch)
set(ly_et_build ${LIBREYOLO_EXECUTORCH_ROOT}/build)
if(NOT EXISTS ${ly_et_src}/runtime/kernel/operator_registry.h OR
   NOT EXISTS ${ly_et_build}/executorch/include)
  message(FATAL_ERROR "LIBREYOLO_EXECUTORCH_ROOT=${LIBREYOLO_EXECUTORCH_ROOT}: expected "
                      "executorch/ (sources) and build/ (a build of them) there")
endif()
add_library(libreyolo_executorch_kernels STATIC
            ${CMAKE_CURRENT_LIST_DIR}/ms_deform_attn_kernel.cpp)
set_target_properties(libreyolo_executorch_kernels PROPERTIES
  OUTPUT_NAME reyolo_executorch_kernels CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON
  POSITION_INDEPENDENT_CODE ON)
target_compile_options(libreyolo_executorch_kernels PRIVATE -Wno-deprecated-declarations)
target_compile_definitions(libreyolo_executorch_kernels PRIVATE C10_USING_CUSTOM_GENERATED_MACROS
                           ET_USE_THREADPOOL)
target_include_directories(libreyolo_executorch_kernels PRIVATE
  ${PROJECT_SOURCE_DIR}/include ${ly_et_src}/.. ${ly_et_src}/runtime/core/portable_type/c10
  ${ly_et_build}/executorch/include ${ly_et_src}/backends/xnnpack/third-party/pthreadpool/include)
