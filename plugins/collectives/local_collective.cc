// LocalCollective: the collective of a job with one replica (one process, one device). Every
// reduction over a single replica is that replica's value, so the calls only check their
// arguments; the trainer uses this class when no distributed collective is configured.
#include "trainyard/collective.h"
#include "trainyard/error.h"
#include "trainyard/plugin.h"

namespace trainyard::collectives {
namespace {

class LocalCollective final : public Collective {
 public:
  explicit LocalCollective(const Options&) {}

  int rank() const override { return 0; }
  int world_size() const override { return 1; }

  void all_reduce(Tensor& tensor, ReduceOp) override { check(tensor, "all_reduce"); }

  void broadcast(Tensor& tensor, int root) override {
    check(tensor, "broadcast");
    if (root != 0) {
      throw InvalidArgument("LocalCollective::broadcast: root " + std::to_string(root) +
                            " is out of range for a world of size 1");
    }
  }

  void barrier() override {}

 private:
  static void check(const Tensor& tensor, const char* what) {
    if (!tensor.defined()) {
      throw InvalidArgument(std::string("LocalCollective::") + what + ": undefined tensor");
    }
  }
};

}  // namespace
}  // namespace trainyard::collectives

#define TRAINYARD_COLLECTIVE_CLASSES(X)                                   \
  X(collective, LocalCollective, trainyard::collectives::LocalCollective, \
    "One replica: rank 0 of a world of size 1")
TRAINYARD_PLUGIN(collectives, 0, 1, 0, TRAINYARD_COLLECTIVE_CLASSES)
