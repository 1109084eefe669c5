# Installs the built qkv into a scratch prefix, then configures, builds and runs a tiny outside
# project that says find_package(qkv) and links qkv::qkv. Run with cmake -P (see tests/CMakeLists).
file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

run(${CMAKE_COMMAND} --install "${QKV_BUILD_DIR}" --prefix "${prefix}")
run(${CMAKE_COMMAND} -S "${CONSUMER_DIR}" -B "${WORK_DIR}/build" "-DCMAKE_PREFIX_PATH=${prefix}"
    -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build "${WORK_DIR}/build")
run("${WORK_DIR}/build/consumer")
if(NOT last_output MATCHES "out = 0\\.5 2\\.5"
   OR NOT last_output MATCHES "capture: 3 source tokens, heads 2, weights row sum 1\\.0000"
   OR NOT last_output MATCHES "registry: seq2seq, family transformer, 1 layer, 2 heads, translate yes"
   OR NOT last_output MATCHES "run: 3 blocks, 3 tokens, json yes"
   OR NOT last_output MATCHES "explain: html yes, steps yes")
  message(FATAL_ERROR "consumer printed an unexpected result:\n${last_output}")
endif()
message(STATUS "find_package(qkv) consumer: ${last_output}")
