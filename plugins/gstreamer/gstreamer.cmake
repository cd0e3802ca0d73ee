# The libreyolo GStreamer element, on the shared library and its public API only.
add_library(gstlibreyolo MODULE ${CMAKE_CURRENT_LIST_DIR}/gstlibreyolo.c)
target_link_libraries(gstlibreyolo PRIVATE libreyolo_shared PkgConfig::GST m)
target_include_directories(gstlibreyolo PRIVATE ${PROJECT_SOURCE_DIR}/include)
# GLib's type macros cast function pointers; GStreamer's headers are not ours to fix.
target_compile_options(gstlibreyolo PRIVATE -Wno-pedantic)
# GST_ELEMENT_ERROR records __FILE__: the installed plugin names no build-machine path.
target_compile_options(gstlibreyolo PRIVATE -fmacro-prefix-map=${PROJECT_SOURCE_DIR}/=)
set_target_properties(gstlibreyolo PROPERTIES
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/gstreamer
  INSTALL_RPATH "$ORIGIN/..")
install(TARGETS gstlibreyolo LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/gstreamer-1.0)
set(LY_GSTREAMER_PLUGIN_DIR ${CMAKE_BINARY_DIR}/gstreamer)
