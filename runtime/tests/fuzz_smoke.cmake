# Runs the safetensors fuzzer briefly on a fresh copy of the seed corpus, so
# the committed corpus stays small: cmake -DFUZZER= -DCORPUS= -DDICT= -DWORK=
# -DSECONDS= -P fuzz_smoke.cmake.  Fails if the fuzzer finds anything.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/artifacts)
file(COPY ${CORPUS}/ DESTINATION ${WORK}/corpus)
execute_process(
  COMMAND ${FUZZER} -max_total_time=${SECONDS} -dict=${DICT} -print_final_stats=1
          -artifact_prefix=${WORK}/artifacts/ ${WORK}/corpus
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "fuzzer exited with ${rc}; crashing input in ${WORK}/artifacts")
endif()
