cmake_minimum_required(VERSION 3.20)
# The CMake half of the op family list (sdk/cmake/TrainyardOpFamilies.cmake), on a copy of
# families.h with a fixture family added by one row: the row is read into the lists of each
# column, its files are found by name, and a listed family whose file is missing stops the
# configuration with an error naming the family, the file and the list.
# cmake -DSOURCE_DIR=... -DWORK_DIR=... -P check_op_family_sources.cmake
include(${SOURCE_DIR}/sdk/cmake/TrainyardOpFamilies.cmake)

if(MODE STREQUAL "missing_file")
  # A child run: the fixture family's cpu file does not exist.
  trainyard_read_op_families(${WORK_DIR}/families.h)
  set(TRAINYARD_OP_FAMILIES_HEADER ${WORK_DIR}/families.h)
  set(sources)
  list(FILTER TRAINYARD_OP_FAMILIES_CPU INCLUDE REGEX "^fixture$")
  trainyard_op_family_sources(sources "${TRAINYARD_OP_FAMILIES_CPU}" ${WORK_DIR}/cpu
                              kernels_<family>.cc)
  message(STATUS "no error")
  return()
endif()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR}/cpu)
file(READ ${TRAINYARD_OP_FAMILIES_HEADER} header)
string(REGEX REPLACE "(\n  X\\(mixture,[^\n]*\\))\n" "\\1 \\\\\n  X(fixture, ops, kernels, none, none, cases)\n"
       header "${header}")
file(WRITE ${WORK_DIR}/families.h "${header}")
trainyard_read_op_families(${WORK_DIR}/families.h)

function(expect what ok)
  if(NOT ${ok})
    message(FATAL_ERROR "FAIL: ${what}")
  endif()
  message(STATUS "ok: ${what}")
endfunction()
list(GET TRAINYARD_OP_FAMILIES -1 last)
set(is_last OFF)
if(last STREQUAL "fixture")
  set(is_last ON)
endif()
expect("the fixture row is the last family" is_last)
set(in_cpu OFF)
if(fixture IN_LIST TRAINYARD_OP_FAMILIES_CPU AND fixture IN_LIST TRAINYARD_OP_FAMILIES_CONFORMANCE)
  set(in_cpu ON)
endif()
expect("the fixture family has cpu kernels and conformance cases" in_cpu)
set(not_cuda ON)
if(fixture IN_LIST TRAINYARD_OP_FAMILIES_CUDA OR fixture IN_LIST TRAINYARD_OP_FAMILIES_REFERENCE)
  set(not_cuda OFF)
endif()
expect("the fixture family's `none` columns leave it out of cuda and the reference" not_cuda)
set(mixture_without_cuda ON)
if(mixture IN_LIST TRAINYARD_OP_FAMILIES_CUDA OR NOT mixture IN_LIST TRAINYARD_OP_FAMILIES_CPU)
  set(mixture_without_cuda OFF)
endif()
expect("the tree's mixture family is cpu-only" mixture_without_cuda)

file(WRITE ${WORK_DIR}/cpu/kernels_fixture.cc "")
set(sources)
trainyard_op_family_sources(sources "fixture" ${WORK_DIR}/cpu kernels_<family>.cu
                            kernels_<family>.cc)
set(found OFF)
if(sources STREQUAL "kernels_fixture.cc")
  set(found ON)
endif()
expect("the fixture family's file is found by name (the first pattern that exists)" found)
set(sources)
trainyard_op_family_sources(sources "fixture" ${WORK_DIR}/nowhere OPTIONAL kernels_<family>.cc)
set(skipped OFF)
if("${sources}" STREQUAL "")
  set(skipped ON)
endif()
expect("an OPTIONAL pattern that does not exist adds nothing" skipped)
file(REMOVE ${WORK_DIR}/cpu/kernels_fixture.cc)

execute_process(COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${SOURCE_DIR} -DWORK_DIR=${WORK_DIR}
                        -DMODE=missing_file -P ${CMAKE_CURRENT_LIST_FILE}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(refused OFF)
string(REGEX REPLACE "[ \n]+" " " err "${err}")  # CMake wraps the message
if(NOT rc EQUAL 0 AND err MATCHES "op family 'fixture' is listed in [^ ]*/families.h but its file [^ ]*/cpu/kernels_fixture.cc does not exist")
  set(refused ON)
endif()
if(NOT refused)
  message(STATUS "the child run said: ${err}")
endif()
expect("a listed family without its file stops the configuration, naming both" refused)
file(REMOVE_RECURSE ${WORK_DIR})
message(STATUS "PASS")
