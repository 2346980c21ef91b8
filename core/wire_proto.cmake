# cmake -DIN=core/proto/X.proto -DOUT=.../trainyard/wire/X.proto -P wire_proto.cmake
#
# Rewrites one of the core's protos as the executables' own copy (core/CMakeLists.txt,
# trainyard_wire_protos): package trainyard.tf -> trainyard.wire.tf (od, onnx alike), and the
# file registered as trainyard/wire/X.proto, so that the copy and the core's (hidden) original
# never collide in libprotobuf's process-wide descriptor pool. The wire format, field numbers
# and defaults are the original's.
file(READ ${IN} text)
string(REGEX REPLACE "\npackage (trainyard\\.)?([a-z_]+);" "\npackage trainyard.wire.\\2;"
       text "${text}")
string(REGEX REPLACE "\nimport \"([a-z_]+\\.proto)\";" "\nimport \"trainyard/wire/\\1\";"
       text "${text}")
file(WRITE ${OUT}.tmp "${text}")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUT}.tmp)
