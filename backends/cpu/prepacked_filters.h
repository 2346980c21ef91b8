// Filters kept in the layout a convolution chose, for a backend whose filters never change after
// their first use (the cpu backend's option prepack_filters, which the inference library sets):
// a convolution whose filter layout differs from the user's HWIO reorders the filter on every
// call otherwise, which for one image through ResNet-50 reads and writes its 100 MB of weights
// once per inference. ONNX Runtime prepacks a session's weights the same way at its start.
//
// A filter is found by its storage, byte offset and the layout it is packed in (oneDNN's memory
// descriptor); a storage that was freed is never matched (its weak pointer has expired, even
// when a new storage reuses the address). The copies live as long as the
// backend; an entry whose storage has gone is dropped when the next filter is packed. Safe to
// call from several threads. Wrong results follow if a packed filter's values change in place.
#ifndef TRAINYARD_BACKENDS_CPU_PREPACKED_FILTERS_H_
#define TRAINYARD_BACKENDS_CPU_PREPACKED_FILTERS_H_

#include <cstddef>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "oneapi/dnnl/dnnl.hpp"
#include "trainyard/tensor.h"

namespace trainyard::cpu {

class PrepackedFilters {
 public:
  // The packed copy of `filter` in `layout` (64-byte aligned), made by `pack` (which writes the
  // copy at the pointer it gets) on first use.
  void* get(const Tensor& filter, const dnnl::memory::desc& layout,
            const std::function<void(void*)>& pack);

 private:
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  struct Packed {
    std::weak_ptr<Storage> storage;
    dnnl::memory::desc layout;
    std::unique_ptr<void, Free> data;
  };
  using Key = std::pair<const Storage*, std::size_t>;  // the filter's storage and byte offset

  std::mutex mutex_;
  std::map<Key, std::vector<Packed>> packed_;
};

}  // namespace trainyard::cpu

#endif  // TRAINYARD_BACKENDS_CPU_PREPACKED_FILTERS_H_
