# The op families, read once from the rows of TRAINYARD_CORE_OP_FAMILIES in
# sdk/include/trainyard/ops/families.h (the one list; that header says what each column means).
# Used by this tree's CMakeLists (core, backends, conformance, tests); not installed.
#
# Sets, in the including scope:
#   TRAINYARD_OP_FAMILIES                every family, in the list's order
#   TRAINYARD_OP_FAMILIES_<COLUMN>       the families whose COLUMN (CPU, CUDA, REFERENCE,
#                                        CONFORMANCE) is not `none`
# and defines trainyard_op_family_sources(), which names each family's file in a directory.
# Editing families.h re-runs CMake. Each directory that needs the lists includes this file (the
# variables are the including directory's).

set(TRAINYARD_OP_FAMILIES_HEADER
    ${CMAKE_CURRENT_LIST_DIR}/../include/trainyard/ops/families.h)
if(NOT CMAKE_SCRIPT_MODE_FILE)
  set_property(DIRECTORY ${CMAKE_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
               ${TRAINYARD_OP_FAMILIES_HEADER})
endif()

# trainyard_read_op_families(HEADER): parses HEADER's rows (`  X(family, core, cpu, cuda,
# reference, conformance) \`) into the variables above, in the caller's scope; a row it cannot
# read or a column value it does not know is a fatal error naming the row.
function(trainyard_read_op_families header)
  # The rows end in a backslash, which would escape a list's separator: matched, not split.
  file(READ ${header} text)
  string(REGEX MATCHALL "\n *X\\([^\n]*\\)" rows "${text}")
  set(families)
  foreach(column CPU CUDA REFERENCE CONFORMANCE)
    set(${column})
  endforeach()
  set(id "[a-z][a-z0-9_]*")
  foreach(row IN LISTS rows)
    if(NOT row MATCHES "^\n *X\\(( *${id}),( *${id}),( *${id}),( *${id}),( *${id}),( *${id})\\)")
      message(FATAL_ERROR "${header}: cannot read the op family row '${row}' "
                          "(expected X(family, core, cpu, cuda, reference, conformance))")
    endif()
    string(STRIP "${CMAKE_MATCH_1}" family)
    string(STRIP "${CMAKE_MATCH_2}" core)
    string(STRIP "${CMAKE_MATCH_3}" cpu)
    string(STRIP "${CMAKE_MATCH_4}" cuda)
    string(STRIP "${CMAKE_MATCH_5}" reference)
    string(STRIP "${CMAKE_MATCH_6}" conformance)
    if(family IN_LIST families)
      message(FATAL_ERROR "${header}: op family '${family}' is listed twice")
    endif()
    if(NOT core MATCHES "^(ops|ops_composites|composites|composites_on_use)$")
      message(FATAL_ERROR "${header}: op family '${family}': core column '${core}' is not one of "
                          "ops, ops_composites, composites, composites_on_use")
    endif()
    foreach(pair "CPU;${cpu};kernels" "CUDA;${cuda};kernels" "REFERENCE;${reference};kernels"
                 "CONFORMANCE;${conformance};cases")
      list(GET pair 0 column)
      list(GET pair 1 value)
      list(GET pair 2 yes)
      if(value STREQUAL yes)
        list(APPEND ${column} ${family})
      elseif(NOT value STREQUAL "none")
        string(TOLOWER ${column} name)
        message(FATAL_ERROR "${header}: op family '${family}': ${name} column '${value}' is "
                            "neither ${yes} nor none")
      endif()
    endforeach()
    list(APPEND families ${family})
  endforeach()
  if(NOT families)
    message(FATAL_ERROR "${header}: no op family rows found")
  endif()
  set(TRAINYARD_OP_FAMILIES ${families} PARENT_SCOPE)
  foreach(column CPU CUDA REFERENCE CONFORMANCE)
    set(TRAINYARD_OP_FAMILIES_${column} ${${column}} PARENT_SCOPE)
  endforeach()
endfunction()

# trainyard_op_family_sources(OUT FAMILIES DIR [OPTIONAL] PATTERN...): for each family of the
# list FAMILIES, the first of the PATTERNs (file names relative to DIR, with <family> for the
# family's name) that exists; appended to OUT. Without OPTIONAL, a family none of whose
# patterns exists is a fatal error naming the family, the files looked for and the list.
function(trainyard_op_family_sources out families dir)
  set(optional OFF)
  set(patterns ${ARGN})
  if(patterns AND "${ARGV3}" STREQUAL "OPTIONAL")
    set(optional ON)
    list(REMOVE_AT patterns 0)
  endif()
  set(sources ${${out}})
  foreach(family IN LISTS families)
    set(found "")
    set(tried "")
    foreach(pattern IN LISTS patterns)
      string(REPLACE "<family>" "${family}" file "${pattern}")
      list(APPEND tried "${dir}/${file}")
      if(EXISTS "${dir}/${file}")
        set(found "${file}")
        break()
      endif()
    endforeach()
    if(found)
      list(APPEND sources "${found}")
    elseif(NOT optional)
      list(JOIN tried " or " tried)
      message(FATAL_ERROR "op family '${family}' is listed in ${TRAINYARD_OP_FAMILIES_HEADER} "
                          "but its file ${tried} does not exist: add the file, or say `none` "
                          "in the family's row where this part legitimately lacks it")
    endif()
  endforeach()
  set(${out} ${sources} PARENT_SCOPE)
endfunction()

trainyard_read_op_families(${TRAINYARD_OP_FAMILIES_HEADER})
