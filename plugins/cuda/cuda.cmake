# The CUDA provider plugin, libreyolo_kernels_cuda.so, built with nvcc (included
# from the top-level CMakeLists.txt when LIBREYOLO_WITH_CUDA is on and nvcc was
# found; LY_NVCC is its path).
#
# Not enable_language(CUDA): the project's global C flags (-Wpedantic, the
# sanitizers) are not nvcc's, and the plugin needs nothing from the library but
# its headers. The output lands in <build>/plugins/, not next to the command, so
# nothing loads it unless asked: LIBREYOLO_KERNELS_PATH=<build>/plugins.
set(LIBREYOLO_CUDA_ARCHS "75;80;86;89;90;100;120" CACHE STRING
    "GPU architectures (sm_XX) the CUDA plugin carries code for; PTX of the last one is added for newer GPUs")
set(LIBREYOLO_CUDA_HOST_COMPILER "" CACHE FILEPATH "Host compiler for nvcc (-ccbin); empty: nvcc's default")

set(LY_CUDA_PLUGIN_DIR ${CMAKE_BINARY_DIR}/plugins)
set(LY_CUDA_PLUGIN ${LY_CUDA_PLUGIN_DIR}/libreyolo_kernels_cuda.so)
set(ly_cuda_source ${CMAKE_CURRENT_LIST_DIR}/libreyolo_kernels_cuda.cu)

set(ly_cuda_gencode)
foreach(arch ${LIBREYOLO_CUDA_ARCHS})
  list(APPEND ly_cuda_gencode -gencode arch=compute_${arch},code=sm_${arch})
endforeach()
list(GET LIBREYOLO_CUDA_ARCHS -1 ly_cuda_last_arch)
list(APPEND ly_cuda_gencode -gencode arch=compute_${ly_cuda_last_arch},code=compute_${ly_cuda_last_arch})
set(ly_cuda_ccbin)
if(LIBREYOLO_CUDA_HOST_COMPILER)
  set(ly_cuda_ccbin -ccbin ${LIBREYOLO_CUDA_HOST_COMPILER})
endif()

# -fmad=false: no contraction behind our back (the kernel also spells every
# rounding out with __fmul_rn/__fadd_rn/__fmaf_rn). -cudart static: the library
# loads where no CUDA runtime is installed; it finds the driver at run time.
# -frandom-seed and --strip-all make the bytes reproducible (no random or
# temporary-file names): the same toolchain rebuilds the file the hub lock pins.
add_custom_command(
  OUTPUT ${LY_CUDA_PLUGIN}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${LY_CUDA_PLUGIN_DIR}
  COMMAND ${LY_NVCC} ${ly_cuda_ccbin} -O3 -std=c++17 -shared -fmad=false -cudart static
          -frandom-seed=libreyolo_kernels_cuda -Xlinker=--strip-all -Werror all-warnings -Xcompiler=-fPIC,-fvisibility=hidden,-Wall,-Wextra,-Werror
          -I${PROJECT_SOURCE_DIR}/include ${ly_cuda_gencode} -o ${LY_CUDA_PLUGIN} ${ly_cuda_source}
  DEPENDS ${ly_cuda_source} ${CMAKE_CURRENT_LIST_DIR}/msda_cuda_kernels.h
          ${PROJECT_SOURCE_DIR}/include/libreyolo/kernels.h
          ${PROJECT_SOURCE_DIR}/include/libreyolo/libreyolo.h
          ${PROJECT_SOURCE_DIR}/include/libreyolo/msda.h
  COMMENT "nvcc: libreyolo_kernels_cuda.so (${LIBREYOLO_CUDA_ARCHS})"
  VERBATIM)
add_custom_target(libreyolo_kernels_cuda ALL DEPENDS ${LY_CUDA_PLUGIN})
