# The order of libbrisk's text: the functions ordinary processes run
# (cmake/hot-text.list, written by scripts/hot_text.sh) first, and the
# library's DT_FINI beside them, so that the kernel's fault-around (64 KiB
# windows of a file's pages mapped around each fault) makes one window of
# the text resident instead of all of it. The linker's own default script
# is taken and only those two changes are made to it; a linker whose
# script does not have the expected shape gets none (the order is a
# matter of resident pages, never of behaviour).
# The hardened library runs other functions (its checks, its guard pages):
# it has a list of its own, cmake/hot-text-hardened.list.
set(BRISK_HOT_LIST ${CMAKE_CURRENT_SOURCE_DIR}/cmake/hot-text.list)
set(BRISK_HOT_LIST_HARDENED ${CMAKE_CURRENT_SOURCE_DIR}/cmake/hot-text-hardened.list)
set(BRISK_TEXT_LD ${CMAKE_BINARY_DIR}/brisk-text.ld)
set(BRISK_TEXT_LD_HARDENED ${CMAKE_BINARY_DIR}/brisk-text-hardened.ld)
set(BRISK_TEXT_LAYOUT OFF)
execute_process(
  COMMAND ${CMAKE_C_COMPILER} -shared -Wl,--verbose -x c /dev/null -o ${CMAKE_BINARY_DIR}/brisk-text-probe.so
  OUTPUT_VARIABLE _brisk_ld_verbose ERROR_QUIET RESULT_VARIABLE _brisk_ld_rc)
file(REMOVE ${CMAKE_BINARY_DIR}/brisk-text-probe.so)
if(_brisk_ld_rc EQUAL 0 AND EXISTS ${BRISK_HOT_LIST})
  string(FIND "${_brisk_ld_verbose}" "==================================================" _begin)
  string(FIND "${_brisk_ld_verbose}" "==================================================" _end REVERSE)
  if(_begin GREATER -1 AND _end GREATER _begin)
    math(EXPR _begin "${_begin} + 50")
    math(EXPR _len "${_end} - ${_begin}")
    string(SUBSTRING "${_brisk_ld_verbose}" ${_begin} ${_len} _script)
    set(_unlikely "    *(.text.unlikely .text.*_unlikely .text.unlikely.*)")
    set(_fini "  .fini           :\n  {\n    KEEP (*(SORT_NONE(.fini)))\n  }\n")
    set(_text "  .text           :\n  {\n")
    string(FIND "${_script}" "${_text}${_unlikely}" _at_text)
    string(FIND "${_script}" "${_fini}" _at_fini)
    if(_at_text GREATER -1 AND _at_fini GREATER _at_text)
      string(REPLACE "${_fini}" "" _script "${_script}")
      foreach(_which "" "_HARDENED")
        set(_list ${BRISK_HOT_LIST${_which}})
        if(NOT EXISTS ${_list})
          set(_list ${BRISK_HOT_LIST})
        endif()
        string(REPLACE "${_text}${_unlikely}"
               "${_fini}${_text}    INCLUDE ${_list}\n${_unlikely}" _out "${_script}")
        file(WRITE ${BRISK_TEXT_LD${_which}}
             "/* the linker's default script, hot text first (cmake/text_layout.cmake) */\n${_out}")
      endforeach()
      set(BRISK_TEXT_LAYOUT ON)
    endif()
  endif()
endif()
if(NOT BRISK_TEXT_LAYOUT)
  file(REMOVE ${BRISK_TEXT_LD} ${BRISK_TEXT_LD_HARDENED}) # tests/test_text_layout.sh skips without it
endif()
message(STATUS "libbrisk text layout (hot functions first): ${BRISK_TEXT_LAYOUT}")

# brisk_text_layout(target [HARDENED])
function(brisk_text_layout target)
  if(BRISK_TEXT_LAYOUT)
    set(_which "")
    if(ARGV1 STREQUAL "HARDENED" AND EXISTS ${BRISK_HOT_LIST_HARDENED})
      set(_which "_HARDENED")
    endif()
    target_link_options(${target} PRIVATE "-Wl,-T,${BRISK_TEXT_LD${_which}}")
    set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${BRISK_TEXT_LD${_which}} ${BRISK_HOT_LIST${_which}})
  endif()
endfunction()
