// golden_writer OUTPUT_DIR: writes, with Trainyard's C++ APIs, the files the `trainyard` host
// does not write itself, for tests/golden/check_ours.py to read back with TensorFlow and
// TensorBoard. The values are fixed; check_ours.py holds the same constants.
//
//   OUTPUT_DIR/records.tfrecord.gz   TFRecordWriter with Compression::kGzip: the five records
//                                    of tests/golden/records.tfrecord
//   OUTPUT_DIR/records.tfrecord      the same, uncompressed
//   OUTPUT_DIR/ckpt/model.ckpt-9     write_checkpoint: every Trainyard dtype, a scalar, an empty
//                                    tensor, names with '/'
//   OUTPUT_DIR/events/               SummaryWriter: scalars, histograms, text, images
#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "trainyard/backend.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/core/registry.h"
#include "trainyard/core/summary_writer.h"
#include "trainyard/tensor.h"
#include "trainyard/core/tfrecord.h"

namespace {

namespace fs = std::filesystem;
using namespace trainyard;

std::vector<std::string> records() {
  std::string all_bytes;
  for (int i = 0; i < 256; ++i) all_bytes.push_back(static_cast<char>(i));
  return {"hello", "", std::string("foo\0bar", 7), all_bytes, std::string(1000, 'x')};
}

template <class T>
Tensor raw(Backend& backend, Shape shape, DType dtype, const std::vector<T>& values) {
  return Tensor::from_host(backend, std::move(shape), dtype, values.data(),
                           values.size() * sizeof(T));
}

void write_records(const fs::path& dir) {
  for (auto [name, compression] : {std::pair{"records.tfrecord.gz", Compression::kGzip},
                                   std::pair{"records.tfrecord", Compression::kNone}}) {
    TFRecordWriter writer((dir / name).string(), compression);
    for (const std::string& r : records()) writer.write(r);
    writer.close();
  }
}

void write_ckpt(const fs::path& dir, Backend& backend) {
  std::vector<float> weights(24);
  for (std::size_t i = 0; i < weights.size(); ++i) weights[i] = 0.25f * static_cast<float>(i) - 1;
  write_checkpoint(
      (dir / "ckpt" / "model.ckpt-9").string(),
      {
          {"tower/dense/kernel", Tensor::from_vector(backend, Shape{2, 3, 4}, weights)},
          {"tower/dense/bias",
           Tensor::from_vector(backend, Shape{3}, std::vector<double>{1, -2, 0.1})},
          {"global_step", Tensor::from_vector(backend, Shape{}, std::vector<int64_t>{9})},
          {"counts", Tensor::from_vector(backend, Shape{4},
                                         std::vector<int32_t>{-4, 5, 2147483647, -2147483647 - 1})},
          {"pixels", raw(backend, Shape{3}, DType::kU8, std::vector<uint8_t>{0, 128, 255})},
          {"mask", raw(backend, Shape{3}, DType::kBool, std::vector<uint8_t>{1, 0, 1})},
          // bfloat16 1.5, -2.5, 3.140625; half 1.5, -2.5, 65504.
          {"bf16",
           raw(backend, Shape{3}, DType::kBF16, std::vector<uint16_t>{0x3FC0, 0xC020, 0x4049})},
          {"f16",
           raw(backend, Shape{3}, DType::kF16, std::vector<uint16_t>{0x3E00, 0xC100, 0x7BFF})},
          {"empty", Tensor::from_vector(backend, Shape{0, 3}, std::vector<float>{})},
      });
}

void write_events(const fs::path& dir) {
  SummaryWriter writer((dir / "events").string());
  writer.add_scalar("ours/scalar", 0.1, 5);
  writer.add_scalar("ours/scalar", -2.5, 7);
  const std::vector<double> values = {-3.5, -1, 0, 0, 1e-13, 0.5, 1, 2, 2, 100, 1e21};
  writer.add_histogram("ours/histogram", values, 5);
  writer.add_histogram("ours/empty_histogram", std::vector<double>{}, 5);
  writer.add_text("ours/text", "**bold** and \xe2\x9c\x93", 5);
  // Pixel (y, x, c) = (y * 50 + x * 20 + c * 7) % 256, for every channel count.
  for (int channels = 1; channels <= 4; ++channels) {
    const int height = 3, width = 4;
    std::vector<uint8_t> pixels;
    for (int y = 0; y < height; ++y) {
      for (int x = 0; x < width; ++x) {
        for (int c = 0; c < channels; ++c) {
          pixels.push_back(static_cast<uint8_t>((y * 50 + x * 20 + c * 7) % 256));
        }
      }
    }
    writer.add_image("ours/image_" + std::to_string(channels), height, width, channels,
                     pixels.data(), 5);
  }
  writer.close();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: golden_writer OUTPUT_DIR\n";
    return 2;
  }
  try {
    const fs::path dir = argv[1];
    fs::create_directories(dir);
    PluginRegistry::Settings settings;
    settings.use_environment = false;
    PluginRegistry registry(settings);
    std::shared_ptr<Backend> backend = registry.create<Backend>(ClassKind::kBackend, "cpu");
    write_records(dir);
    write_ckpt(dir, *backend);
    write_events(dir);
    std::cout << "wrote " << dir.string() << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "golden_writer: " << e.what() << "\n";
    return 1;
  }
}
