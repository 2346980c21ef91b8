#include "formats/captured_tensor.h"

#include <cstring>
#include <set>

namespace trainyard::export_internal {

CapturedKey key_of(const Tensor& t) {
  return {t.storage().get(), t.byte_offset(), t.shape().to_vector(), t.dtype()};
}

LiveOps live_ops(const std::vector<GraphCapture::Op>& ops, const std::vector<Tensor>& outputs,
                 const std::function<bool(const Storage*)>& is_variable,
                 const std::function<void(const GraphCapture::Op&)>& in_place) {
  LiveOps result;
  std::set<const Storage*> needed;
  for (const Tensor& t : outputs) {
    needed.insert(t.storage().get());
    ++result.uses[t.storage().get()];
  }
  result.live.assign(ops.size(), false);
  for (std::size_t i = ops.size(); i-- > 0;) {
    const GraphCapture::Op& op = ops[i];
    bool live = false;
    for (const Tensor& t : op.outputs) {
      const Storage* storage = t.storage().get();
      live = live || (needed.count(storage) > 0 && !is_variable(storage));
    }
    if (op.outputs.empty()) {
      for (const Tensor& t : op.inputs) {
        if (t.defined() && needed.count(t.storage().get()) > 0) in_place(op);
      }
    }
    if (!live) continue;
    result.live[i] = true;
    for (const Tensor& t : op.inputs) {
      if (!t.defined()) continue;
      needed.insert(t.storage().get());
      ++result.uses[t.storage().get()];
    }
  }
  return result;
}

void permute_dims(std::vector<std::byte>& data, std::vector<int64_t>& shape,
                  const std::vector<int64_t>& perm, std::size_t element) {
  const std::size_t rank = shape.size();
  std::vector<int64_t> in_strides(rank, 1), out_dims(rank), index(rank, 0);
  for (std::size_t i = rank; i-- > 1;) in_strides[i - 1] = in_strides[i] * shape[i];
  for (std::size_t i = 0; i < rank; ++i) out_dims[i] = shape[static_cast<std::size_t>(perm[i])];
  std::vector<std::byte> out(data.size());
  const std::size_t count = element == 0 ? 0 : data.size() / element;
  for (std::size_t n = 0; n < count; ++n) {
    int64_t offset = 0;
    for (std::size_t i = 0; i < rank; ++i) {
      offset += index[i] * in_strides[static_cast<std::size_t>(perm[i])];
    }
    std::memcpy(out.data() + n * element, data.data() + static_cast<std::size_t>(offset) * element,
                element);
    for (std::size_t i = rank; i-- > 0;) {
      if (++index[i] < out_dims[i]) break;
      index[i] = 0;
    }
  }
  data = std::move(out);
  shape = std::move(out_dims);
}

}  // namespace trainyard::export_internal
