// trainyard-conformance: the standard checks every plugin class must pass, as GoogleTest tests
// registered at run time, one suite per class ("Model/LogisticModel", "Backend/cpu", ...).
//
// main.cc loads the library under test through a PluginRegistry and calls the register_*
// function of each class's kind; each registers tests whose bodies create the class through
// the registry when they run. Checks that compute run on the CPU reference backend ("cpu",
// found on the ordinary plugin search path) unless they test a backend.
#ifndef TRAINYARD_APPS_CONFORMANCE_CONFORMANCE_H_
#define TRAINYARD_APPS_CONFORMANCE_CONFORMANCE_H_

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "trainyard/backend.h"
#include "trainyard/core/registry.h"
#include "trainyard/tensor.h"

namespace trainyard::conformance {

struct Suite {
  std::shared_ptr<PluginRegistry> registry;
  std::filesystem::path library;  // the library under test, canonical
  std::string library_arg;        // as given on the command line (for repro lines)
  std::string plugin_path_arg;    // --plugin_path as given, or empty
  std::string program;            // argv[0]
  uint64_t seed = 1701;           // --seed: the base of every random input
  // --option CLASS.NAME=VALUE: options a class is created with instead of its defaults (a
  // frame-level model whose defaults are sized for the full data set checked at a tiny size).
  std::map<std::string, std::map<std::string, std::string>> class_options;
  std::vector<std::string> option_args;  // as given, for repro lines
};

// The suite's settings; valid once main() has set them up.
const Suite& suite();
Suite& mutable_suite();

// Registers the test `suite_name.test_name` running `body`. Exceptions that escape `body` are
// reported as failures naming the check.
void register_check(const std::string& suite_name, const std::string& test_name,
                    std::function<void()> body);

void register_backend_checks(const ClassInfo& info);
void register_model_checks(const ClassInfo& info);
void register_reader_checks(const ClassInfo& info);
void register_loss_checks(const ClassInfo& info);
void register_optimizer_checks(const ClassInfo& info);
void register_collective_checks(const ClassInfo& info);

// The cpu backend, created once, on which the checks of models, readers, losses and
// optimizers compute. Throws NotFound when no "cpu" backend is on the plugin path. (Op values
// of backends are checked against independent_reference(), reference_backend.h.)
Backend& reference_backend();

// The --option values given for the class, parsed as its declared types. Throws
// InvalidArgument naming the class and the option.
std::map<std::string, OptionValue> given_options(const ClassInfo& info);

// Creates the class with its declared defaults (and the --option values given for it) and casts
// it to its interface.
template <class T>
std::shared_ptr<T> create_default(const ClassInfo& info) {
  std::shared_ptr<PluginObject> object = suite().registry->create(info, given_options(info));
  std::shared_ptr<T> typed = std::dynamic_pointer_cast<T>(object);
  if (!typed) {
    throw PluginError(info.class_name + " does not implement the interface of its kind");
  }
  return typed;
}

// The DeclaredOptionsValid check of every kind: each declared default parses as its type, each
// option has help text, and the class is creatable with the defaults alone.
void check_declared_options(const ClassInfo& info);

// "repro: trainyard-conformance LIB --seed=N --gtest_filter='SUITE.TEST'  # detail"
std::string repro_line(const std::string& detail = "");

// Every element of `t` as double (any dtype; bool and integers exactly).
std::vector<double> host_values(const Tensor& t);
// The raw bytes of `t`.
std::vector<std::byte> host_bytes(const Tensor& t);

// `values` (in double) as a tensor of `dtype` on `backend`.
Tensor make_tensor(Backend& backend, const Shape& shape, DType dtype,
                   const std::vector<double>& values);

// Uniform values in [low, high) from a seeded generator on the host.
std::vector<double> uniform_values(uint64_t seed, std::size_t n, double low, double high);

// "" when |a - e| <= atol + rtol * |e| everywhere (NaN matches NaN), else the first
// mismatches, "element i: got a, expected e", and a count.
std::string compare_values(const std::vector<double>& actual, const std::vector<double>& expected,
                           double atol, double rtol);

// A stable 64-bit hash (FNV-1a) for deriving per-case seeds from names.
uint64_t name_hash(const std::string& name);

}  // namespace trainyard::conformance

#endif  // TRAINYARD_APPS_CONFORMANCE_CONFORMANCE_H_
