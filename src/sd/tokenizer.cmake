# The CLIP tokenizer of onnx2ggml-sd, include()d from the top-level CMakeLists.txt (paths are relative to the
# repository root). Its Unicode and HTML tables are generated at build time from ${ONNX2GGML_PYTHON}'s unicodedata
# and html modules (src/sd/gen_unicode_tables.py); nothing generated is committed.
#   o2g_sd_tokenizer  static library: src/sd/clip_tokenizer.{h,cpp}, namespace onnx2ggml::sd
#   sd_tokenize       its test driver (tests/sd_pipeline/test_tokenizer.py)
set(_o2g_sd_gen_dir ${CMAKE_CURRENT_BINARY_DIR}/sd)
set(_o2g_sd_tables ${_o2g_sd_gen_dir}/o2g_unicode_tables.inc)
add_custom_command(OUTPUT ${_o2g_sd_tables}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${_o2g_sd_gen_dir}
  COMMAND ${ONNX2GGML_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/src/sd/gen_unicode_tables.py ${_o2g_sd_tables}
  DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/sd/gen_unicode_tables.py
  COMMENT "onnx2ggml-sd: Unicode tables for the CLIP tokenizer (${ONNX2GGML_PYTHON})"
  VERBATIM)

add_library(o2g_sd_tokenizer STATIC ${CMAKE_CURRENT_SOURCE_DIR}/src/sd/clip_tokenizer.cpp ${_o2g_sd_tables})
target_include_directories(o2g_sd_tokenizer PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/src/sd PRIVATE ${_o2g_sd_gen_dir})
target_compile_options(o2g_sd_tokenizer PRIVATE -Wall -Wextra)
set_target_properties(o2g_sd_tokenizer PROPERTIES POSITION_INDEPENDENT_CODE ON)

add_executable(sd_tokenize ${CMAKE_CURRENT_SOURCE_DIR}/src/sd/sd_tokenize.cpp)
target_link_libraries(sd_tokenize PRIVATE o2g_sd_tokenizer)
target_compile_options(sd_tokenize PRIVATE -Wall -Wextra)
