# What `pip install .` puts in the wheel, checked without pip: CMake's install of the component
# "python" (the extension and the command, as pyproject.toml asks scikit-build-core for) plus the
# package's Python files (its wheel.packages) into a scratch folder; then, from there alone,
# import qkv, compute, and run `python -m qkv --version` (in that folder: not the build's qkv/).
#   cmake -DBUILD_DIR=… -DSOURCE_DIR=… -DWORK_DIR=… -DPYTHON=… -P check_install.cmake
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --component python
                        --prefix ${WORK_DIR}
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "cmake --install --component python failed (${rc})")
endif()
file(GLOB files ${SOURCE_DIR}/python/qkv/*)
file(COPY ${files} DESTINATION ${WORK_DIR}/qkv)
foreach(expected qkv/bin/qkv qkv/__init__.py qkv/py.typed)
  if(NOT EXISTS ${WORK_DIR}/${expected})
    message(FATAL_ERROR "the installed package has no ${expected}")
  endif()
endforeach()
file(GLOB extension ${WORK_DIR}/qkv/_qkv*.so)
if(NOT extension)
  message(FATAL_ERROR "the installed package has no extension qkv/_qkv*.so")
endif()
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env PYTHONPATH=${WORK_DIR} ${PYTHON} -c
          "import numpy as np, qkv, os; assert os.path.dirname(qkv.__file__) == os.path.join('${WORK_DIR}', 'qkv'), qkv.__file__; out = qkv.attention(np.eye(2), np.eye(2), np.array([[10.0], [20.0]])); assert abs(out[0, 0] - 13.302384506733431) < 1e-12, out; print('ok')"
  WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc OR NOT out MATCHES "ok")
  message(FATAL_ERROR "import qkv from the installed package failed: ${out}${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env PYTHONPATH=${WORK_DIR} ${PYTHON} -m qkv --version
                WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc OR NOT out MATCHES "^qkv ")
  message(FATAL_ERROR "python -m qkv --version from the installed package: ${rc} ${out}${err}")
endif()
message(STATUS "the installed package imports, computes and runs the command")
