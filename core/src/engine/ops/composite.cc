// Composites (composite.h): declaration, the choice between a fused kernel and the
// composition, and the custom gradient's tape node. Also Tensor::to, the one op that moves a
// tensor between devices.
#include "trainyard/composite.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "engine/ops/common.h"
#include "engine/ops/op_def.h"
#include "platform/library_of.h"
#include "trainyard/core/graph_capture.h"

namespace trainyard {
namespace {
using namespace ops_internal;

// The attribute bytes a call passed, kept for the gradient.
std::shared_ptr<std::vector<std::byte>> copy_attrs(const void* attrs, std::size_t size) {
  if (attrs == nullptr || size == 0) return nullptr;
  auto copy = std::make_shared<std::vector<std::byte>>(size);
  std::memcpy(copy->data(), attrs, size);
  return copy;
}

// What declarations of one name must agree on to share it.
struct Signature {
  int num_inputs = 0, num_outputs = 0;
  std::size_t attrs_size = 0;
  std::string summary;
  bool infer = false, gradient = false;

  explicit Signature(const CompositeSpec& s)
      : num_inputs(s.num_inputs),
        num_outputs(s.num_outputs),
        attrs_size(s.attrs_size),
        summary(s.summary),
        infer(static_cast<bool>(s.infer)),
        gradient(static_cast<bool>(s.gradient)) {}
  Signature() = default;

  bool operator==(const Signature&) const = default;

  std::string describe() const {
    return std::to_string(num_inputs) + " inputs, " + std::to_string(num_outputs) + " outputs, " +
           std::to_string(attrs_size) + " attribute bytes, " + (infer ? "with" : "without") +
           " infer, " + (gradient ? "with" : "without") + " gradient, summary '" + summary + "'";
  }
};

}  // namespace

// Every composite name ever declared in the process and its current owners. Entries are never
// erased (the op table keeps pointers to their strings); a name with no owner is withdrawn.
struct CompositeTable {
  struct Entry {
    std::string name, summary;   // the strings the op table's OpInfo points to
    Signature signature;         // what every owner's declaration agrees on
    std::string first_library;   // who declared the current signature, for messages
    const OpDef* def = nullptr;  // null while withdrawn
    std::vector<Composite*> owners;
    std::unique_ptr<Composite> tag;  // OpDef::composite: a stable, non-null marker
  };

  static CompositeTable& get() {
    static auto* table = new CompositeTable();  // never destroyed: outlives static destructors
    return *table;
  }

  std::mutex mutex;
  std::map<std::string, Entry, std::less<>> entries;
  // The path of the library that declared each live composite (its spec's functions are that
  // library's code), for the holds its tape nodes take (library_hold).
  std::map<const Composite*, std::string> library_paths;

  CompositeDeclaration declare(CompositeSpec spec, const std::string& library,
                               const std::string& library_path) {
    std::lock_guard<std::mutex> lock(mutex);
    Entry& e = entries[spec.name];
    if (!e.owners.empty() && !(e.signature == Signature(spec))) {
      throw InvalidArgument("Composite::declare: composite '" + spec.name + "' is declared by " +
                            e.first_library + " with " + e.signature.describe() + "; " + library +
                            " declares it with " + Signature(spec).describe() +
                            " (declarations of one name must agree to share it)");
    }
    auto shared = std::make_shared<const CompositeSpec>(std::move(spec));
    const CompositeSpec& s = *shared;
    if (e.owners.empty()) {
      e.name = s.name;
      e.summary = s.summary;
      e.signature = Signature(s);
      e.first_library = library;
      if (!e.tag) e.tag.reset(new Composite(nullptr, nullptr));
      OpInfo info{e.name.c_str(),    "composite", s.num_inputs, s.num_outputs, "",
                  e.summary.c_str(), true,        s.attrs_size};
      e.def = &register_composite_def(info, e.tag.get());  // throws for an op's name
    }
    auto* composite = new Composite(std::move(shared), e.def);
    e.owners.push_back(composite);
    library_paths[composite] = library_path;
    return CompositeDeclaration(composite);
  }

  // A hold that keeps the library which declared `composite` mapped while a tape node that
  // runs (and at last destroys) its spec's gradient lives: a node may outlive the plugin's
  // objects (work still queued on a stream holds its tensors), and the library's loader may
  // close it meanwhile. Null for the core's own composites.
  std::shared_ptr<void> library_hold(const Composite* composite) {
    std::string path;
    {
      std::lock_guard<std::mutex> lock(mutex);
      auto it = library_paths.find(composite);
      if (it != library_paths.end()) path = it->second;
    }
    return pin_loaded_library(path);
  }

  void withdraw(Composite* composite) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = entries.find(composite->name());
    if (it != entries.end()) {
      Entry& e = it->second;
      std::erase(e.owners, composite);
      library_paths.erase(composite);
      if (e.owners.empty() && e.def != nullptr) {
        withdraw_composite_def(*e.def);
        e.def = nullptr;
      }
    }
    delete composite;
  }
};

CompositeDeclaration Composite::declare(CompositeSpec spec) {
  const std::string library = library_of(__builtin_return_address(0));
  if (spec.name.empty()) throw InvalidArgument("Composite::declare: the name is empty");
  if (!spec.compose) {
    throw InvalidArgument("Composite::declare: composite '" + spec.name + "' has no compose");
  }
  if (spec.num_inputs < 0 || spec.num_outputs < 1) {
    throw InvalidArgument("Composite::declare: composite '" + spec.name +
                          "' needs num_inputs >= 0 and num_outputs >= 1");
  }
  return CompositeTable::get().declare(std::move(spec), library,
                                       library_path_of(__builtin_return_address(0)));
}

CompositeDeclaration& CompositeDeclaration::operator=(CompositeDeclaration&& other) noexcept {
  if (this != &other) {
    release();
    composite_ = other.composite_;
    other.composite_ = nullptr;
  }
  return *this;
}

CompositeDeclaration::~CompositeDeclaration() { release(); }

void CompositeDeclaration::release() noexcept {
  if (composite_ == nullptr) return;
  CompositeTable::get().withdraw(composite_);
  composite_ = nullptr;
}

bool Composite::has_fused_kernel(Backend& backend) const {
  return spec_->infer && KernelDispatch::has(backend, *static_cast<const OpDef*>(def_));
}

std::vector<Tensor> Composite::operator()(std::span<const Tensor> inputs, const void* attrs) const {
  const char* name = spec_->name.c_str();
  if (static_cast<int>(inputs.size()) != spec_->num_inputs) {
    invalid(name, "expects " + std::to_string(spec_->num_inputs) + " inputs, got " +
                      std::to_string(inputs.size()));
  }
  if (inputs.empty()) invalid(name, "a composite needs at least one input to find its device");
  Backend* backend = nullptr;
  for (const Tensor& t : inputs) {
    require_defined(name, t, "an input");
    if (backend == nullptr) {
      backend = &t.backend();
    } else if (&t.backend() != backend) {
      invalid(name, "inputs are on different devices: " + inputs[0].description() + " and " +
                        t.description());
    }
  }
  const OpDef& def = *static_cast<const OpDef*>(def_);
  CompositeCall call{inputs, attrs};
  const bool needs_grad = should_record(inputs);
  // While a graph is captured (ONNX export), the composition's ops are what gets recorded: an
  // exporter maps the core's ops, not a fused kernel's name.
  KernelFn fused = spec_->infer && GraphCapture::active() == nullptr
                       ? KernelDispatch::find_or_null(*backend, def)
                       : nullptr;

  std::vector<Tensor> outputs;
  if (fused != nullptr && (!needs_grad || spec_->gradient)) {
    std::vector<TensorType> types = spec_->infer(call);
    if (static_cast<int>(types.size()) != spec_->num_outputs) {
      throw Error(std::string("composite ") + name + ": infer returned " +
                  std::to_string(types.size()) + " outputs, declared " +
                  std::to_string(spec_->num_outputs));
    }
    outputs.reserve(types.size());
    for (const TensorType& t : types) outputs.push_back(Tensor::empty(*backend, t.shape, t.dtype));
    launch(*backend, def, inputs, outputs, attrs);
  } else if (needs_grad && spec_->gradient) {
    NoGradScope no_grad;
    outputs = spec_->compose(call);
  } else {
    return spec_->compose(call);  // autodiff goes through the composition's ops
  }
  if (needs_grad && spec_->gradient) {
    for (Tensor& t : outputs) t = detached(t);
    std::vector<Tensor> saved_inputs, saved_outputs;
    std::vector<bool> input_needs;
    for (const Tensor& t : inputs) {
      saved_inputs.push_back(detached(t));
      input_needs.push_back(t.requires_grad());
    }
    for (const Tensor& t : outputs) saved_outputs.push_back(detached(t));
    auto saved_attrs = copy_attrs(attrs, spec_->attrs_size);
    // The spec goes before the hold on its library (members are destroyed in reverse order).
    struct HeldSpec {
      std::shared_ptr<void> library;
      std::shared_ptr<const CompositeSpec> spec;
    };
    auto held =
        std::make_shared<const HeldSpec>(HeldSpec{CompositeTable::get().library_hold(this), spec_});
    record(name, inputs, outputs,
           [held, saved_inputs, saved_outputs, input_needs,
            saved_attrs](std::span<const Tensor> grad_outputs) -> std::vector<Tensor> {
             const CompositeSpec* spec = held->spec.get();
             CompositeGrad g{
                 CompositeCall{saved_inputs, saved_attrs ? saved_attrs->data() : nullptr},
                 saved_outputs, grad_outputs, [&input_needs](std::size_t i) {
                   return i < input_needs.size() && input_needs[i];
                 }};
             std::vector<Tensor> grads = spec->gradient(g);
             if (grads.size() != saved_inputs.size()) {
               throw Error("composite " + spec->name + ": its gradient returned " +
                           std::to_string(grads.size()) + " tensors for " +
                           std::to_string(saved_inputs.size()) + " inputs");
             }
             return grads;
           });
  }
  return outputs;
}

Tensor Tensor::to(Backend& device) const {
  if (!defined()) throw InvalidArgument("Tensor::to: the tensor is undefined");
  Backend& source = backend();
  if (&source == &device) return *this;
  Tensor out = Tensor::empty(device, shape(), dtype());
  std::size_t bytes = size_bytes();
  std::unique_ptr<HostBuffer> staging = device.allocate_host_staging(bytes);
  to_host(staging->data(), bytes);
  device.copy_from_host(*out.storage(), out.byte_offset(), staging->data(), bytes);
  if (should_record({this})) {
    Backend* home = &source;
    record("to", {this}, std::span<Tensor>(&out, 1),
           [home](std::span<const Tensor> g) -> std::vector<Tensor> { return {g[0].to(*home)}; });
  }
  return out;
}

}  // namespace trainyard
