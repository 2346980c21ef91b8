#include "prepacked_filters.h"

#include <iterator>
#include <new>

namespace trainyard::cpu {

void* PrepackedFilters::get(const Tensor& filter, const dnnl::memory::desc& layout,
                            const std::function<void(void*)>& pack) {
  const std::shared_ptr<Storage>& storage = filter.storage();
  std::lock_guard<std::mutex> lock(mutex_);
  // Forget the copies of storages that have gone (their addresses may be reused).
  for (auto it = packed_.begin(); it != packed_.end();) {
    std::erase_if(it->second, [](const Packed& p) { return p.storage.expired(); });
    it = it->second.empty() ? packed_.erase(it) : std::next(it);
  }
  std::vector<Packed>& copies = packed_[{storage.get(), filter.byte_offset()}];
  for (const Packed& p : copies) {
    if (p.layout == layout) return p.data.get();
  }
  const std::size_t bytes = (layout.get_size() + 63) / 64 * 64;
  void* data = std::aligned_alloc(64, bytes == 0 ? 64 : bytes);
  if (data == nullptr) throw std::bad_alloc();
  Packed p{storage, layout, std::unique_ptr<void, Free>(data)};
  pack(data);
  copies.push_back(std::move(p));
  return copies.back().data.get();
}

}  // namespace trainyard::cpu
