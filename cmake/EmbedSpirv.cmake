# cmake -DSPV=in.spv -DOUT=out.cpp -DNAME=name -P EmbedSpirv.cmake
# Writes the SPIR-V words as a C++ array in namespace vkattn::detail.
file(READ ${SPV} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR words "${n} / 8")
# SPIR-V is little-endian words: reorder each 4-byte group into a 0x........ literal.
string(REGEX REPLACE "(..)(..)(..)(..)" "0x\\4\\3\\2\\1u," body "${hex}")
string(REGEX REPLACE "((0x........u,){8})" "\\1\n" body "${body}")
file(WRITE ${OUT} "// Generated from ${NAME}.spv by cmake/EmbedSpirv.cmake.\n#include <cstddef>\n#include <cstdint>\nnamespace vkattn::detail {\nextern const uint32_t spirv_${NAME}[] = {\n${body}\n};\nextern const std::size_t spirv_${NAME}_words = ${words};\n}\n")
