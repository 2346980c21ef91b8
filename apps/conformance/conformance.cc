#include "conformance.h"

#include <gtest/gtest.h>

#include <cxxabi.h>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>
#include <typeinfo>
#include <utility>

#include "trainyard/error.h"

namespace trainyard::conformance {
namespace {

class CheckTest : public ::testing::Test {
 public:
  CheckTest(std::string name, std::function<void()> body)
      : name_(std::move(name)), body_(std::move(body)) {}

  void TestBody() override {
    try {
      body_();
    } catch (const Error& e) {
      ADD_FAILURE() << name_ << ": threw " << e.what() << "\n" << repro_line();
    } catch (const std::exception& e) {
      ADD_FAILURE() << name_ << ": threw an exception that is not a trainyard::Error: " << e.what()
                    << "\n"
                    << repro_line();
    } catch (...) {
      // `throw 42` from plugin code: a failure naming the type, never std::terminate.
      const std::type_info* type = abi::__cxa_current_exception_type();
      ADD_FAILURE() << name_ << ": threw an exception of type "
                    << (type != nullptr ? type->name() : "unknown")
                    << ", which is not a std::exception\n"
                    << repro_line();
    }
  }

 private:
  std::string name_;
  std::function<void()> body_;
};

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const int exponent = (h >> 10) & 0x1f;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    float value = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -value : value;
  }
  if (exponent == 31) {
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  }
  return std::bit_cast<float>(sign | (static_cast<uint32_t>(exponent + 112) << 23) |
                              (mantissa << 13));
}

template <class T>
void append_as_double(const std::vector<std::byte>& bytes, std::vector<double>* out) {
  const std::size_t n = bytes.size() / sizeof(T);
  out->reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
    out->push_back(static_cast<double>(v));
  }
}

}  // namespace

Suite& mutable_suite() {
  static Suite instance;
  return instance;
}

const Suite& suite() { return mutable_suite(); }

void register_check(const std::string& suite_name, const std::string& test_name,
                    std::function<void()> body) {
  std::string full = suite_name + "." + test_name;
  ::testing::RegisterTest(suite_name.c_str(), test_name.c_str(), nullptr, nullptr, __FILE__,
                          __LINE__,
                          [full, body]() -> CheckTest* { return new CheckTest(full, body); });
}

void check_declared_options(const ClassInfo& info) {
  PluginRegistry::ClassDeclaration declaration = suite().registry->describe(info);
  for (const PluginRegistry::DeclaredOption& option : declaration.options) {
    OptionSpec spec{option.name.c_str(), option.type, option.default_value.c_str(),
                    option.help.c_str()};
    try {
      parse_option_value(spec, option.default_value);
    } catch (const Error& e) {
      ADD_FAILURE() << info.class_name << " declares option " << option.name << " ("
                    << option_type_name(option.type)
                    << ") with a default that does not parse: " << e.what();
    }
    EXPECT_FALSE(option.help.empty())
        << info.class_name << " declares option " << option.name << " without help text";
  }
  std::shared_ptr<PluginObject> object = suite().registry->create(info, {});
  EXPECT_NE(object, nullptr);
}

Backend& reference_backend() {
  static std::shared_ptr<Backend> cpu =
      suite().registry->create<Backend>(ClassKind::kBackend, "cpu");
  return *cpu;
}

std::map<std::string, OptionValue> given_options(const ClassInfo& info) {
  std::map<std::string, OptionValue> given;
  auto it = suite().class_options.find(info.class_name);
  if (it == suite().class_options.end()) return given;
  const PluginRegistry::ClassDeclaration declaration = suite().registry->describe(info);
  for (const auto& [name, text] : it->second) {
    const PluginRegistry::DeclaredOption* declared = nullptr;
    for (const auto& option : declaration.options) {
      if (option.name == name) declared = &option;
    }
    if (declared == nullptr) {
      throw InvalidArgument("--option " + info.class_name + "." + name + ": " + info.class_name +
                            " declares no option '" + name + "'");
    }
    OptionSpec spec{declared->name.c_str(), declared->type, declared->default_value.c_str(),
                    declared->help.c_str()};
    given[name] = parse_option_value(spec, text);
  }
  return given;
}

std::string repro_line(const std::string& detail) {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::ostringstream out;
  out << "repro: trainyard-conformance " << suite().library_arg;
  if (!suite().plugin_path_arg.empty()) out << " --plugin_path=" << suite().plugin_path_arg;
  out << " --seed=" << suite().seed;
  for (const std::string& option : suite().option_args) out << " --option=" << option;
  if (info != nullptr) {
    out << " --gtest_filter='" << info->test_suite_name() << "." << info->name() << "'";
  }
  if (!detail.empty()) out << "  # " << detail;
  return out.str();
}

std::vector<std::byte> host_bytes(const Tensor& t) {
  std::vector<std::byte> bytes(t.size_bytes());
  if (!bytes.empty()) t.to_host(bytes.data(), bytes.size());
  return bytes;
}

std::vector<double> host_values(const Tensor& t) {
  std::vector<std::byte> bytes = host_bytes(t);
  std::vector<double> out;
  switch (t.dtype()) {
    case DType::kF32:
      append_as_double<float>(bytes, &out);
      break;
    case DType::kF64:
      append_as_double<double>(bytes, &out);
      break;
    case DType::kI32:
      append_as_double<int32_t>(bytes, &out);
      break;
    case DType::kI64:
      append_as_double<int64_t>(bytes, &out);
      break;
    case DType::kU8:
    case DType::kBool:
      append_as_double<uint8_t>(bytes, &out);
      break;
    case DType::kBF16: {
      std::vector<double> raw;
      append_as_double<uint16_t>(bytes, &raw);
      for (double r : raw) {
        out.push_back(std::bit_cast<float>(static_cast<uint32_t>(r) << 16));
      }
      break;
    }
    case DType::kF16: {
      std::vector<double> raw;
      append_as_double<uint16_t>(bytes, &raw);
      for (double r : raw) out.push_back(half_to_float(static_cast<uint16_t>(r)));
      break;
    }
  }
  return out;
}

Tensor make_tensor(Backend& backend, const Shape& shape, DType dtype,
                   const std::vector<double>& values) {
  auto upload = [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> typed(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) typed[i] = static_cast<T>(values[i]);
    return Tensor::from_host(backend, shape, dtype, typed.data(), typed.size() * sizeof(T));
  };
  switch (dtype) {
    case DType::kF32:
      return upload(float{});
    case DType::kF64:
      return upload(double{});
    case DType::kI32:
      return upload(int32_t{});
    case DType::kI64:
      return upload(int64_t{});
    case DType::kU8:
      return upload(uint8_t{});
    case DType::kBool: {
      std::vector<uint8_t> typed(values.size());
      for (std::size_t i = 0; i < values.size(); ++i) typed[i] = values[i] != 0.0 ? 1 : 0;
      return Tensor::from_host(backend, shape, dtype, typed.data(), typed.size());
    }
    case DType::kBF16:
    case DType::kF16:
      break;
  }
  throw Unimplemented(std::string("conformance: no host conversion to ") + dtype_name(dtype));
}

std::vector<double> uniform_values(uint64_t seed, std::size_t n, double low, double high) {
  std::mt19937_64 engine(seed);
  std::vector<double> out(n);
  for (double& v : out) {
    v = low + (high - low) * (static_cast<double>(engine() >> 11) * 0x1.0p-53);
  }
  return out;
}

std::string compare_values(const std::vector<double>& actual, const std::vector<double>& expected,
                           double atol, double rtol) {
  if (actual.size() != expected.size()) {
    return "element counts differ: got " + std::to_string(actual.size()) + ", expected " +
           std::to_string(expected.size()) + "\n";
  }
  std::ostringstream out;
  out.precision(9);
  std::size_t bad = 0;
  double worst = 0.0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i], e = expected[i];
    const bool close =
        (std::isnan(a) && std::isnan(e)) || a == e || std::abs(a - e) <= atol + rtol * std::abs(e);
    if (!close) {
      if (bad++ < 5) out << "  element " << i << ": got " << a << ", expected " << e << "\n";
      if (std::isfinite(a - e)) worst = std::max(worst, std::abs(a - e));
    }
  }
  if (bad == 0) return "";
  out << "  " << bad << " of " << actual.size() << " elements differ (max abs error " << worst
      << ", tolerance atol " << atol << " + rtol " << rtol << " * |expected|)\n";
  return out.str();
}

uint64_t name_hash(const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace trainyard::conformance
