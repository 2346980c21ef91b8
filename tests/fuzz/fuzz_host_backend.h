// A backend whose storage is host memory and which has no kernels: enough for the readers that
// put what they read into tensors (Tensor::from_host, Tensor::to_host), without a backend plugin.
#ifndef TRAINYARD_TESTS_FUZZ_FUZZ_HOST_BACKEND_H_
#define TRAINYARD_TESTS_FUZZ_FUZZ_HOST_BACKEND_H_

#include <cstddef>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "trainyard/backend.h"

namespace trainyard::fuzz {

class HostBackend final : public Backend {
 public:
  std::string device_name() const override { return "fuzz-host"; }

  std::shared_ptr<Storage> allocate(std::size_t bytes) override {
    return std::make_shared<HostStorage>(*this, bytes);
  }
  void copy_from_host(Storage& storage, std::size_t offset, const void* src,
                      std::size_t bytes) override {
    auto& host = static_cast<HostStorage&>(storage);
    FUZZ_CHECK(offset <= host.bytes.size() && bytes <= host.bytes.size() - offset,
               "copy_from_host past the storage's end");
    if (bytes > 0) std::memcpy(host.bytes.data() + offset, src, bytes);
  }
  void copy_to_host(const Storage& storage, std::size_t offset, void* dst,
                    std::size_t bytes) override {
    const auto& host = static_cast<const HostStorage&>(storage);
    FUZZ_CHECK(offset <= host.bytes.size() && bytes <= host.bytes.size() - offset,
               "copy_to_host past the storage's end");
    if (bytes > 0) std::memcpy(dst, host.bytes.data() + offset, bytes);
  }
  void synchronize() override {}
  std::span<const KernelRegistration> kernels() const override { return {}; }
  AllocatorStats allocator_stats() const override { return {}; }

 private:
  struct HostStorage final : Storage {
    HostStorage(HostBackend& owner, std::size_t size) : owner(owner), bytes(size) {}
    std::size_t size_bytes() const override { return bytes.size(); }
    Backend& backend() const override { return owner; }
    HostBackend& owner;
    std::vector<unsigned char> bytes;
  };
};

}  // namespace trainyard::fuzz

#endif  // TRAINYARD_TESTS_FUZZ_FUZZ_HOST_BACKEND_H_
