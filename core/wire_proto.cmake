# cmake -DIN=core/proto/X.proto -DOUT=.../trainyard/wire/X.proto [-DPACKAGE=trainyard.wire
#       -DIMPORT_DIR=trainyard/wire] -P wire_proto.cmake
#
# Rewrites one of Trainyard's protos as another library's own copy (core/CMakeLists.txt,
# trainyard_wire_protos; the detection task's copy of pipeline.proto): package trainyard.tf ->
# PACKAGE.tf (trainyard.wire.tf by default; od, onnx, config alike), and the file registered as
# IMPORT_DIR/X.proto, so that the copy and the original never collide in libprotobuf's
# process-wide descriptor pool. The wire format, field numbers and defaults are the original's;
# imports of libprotobuf's own files (google/protobuf/any.proto) are kept.
if(NOT DEFINED PACKAGE)
  set(PACKAGE trainyard.wire)
endif()
if(NOT DEFINED IMPORT_DIR)
  set(IMPORT_DIR trainyard/wire)
endif()
file(READ ${IN} text)
string(REGEX REPLACE "\npackage (trainyard\\.)?([a-z_]+);" "\npackage ${PACKAGE}.\\2;"
       text "${text}")
string(REGEX REPLACE "\nimport \"([a-z_]+\\.proto)\";" "\nimport \"${IMPORT_DIR}/\\1\";"
       text "${text}")
file(WRITE ${OUT}.tmp "${text}")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUT}.tmp)
