# Generates a header that holds a text file as a C++ raw string literal.
# Usage: cmake -DINPUT=file -DOUTPUT=header -DNAME=symbol -P embed.cmake
file(READ "${INPUT}" CONTENT)
string(FIND "${CONTENT}" ")KVGATE_EMBED\"" CLASH)
if(NOT CLASH EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw-string delimiter")
endif()
file(WRITE "${OUTPUT}" "// Generated from ${INPUT}; do not edit.\n#pragma once\n#include <string_view>\ninline constexpr std::string_view ${NAME} = R\"KVGATE_EMBED(${CONTENT})KVGATE_EMBED\";\n")
