// The golden outputs of the TF Object Detection API that the pkg_detection tests compare
// against: tests/fixtures/detection/*.txt, written by make_goldens.py there (its header says
// how). A file holds named tensors; Goldens::get throws naming the file and the tensor when one
// is missing, so a failing lookup says what to regenerate.
#ifndef TRAINYARD_TESTS_UNIT_PKG_DETECTION_GOLDENS_H_
#define TRAINYARD_TESTS_UNIT_PKG_DETECTION_GOLDENS_H_

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace trainyard::test {

struct GoldenTensor {
  std::vector<int64_t> shape;
  std::vector<double> values;

  std::vector<float> f32() const { return {values.begin(), values.end()}; }
  std::vector<int32_t> i32() const {
    std::vector<int32_t> out;
    for (double v : values) out.push_back(static_cast<int32_t>(v));
    return out;
  }
  std::vector<int64_t> i64() const {
    std::vector<int64_t> out;
    for (double v : values) out.push_back(static_cast<int64_t>(v));
    return out;
  }
};

class Goldens {
 public:
  // `name` is a file of tests/fixtures/detection, e.g. "anchors.txt".
  explicit Goldens(const std::string& name)
      : path_(std::string(TRAINYARD_SOURCE_DIR) + "/tests/fixtures/detection/" + name) {
    std::ifstream in(path_);
    if (!in) throw std::runtime_error("cannot open golden file " + path_);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream header(line);
      std::string word, tensor_name, dtype;
      header >> word >> tensor_name >> dtype;
      if (word != "tensor") throw std::runtime_error(path_ + ": unexpected line: " + line);
      GoldenTensor t;
      int64_t dim = 0;
      int64_t count = 1;
      while (header >> dim) {
        t.shape.push_back(dim);
        count *= dim;
      }
      std::string values;
      std::getline(in, values);
      std::istringstream vs(values);
      std::string token;
      while (vs >> token) {
        char* end = nullptr;
        const double v = std::strtod(token.c_str(), &end);  // also reads "nan"
        if (end == token.c_str() || *end != '\0') {
          throw std::runtime_error(path_ + ": tensor " + tensor_name + " has value '" + token +
                                   "'");
        }
        t.values.push_back(v);
      }
      if (static_cast<int64_t>(t.values.size()) != count) {
        throw std::runtime_error(path_ + ": tensor " + tensor_name + " has " +
                                 std::to_string(t.values.size()) + " values for its shape");
      }
      tensors_[tensor_name] = std::move(t);
    }
  }

  bool has(const std::string& name) const { return tensors_.count(name) != 0; }

  const GoldenTensor& get(const std::string& name) const {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) throw std::runtime_error(path_ + " has no tensor " + name);
    return it->second;
  }

 private:
  std::string path_;
  std::map<std::string, GoldenTensor> tensors_;
};

}  // namespace trainyard::test

#endif  // TRAINYARD_TESTS_UNIT_PKG_DETECTION_GOLDENS_H_
