#include "trainyard/autodiff.h"

#include <unordered_map>

#include "engine/autodiff_internal.h"
#include "trainyard/backend.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"

namespace trainyard {
namespace {

thread_local bool g_recording = true;

bool is_float(DType d) {
  return d == DType::kF32 || d == DType::kF64 || d == DType::kBF16 || d == DType::kF16;
}

Edge edge_of(const Tensor& t) {
  const std::shared_ptr<AutogradMeta>& meta = t.autograd_meta();
  if (!meta) return {};
  if (meta->grad_fn) return {meta->grad_fn, meta->output_nr, nullptr};
  if (meta->is_leaf) return {nullptr, 0, meta};
  return {};
}

void attach(const char* op, std::vector<Edge> edges, std::span<Tensor> outputs,
            BackwardFn backward) {
  auto node = std::make_shared<Node>();
  node->op = op;
  node->inputs = std::move(edges);
  node->backward = std::move(backward);
  node->output_shapes.reserve(outputs.size());
  for (uint32_t i = 0; i < outputs.size(); ++i) {
    node->output_shapes.push_back(outputs[i].shape());
    node->output_dtypes.push_back(outputs[i].dtype());
    if (node->backend == nullptr && outputs[i].defined()) node->backend = &outputs[i].backend();
    auto meta = std::make_shared<AutogradMeta>();
    meta->grad_fn = node;
    meta->output_nr = i;
    outputs[i].set_autograd_meta(std::move(meta));
  }
}

// The producer of `consumer`'s input 0 when the two fuse their gradients (autodiff_internal.h):
// it made input 0 with the activation the consumer expects, from its one output; `pending` (the
// walk's count of edges into each node not yet walked) says the consumer is the last use of that
// output, and `buffers` that no other use gave it a gradient. The consumer's other inputs take
// no gradient.
Node* fusable_producer(const Node& consumer, const std::unordered_map<Node*, int>& pending,
                       const std::unordered_map<Node*, std::vector<Tensor>>& buffers) {
  if (!consumer.input0_preactivation_grad || consumer.inputs.empty()) return nullptr;
  const Edge& edge = consumer.inputs[0];
  Node* producer = edge.node.get();
  if (producer == nullptr || !producer->backward_from_preactivation ||
      producer->output_activation != consumer.input0_activation ||
      producer->output_shapes.size() != 1 || edge.output_nr != 0) {
    return nullptr;
  }
  auto uses = pending.find(producer);
  if (uses == pending.end() || uses->second != 1) return nullptr;
  auto given = buffers.find(producer);
  if (given != buffers.end() && !given->second.empty() && given->second[0].defined()) {
    return nullptr;
  }
  for (std::size_t i = 1; i < consumer.inputs.size(); ++i) {
    if (consumer.inputs[i].connected()) return nullptr;
  }
  return producer;
}

}  // namespace

bool grad_recording_enabled() { return g_recording; }

NoGradScope::NoGradScope() : previous_(g_recording) { g_recording = false; }
NoGradScope::~NoGradScope() { g_recording = previous_; }

bool Tensor::requires_grad() const {
  return autograd_ && (autograd_->is_leaf || autograd_->grad_fn != nullptr);
}

void Tensor::set_requires_grad(bool enabled) {
  if (!enabled) {
    autograd_.reset();
    return;
  }
  if (!is_float(dtype_)) {
    throw InvalidArgument("only float tensors can require a gradient; " + description() + " is " +
                          dtype_name(dtype_));
  }
  auto meta = std::make_shared<AutogradMeta>();
  meta->is_leaf = true;
  autograd_ = std::move(meta);
}

bool should_record(std::initializer_list<const Tensor*> inputs) {
  if (!g_recording) return false;
  for (const Tensor* t : inputs) {
    if (t != nullptr && t->requires_grad()) return true;
  }
  return false;
}

bool should_record(std::span<const Tensor> inputs) {
  if (!g_recording) return false;
  for (const Tensor& t : inputs) {
    if (t.requires_grad()) return true;
  }
  return false;
}

void record(const char* op, std::initializer_list<const Tensor*> inputs, std::span<Tensor> outputs,
            BackwardFn backward) {
  std::vector<Edge> edges;
  edges.reserve(inputs.size());
  for (const Tensor* t : inputs) edges.push_back(t ? edge_of(*t) : Edge{});
  attach(op, std::move(edges), outputs, std::move(backward));
}

void record(const char* op, std::span<const Tensor> inputs, std::span<Tensor> outputs,
            BackwardFn backward) {
  std::vector<Edge> edges;
  edges.reserve(inputs.size());
  for (const Tensor& t : inputs) edges.push_back(edge_of(t));
  attach(op, std::move(edges), outputs, std::move(backward));
}

std::vector<Tensor> gradients(const Tensor& loss, std::span<const Tensor> sources,
                              const Tensor& grad_loss) {
  return gradients_as_ready(loss, sources, nullptr, grad_loss);
}

namespace {

// A source's final gradient as on_ready gets it. The receiver may write into it while the walk
// goes on (a data-parallel reducer all-reduces it in place), so where it shares storage with a
// gradient still waiting for its node (an add hands its one output gradient to both inputs), the
// source gets a copy of its own and the walk keeps reading the original.
Tensor unshared_with_pending(const Tensor& gradient,
                             const std::unordered_map<Node*, std::vector<Tensor>>& pending) {
  if (!gradient.defined()) return gradient;
  for (const auto& [node, gradients] : pending) {
    for (const Tensor& g : gradients) {
      if (g.defined() && g.storage() == gradient.storage()) return ops::copy(gradient);
    }
  }
  return gradient;
}

}  // namespace

std::vector<Tensor> gradients_as_ready(const Tensor& loss, std::span<const Tensor> sources,
                                       const GradientReadyFn& on_ready, const Tensor& grad_loss) {
  if (!loss.defined()) throw InvalidArgument("gradients: the loss is an undefined tensor");
  if (!loss.requires_grad()) {
    throw InvalidArgument("gradients: the loss " + loss.description() +
                          " does not depend on any tensor that requires a gradient");
  }
  Tensor seed = grad_loss;
  if (!seed.defined()) {
    if (loss.num_elements() != 1) {
      throw InvalidArgument("gradients: the loss " + loss.description() +
                            " is not a scalar; pass grad_loss");
    }
    NoGradScope no_grad;
    seed = ops::ones(loss.backend(), loss.shape(), loss.dtype());
  } else if (seed.shape() != loss.shape() || seed.dtype() != loss.dtype()) {
    throw InvalidArgument("gradients: grad_loss " + seed.description() +
                          " does not match the loss " + loss.description());
  }

  NoGradScope no_grad;
  std::unordered_map<const AutogradMeta*, Tensor> leaf_grads;
  auto accumulate = [](Tensor& slot, const Tensor& g) {
    slot = slot.defined() ? ops::add(slot, g) : g;
  };

  const std::shared_ptr<AutogradMeta>& root_meta = loss.autograd_meta();
  if (root_meta->is_leaf) {
    accumulate(leaf_grads[root_meta.get()], seed);
  } else {
    // Count, for every node, how many recorded inputs point at it.
    std::unordered_map<Node*, int> pending;
    // With on_ready: for every source, how many recorded edges lead to it; its gradient is
    // final when the last of them has been walked.
    std::unordered_map<const AutogradMeta*, std::size_t> source_index;
    std::unordered_map<const AutogradMeta*, int> leaf_edges;
    if (on_ready) {
      for (std::size_t i = 0; i < sources.size(); ++i) {
        if (const AutogradMeta* meta = sources[i].autograd_meta().get()) source_index[meta] = i;
      }
    }
    std::vector<Node*> stack = {root_meta->grad_fn.get()};
    pending[root_meta->grad_fn.get()] = 0;
    while (!stack.empty()) {
      Node* node = stack.back();
      stack.pop_back();
      for (const Edge& e : node->inputs) {
        if (on_ready && e.leaf && source_index.count(e.leaf.get())) ++leaf_edges[e.leaf.get()];
        if (!e.node) continue;
        auto [it, inserted] = pending.try_emplace(e.node.get(), 0);
        ++it->second;
        if (inserted) stack.push_back(e.node.get());
      }
    }
    std::unordered_map<Node*, std::vector<Tensor>> buffers;
    buffers[root_meta->grad_fn.get()].resize(root_meta->grad_fn->output_shapes.size());
    buffers[root_meta->grad_fn.get()][root_meta->output_nr] = seed;
    std::vector<std::shared_ptr<Node>> ready = {root_meta->grad_fn};
    while (!ready.empty()) {
      std::shared_ptr<Node> node = std::move(ready.back());
      ready.pop_back();
      std::vector<Tensor> grad_outputs = std::move(buffers[node.get()]);
      buffers.erase(node.get());
      grad_outputs.resize(node->output_shapes.size());
      for (std::size_t i = 0; i < grad_outputs.size(); ++i) {
        if (!grad_outputs[i].defined()) {
          grad_outputs[i] =
              ops::zeros(*node->backend, node->output_shapes[i], node->output_dtypes[i]);
        }
      }
      if (!node->backward) {
        throw InvalidArgument(std::string("gradients: the recorded ") + node->op +
                              " was already differentiated; record the forward pass again");
      }
      std::vector<Tensor> grad_inputs;
      if (Node* producer = fusable_producer(*node, pending, buffers)) {
        // The consumer gives d loss / d z; the producer's backward starts from it.
        grad_inputs.push_back(node->input0_preactivation_grad(grad_outputs));
        producer->backward = std::move(producer->backward_from_preactivation);
      } else {
        grad_inputs = node->backward(grad_outputs);
      }
      node->backward = nullptr;  // frees what the op saved for its gradient
      node->backward_from_preactivation = nullptr;
      node->input0_preactivation_grad = nullptr;
      grad_outputs.clear();
      // After this node's gradients are added up: a source whose last edge this was is final.
      std::vector<const AutogradMeta*> finished;
      if (on_ready) {
        for (const Edge& e : node->inputs) {
          auto it = e.leaf ? leaf_edges.find(e.leaf.get()) : leaf_edges.end();
          if (it != leaf_edges.end() && --it->second == 0) finished.push_back(e.leaf.get());
        }
      }
      for (std::size_t i = 0; i < node->inputs.size() && i < grad_inputs.size(); ++i) {
        const Edge& e = node->inputs[i];
        if (!e.connected() || !grad_inputs[i].defined()) {
          if (e.node && --pending[e.node.get()] == 0) ready.push_back(e.node);
          continue;
        }
        if (e.leaf) {
          accumulate(leaf_grads[e.leaf.get()], grad_inputs[i]);
          continue;
        }
        std::vector<Tensor>& buffer = buffers[e.node.get()];
        if (buffer.empty()) buffer.resize(e.node->output_shapes.size());
        accumulate(buffer[e.output_nr], grad_inputs[i]);
        if (--pending[e.node.get()] == 0) ready.push_back(e.node);
      }
      // Edges past the returned gradients still count as visited.
      for (std::size_t i = grad_inputs.size(); i < node->inputs.size(); ++i) {
        const Edge& e = node->inputs[i];
        if (e.node && --pending[e.node.get()] == 0) ready.push_back(e.node);
      }
      for (const AutogradMeta* leaf : finished) {
        auto grad = leaf_grads.find(leaf);
        if (grad == leaf_grads.end()) {
          on_ready(source_index.at(leaf), Tensor());
          continue;
        }
        grad->second = unshared_with_pending(grad->second, buffers);
        on_ready(source_index.at(leaf), grad->second);
      }
    }
  }

  std::vector<Tensor> result;
  result.reserve(sources.size());
  for (const Tensor& source : sources) {
    const std::shared_ptr<AutogradMeta>& meta = source.autograd_meta();
    if (!meta || !meta->is_leaf) {
      throw InvalidArgument("gradients: source " + source.description() +
                            " is not a leaf that requires a gradient (set_requires_grad)");
    }
    auto it = leaf_grads.find(meta.get());
    result.push_back(it == leaf_grads.end() ? Tensor() : it->second);
  }
  return result;
}

}  // namespace trainyard
