# cmake -DAR=ar -DMRI=script.mri -P merge_archives.cmake: runs ar's MRI script (CREATE, ADDLIB ..., SAVE),
# which merges static libraries into one (libonnx2ggml.a).
execute_process(COMMAND ${AR} -M INPUT_FILE ${MRI} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "merge_archives: ${AR} -M < ${MRI} failed (${rc})")
endif()
