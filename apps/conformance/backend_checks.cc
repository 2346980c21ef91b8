// Backend checks: every op the backend registers, run on the backend and on the independent
// reference backend (reference_backend.h: plain double-precision loops sharing no code with
// any backend) with the same inputs, benchdnn's way: forward outputs within per-case
// tolerances, the gradient rule (which runs the backward ops on each backend) against the
// reference's, and a rerun that must reproduce every output bit for bit. Plus memory round
// trips. The cpu backend is checked against the reference like any other.
//
// Ops the core exposes are called through ops::; the gradient helpers that only gradient rules
// use (sigmoid_grad, conv2d_backward_input, ...) are called through the backend's kernel table
// with outputs allocated here, as the core would.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "conformance.h"
#include "op_cases.h"
#include "reference_backend.h"
#include "trainyard/autodiff.h"
#include "trainyard/backend.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"

namespace trainyard::conformance {
namespace {

std::vector<double> input_values(const InputSpec& spec, uint64_t seed) {
  if (!spec.values.empty()) return spec.values;
  const std::size_t n = static_cast<std::size_t>(spec.shape.num_elements());
  std::vector<double> v =
      uniform_values(seed, n, spec.low, spec.integers ? spec.high + 1 : spec.high);
  if (spec.integers) {
    for (double& x : v) x = std::min(std::floor(x), spec.high);
  }
  return v;
}

bool is_float(DType d) {
  return d == DType::kF32 || d == DType::kF64 || d == DType::kBF16 || d == DType::kF16;
}

// One case's inputs, generated once on the host and uploaded to any backend.
struct HostInputs {
  std::vector<std::vector<double>> values;
  const OpCase* op_case = nullptr;

  Inputs upload(Backend& backend, bool requires_grad = false) const {
    Inputs out;
    for (std::size_t i = 0; i < values.size(); ++i) {
      const InputSpec& spec = op_case->inputs[i];
      Tensor t = make_tensor(backend, spec.shape, spec.dtype, values[i]);
      if (requires_grad && is_float(spec.dtype)) t.set_requires_grad(true);
      out.push_back(t);
    }
    return out;
  }
};

uint64_t case_seed(const OpCase& c) { return suite().seed ^ name_hash(c.name); }

HostInputs host_inputs(const OpCase& c) {
  HostInputs h;
  h.op_case = &c;
  uint64_t seed = case_seed(c);
  for (const InputSpec& spec : c.inputs) h.values.push_back(input_values(spec, seed++));
  return h;
}

std::string describe_inputs(const OpCase& c) {
  if (c.inputs.empty()) return "no inputs";
  std::string out;
  for (const InputSpec& spec : c.inputs) {
    if (!out.empty()) out += ", ";
    out += std::string(dtype_name(spec.dtype)) + spec.shape.to_string();
  }
  return out;
}

std::string case_detail(const std::string& device, const OpCase& c) {
  std::ostringstream out;
  out << "device " << device << ", op " << c.op << ", case " << c.name << ", inputs "
      << describe_inputs(c) << ", case seed " << case_seed(c);
  return out.str();
}

// The gradients of sum(outputs[0] * w) with respect to every float input, w a fixed random
// projection of outputs[0]'s shape; undefined where the output does not depend on an input.
Outputs run_gradient(Backend& backend, const OpCase& c, const HostInputs& host) {
  Inputs inputs = host.upload(backend, /*requires_grad=*/true);
  Outputs outputs = c.run(backend, inputs);
  const Tensor& y = outputs.at(0);
  std::vector<double> w =
      uniform_values(case_seed(c) + 1000, static_cast<std::size_t>(y.num_elements()), 0.5, 1.5);
  Tensor projection = make_tensor(backend, y.shape(), y.dtype(), w);
  Tensor loss = ops::reduce_sum(ops::mul(y, projection));
  Inputs sources;
  for (const Tensor& t : inputs) {
    if (t.requires_grad()) sources.push_back(t);
  }
  return gradients(loss, sources);
}

// Compares two sets of outputs; returns "" or a report of what differs.
std::string compare_outputs(const Outputs& actual, const Outputs& expected, Tolerance tol,
                            const char* what) {
  std::ostringstream out;
  if (actual.size() != expected.size()) {
    out << "  " << what << ": got " << actual.size() << " tensors, expected " << expected.size()
        << "\n";
    return out.str();
  }
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const Tensor& a = actual[i];
    const Tensor& e = expected[i];
    if (a.defined() != e.defined()) {
      out << "  " << what << " " << i << ": " << (a.defined() ? "defined" : "undefined")
          << ", the reference's is " << (e.defined() ? "defined" : "undefined") << "\n";
      continue;
    }
    if (!a.defined()) continue;
    if (a.shape() != e.shape() || a.dtype() != e.dtype()) {
      out << "  " << what << " " << i << ": got " << dtype_name(a.dtype()) << a.shape().to_string()
          << ", expected " << dtype_name(e.dtype()) << e.shape().to_string() << "\n";
      continue;
    }
    std::string diff = compare_values(host_values(a), host_values(e), tol.atol, tol.rtol);
    if (!diff.empty()) out << "  " << what << " " << i << " " << a.description() << ":\n" << diff;
  }
  return out.str();
}

// MISTRUSTED in benchdnn's sense: a reference output that is almost all zeros proves little.
bool mistrusted(const Outputs& reference) {
  for (const Tensor& t : reference) {
    if (!t.defined() || !is_float(t.dtype()) || t.num_elements() < 4) continue;
    std::vector<double> v = host_values(t);
    auto zeros = std::count(v.begin(), v.end(), 0.0);
    if (zeros * 10 >= static_cast<long>(v.size()) * 9) return true;
  }
  return false;
}

std::string bitwise_difference(const Outputs& first, const Outputs& second) {
  if (first.size() != second.size()) return "  the reruns returned different numbers of tensors\n";
  std::ostringstream out;
  for (std::size_t i = 0; i < first.size(); ++i) {
    if (first[i].defined() != second[i].defined()) {
      out << "  tensor " << i << " is defined in one run only\n";
      continue;
    }
    if (!first[i].defined()) continue;
    if (host_bytes(first[i]) != host_bytes(second[i])) {
      std::vector<double> a = host_values(first[i]), b = host_values(second[i]);
      out << "  tensor " << i << " " << first[i].description() << " differs between runs:\n"
          << compare_values(b, a, 0.0, 0.0);
    }
  }
  return out.str();
}

// One instance per class, created on first use and kept for the whole run.
Backend& backend_under_test(const std::string& class_name) {
  static std::map<std::string, std::shared_ptr<Backend>> instances;
  std::shared_ptr<Backend>& b = instances[class_name];
  if (!b) {
    auto created = create_default<Backend>(suite().registry->find(ClassKind::kBackend, class_name));
    // A backend may be created without its device (to list its kernels) and say so at its
    // first allocation, with Unimplemented.
    created->allocate(0);
    b = std::move(created);
  }
  return *b;
}

enum class Check { kForward, kGradient, kDeterminism };

// Runs the check on every case of `op`. Cases the backend answers with Unimplemented (a dtype
// it leaves out) are listed; the check fails when no case ran at all.
void run_op_check(const std::string& device_class, const std::string& op, Check check) {
  Backend* backend = &backend_under_test(device_class);
  Backend& reference = independent_reference();
  std::size_t ran = 0;
  std::vector<std::string> unimplemented;
  for (const OpCase& c : all_cases()) {
    if (c.op != op) continue;
    if (check == Check::kGradient && !c.differentiable) continue;
    HostInputs host = host_inputs(c);
    const std::string detail = case_detail(backend->device_name(), c);
    try {
      switch (check) {
        case Check::kForward: {
          Outputs expected = c.run(reference, host.upload(reference));
          Outputs actual = c.run(*backend, host.upload(*backend));
          ++ran;
          std::string diff = compare_outputs(actual, expected, c.tolerance, "output");
          if (!diff.empty()) {
            ADD_FAILURE() << "forward of " << op << " on " << backend->device_name()
                          << " differs from the reference (case " << c.name << "):\n"
                          << diff << repro_line(detail);
          } else if (mistrusted(expected)) {
            std::cout << "  MISTRUSTED " << c.name << ": the reference output is mostly zeros\n";
          }
          break;
        }
        case Check::kGradient: {
          Outputs expected = run_gradient(reference, c, host);
          Outputs actual = run_gradient(*backend, c, host);
          ++ran;
          Tolerance tol = c.tolerance.atol == 0.0
                              ? kGradient
                              : Tolerance{std::max(c.tolerance.atol, kGradient.atol),
                                          std::max(c.tolerance.rtol, kGradient.rtol)};
          std::string diff = compare_outputs(actual, expected, tol, "gradient of input");
          if (!diff.empty()) {
            ADD_FAILURE() << "gradient of " << op << " on " << backend->device_name()
                          << " differs from the reference's (case " << c.name
                          << ", d sum(w * output 0) / d input):\n"
                          << diff << repro_line(detail);
          }
          break;
        }
        case Check::kDeterminism: {
          Outputs first = c.run(*backend, host.upload(*backend));
          Outputs second = c.run(*backend, host.upload(*backend));
          ++ran;
          std::string diff = bitwise_difference(first, second);
          if (c.differentiable && diff.empty()) {
            try {
              diff = bitwise_difference(run_gradient(*backend, c, host),
                                        run_gradient(*backend, c, host));
              if (!diff.empty()) diff = "  (gradients)\n" + diff;
            } catch (const Unimplemented&) {
              // The gradient check reports a missing backward op.
            }
          }
          if (!diff.empty()) {
            ADD_FAILURE() << op << " on " << backend->device_name()
                          << " is not deterministic: two runs on the same inputs differ (case "
                          << c.name << "):\n"
                          << diff << repro_line(detail);
          }
          break;
        }
      }
    } catch (const Unimplemented& e) {
      unimplemented.push_back(c.name + ": " + e.what());
    }
  }
  for (const std::string& u : unimplemented) std::cout << "  UNIMPLEMENTED " << u << "\n";
  if (ran == 0) {
    std::string list;
    for (const std::string& u : unimplemented) list += "\n  " + u;
    if (check == Check::kGradient) {
      GTEST_SKIP() << "no gradient case of " << op << " runs on this backend:" << list;
    }
    FAIL() << op << " is registered by the backend, but no case of it ran:" << list << "\n"
           << repro_line();
  }
}

// Host -> device -> host copies, at offsets, and the contract's InvalidArgument for a copy
// beyond the storage.
void check_memory(const std::string& device_class) {
  Backend* backend = &backend_under_test(device_class);
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{63}, std::size_t{4099}}) {
    std::vector<double> values = uniform_values(suite().seed + n, n, -1e6, 1e6);
    Tensor t = make_tensor(*backend, Shape{static_cast<int64_t>(n)}, DType::kF64, values);
    std::vector<double> back = host_values(t);
    EXPECT_EQ(back, values) << "a host -> " << backend->device_name() << " -> host copy of " << n
                            << " doubles changed them\n"
                            << repro_line();
  }
  std::shared_ptr<Storage> storage = backend->allocate(256);
  ASSERT_NE(storage, nullptr);
  EXPECT_GE(storage->size_bytes(), 256u);
  EXPECT_EQ(&storage->backend(), backend) << "storage does not name its backend";
  std::vector<uint8_t> pattern(100);
  std::iota(pattern.begin(), pattern.end(), uint8_t{7});
  backend->copy_from_host(*storage, 50, pattern.data(), pattern.size());
  std::vector<uint8_t> back(100);
  backend->copy_to_host(*storage, 50, back.data(), back.size());
  backend->synchronize();
  EXPECT_EQ(back, pattern) << "copy_from_host / copy_to_host at offset 50 changed the bytes\n"
                           << repro_line();
  bool threw_invalid_argument = false;
  try {
    backend->copy_to_host(*storage, storage->size_bytes() - 10, back.data(), back.size());
  } catch (const InvalidArgument&) {
    threw_invalid_argument = true;
  }
  EXPECT_TRUE(threw_invalid_argument)
      << "copy_to_host of 100 bytes at " << storage->size_bytes() - 10 << " of a storage of "
      << storage->size_bytes() << " bytes should throw InvalidArgument (backend.h)\n"
      << repro_line();
}

// The native accessors (tensor.h, stream.h) that collectives hand to NCCL or MPI: a storage
// that says host memory holds the tensor's bytes at its pointer; a tensor's pointer is its
// storage's moved by its byte offset; a stream that says host has no queue handle and one that
// says cuda has one; kOpaque memory has no pointer. CUDA memory is not read here (no CUDA
// runtime in this program): the cuda backend's values are checked by tensor_test on a GPU.
void check_native_accessors(const std::string& device_class) {
  Backend* backend = &backend_under_test(device_class);
  const std::string device = backend->device_name();
  std::vector<uint8_t> pattern(64);
  std::iota(pattern.begin(), pattern.end(), uint8_t{3});
  Tensor t = Tensor::from_vector(*backend, Shape{64}, pattern);
  backend->synchronize();
  const NativeMemory memory = t.native_memory();
  const NativeMemory whole = t.storage()->native_memory();
  EXPECT_EQ(memory.kind, whole.kind) << "a tensor and its storage say different kinds\n"
                                     << repro_line();
  switch (memory.kind) {
    case DeviceKind::kHost: {
      ASSERT_NE(memory.data, nullptr) << device << " says host memory without a pointer\n"
                                      << repro_line();
      std::vector<uint8_t> seen(pattern.size());
      std::memcpy(seen.data(), memory.data, seen.size());
      EXPECT_EQ(seen, pattern) << device << " says host memory, but its pointer does not hold "
                               << "the bytes copied in\n"
                               << repro_line();
      break;
    }
    case DeviceKind::kCuda:
      EXPECT_NE(memory.data, nullptr) << device << " says CUDA memory without a pointer\n"
                                      << repro_line();
      EXPECT_GE(memory.device_index, 0) << repro_line();
      break;
    case DeviceKind::kOpaque:
      EXPECT_EQ(memory.data, nullptr) << device << " says opaque memory with a pointer\n"
                                      << repro_line();
      break;
    default:
      ADD_FAILURE() << device << " says an unknown DeviceKind "
                    << static_cast<uint32_t>(memory.kind) << "\n"
                    << repro_line();
  }
  if (memory.data != nullptr) {
    Tensor view(t.storage(), Shape{32}, DType::kU8, 32);
    EXPECT_EQ(static_cast<std::byte*>(view.native_memory().data),
              static_cast<std::byte*>(memory.data) + 32)
        << "the native pointer of a view at byte 32 is not the storage's plus 32\n"
        << repro_line();
  }
  std::shared_ptr<Stream> created = backend->create_stream();
  for (Stream* stream : {&backend->current_stream(), created.get()}) {
    const NativeStream native = stream->native_stream();
    if (native.kind == DeviceKind::kHost) {
      EXPECT_EQ(native.handle, nullptr) << device << ": a host stream has no queue handle\n"
                                        << repro_line();
    } else if (native.kind == DeviceKind::kCuda) {
      EXPECT_NE(native.handle, nullptr) << device << ": a CUDA stream without its cudaStream_t\n"
                                        << repro_line();
    }
  }
  backend->synchronize();
}

}  // namespace

void register_backend_checks(const ClassInfo& info) {
  const std::string suite_name = "Backend/" + info.class_name;
  Backend* backend = nullptr;
  try {
    backend = &backend_under_test(info.class_name);
  } catch (const Error& e) {
    // A device that is absent here (no GPU: the backend throws Unimplemented) is a skip,
    // anything else a failure.
    std::string message = e.what();
    bool absent = dynamic_cast<const Unimplemented*>(&e) != nullptr;
    std::cout << "    cannot create backend " << info.class_name << ": " << message << "\n";
    register_check(suite_name, "Creates", [message, absent] {
      if (absent) GTEST_SKIP() << "device not available here: " << message;
      FAIL() << "creating the backend with its default options threw: " << message << "\n"
             << repro_line();
    });
    return;
  }
  std::set<std::string> registered;
  std::set<std::string> fused;  // kernels for composites
  for (const KernelRegistration& k : backend->kernels()) {
    registered.insert(k.op);
    if ((k.flags & kFusedComposite) != 0) fused.insert(k.op);
  }
  std::set<std::string> covered;
  for (const OpCase& c : all_cases()) covered.insert(c.op);
  std::vector<std::string> missing;
  std::size_t num_ops = 0;
  for (const OpInfo& op : declared_ops()) {
    if (op.composite) continue;  // a fused kernel for a composite is optional
    ++num_ops;
    if (!registered.count(op.name)) missing.push_back(op.name);
  }
  std::cout << "    device " << backend->device_name() << ": " << registered.size() - fused.size()
            << " of " << num_ops << " ops registered, " << fused.size() << " fused composites";
  if (!missing.empty() && missing.size() < 20) {
    std::cout << "; not registered:";
    for (const std::string& m : missing) std::cout << " " << m;
  }
  std::cout << "\n";
  const std::string name = info.class_name;
  register_check(suite_name, "MemoryRoundTrip", [name] { check_memory(name); });
  register_check(suite_name, "NativeAccessors", [name] { check_native_accessors(name); });
  if (!missing.empty()) {
    register_check(suite_name, "UnregisteredOpIsUnimplemented", [name, registered] {
      // Through the core's dispatch, an op the backend leaves out must be a clean
      // Unimplemented naming the op and the device.
      Backend& b = backend_under_test(name);
      for (const OpCase& c : all_cases()) {
        if (registered.count(c.op)) continue;
        std::string message;
        try {
          c.run(b, host_inputs(c).upload(b));
          continue;  // a composite that does not reach the op directly
        } catch (const Unimplemented& e) {
          message = e.what();
        }
        if (message.rfind(kNoKernel, 0) == 0) continue;  // the suite's own direct call
        EXPECT_NE(message.find(b.device_name()), std::string::npos)
            << "using op " << c.op << ", which " << name
            << " does not register, threw Unimplemented without naming the device: " << message;
        return;
      }
      GTEST_SKIP() << "no case reaches an unregistered op through the core";
    });
  }
  for (const std::string& op : registered) {
    const std::string op_str = op;
    if (!covered.count(op) && fused.count(op)) {
      register_check(suite_name, "Forward/" + op_str, [op_str] {
        GTEST_SKIP() << "fused kernel for composite " << op_str
                     << ": the suite has no case for it; the composite's own tests cover it";
      });
      continue;
    }
    if (!covered.count(op)) {
      register_check(suite_name, "Forward/" + op_str,
                     [op_str] { FAIL() << "the conformance suite has no case for op " << op_str; });
      continue;
    }
    bool differentiable = false;
    for (const OpCase& c : all_cases()) differentiable |= c.op == op && c.differentiable;
    register_check(suite_name, "Forward/" + op_str,
                   [name, op] { run_op_check(name, op, Check::kForward); });
    if (differentiable) {
      register_check(suite_name, "Gradient/" + op_str,
                     [name, op] { run_op_check(name, op, Check::kGradient); });
    }
    register_check(suite_name, "Deterministic/" + op_str,
                   [name, op] { run_op_check(name, op, Check::kDeterminism); });
  }
}

}  // namespace trainyard::conformance
