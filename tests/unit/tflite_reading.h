// Reading an exported TFLite flatbuffer back in the TFLite export's unit tests
// (tflite_export_test.cc, tflite_detection_export_test.cc), through the code flatc generates
// from core/proto/tflite_schema.fbs: the verified model, its first subgraph's tensors, operator
// codes, shapes and constant buffers.
#ifndef TRAINYARD_TESTS_UNIT_TFLITE_READING_H_
#define TRAINYARD_TESTS_UNIT_TFLITE_READING_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tflite_schema_generated.h"

namespace trainyard::tflite_reading {

namespace fb = trainyard::tflite;

// The model, after the verifier accepted the bytes (which must outlive it).
inline const fb::Model* verified(const std::string& bytes) {
  flatbuffers::Verifier verifier(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  EXPECT_TRUE(fb::VerifyModelBuffer(verifier));
  return fb::GetModel(bytes.data());
}

inline fb::BuiltinOperator builtin_code(const fb::Model* model, const fb::Operator* op) {
  return model->operator_codes()->Get(op->opcode_index())->builtin_code();
}

// The first subgraph's operators' codes, in order.
inline std::vector<fb::BuiltinOperator> operators(const fb::Model* model) {
  std::vector<fb::BuiltinOperator> out;
  for (const fb::Operator* op : *model->subgraphs()->Get(0)->operators()) {
    out.push_back(builtin_code(model, op));
  }
  return out;
}

inline const fb::Tensor* tensor(const fb::Model* model, int index) {
  return model->subgraphs()->Get(0)->tensors()->Get(static_cast<flatbuffers::uoffset_t>(index));
}

inline std::vector<int32_t> shape(const fb::Tensor* t) {
  return {t->shape()->begin(), t->shape()->end()};
}

inline std::vector<int32_t> signature(const fb::Tensor* t) {
  if (t->shape_signature() == nullptr) return {};
  return {t->shape_signature()->begin(), t->shape_signature()->end()};
}

// A constant tensor's buffer as values of T (empty for a computed tensor).
template <class T>
std::vector<T> buffer_values(const fb::Model* model, const fb::Tensor* t) {
  const fb::Buffer* buffer = model->buffers()->Get(t->buffer());
  if (buffer->data() == nullptr) return {};
  std::vector<T> out(buffer->data()->size() / sizeof(T));
  std::memcpy(out.data(), buffer->data()->data(), out.size() * sizeof(T));
  return out;
}

}  // namespace trainyard::tflite_reading

#endif  // TRAINYARD_TESTS_UNIT_TFLITE_READING_H_
