// Writes a learnable image-classification directory in the layout of TF-Slim's
// download_and_convert scripts' input (one subdirectory per class), for the host's tests:
//
//   make_image_dir DIR CLASSES PER_CLASS SIZE
//
// Class k's SIZE x SIZE RGB PNGs have a bright horizontal band in the k-th of CLASSES equal
// stripes, over seeded noise, so a small convnet separates them in a few dozen steps.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "trainyard/pkg/image/image_codec.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: make_image_dir DIR CLASSES PER_CLASS SIZE\n");
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  const int classes = std::stoi(argv[2]);
  const int per_class = std::stoi(argv[3]);
  const int size = std::stoi(argv[4]);
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> noise(0, 96);
  for (int k = 0; k < classes; ++k) {
    const std::filesystem::path class_dir = dir / ("class_" + std::string(1, char('a' + k)));
    std::filesystem::create_directories(class_dir);
    for (int i = 0; i < per_class; ++i) {
      std::vector<uint8_t> pixels(static_cast<std::size_t>(size * size * 3));
      for (int y = 0; y < size; ++y) {
        const bool band = y * classes / size == k;
        for (int x = 0; x < size * 3; ++x) {
          pixels[static_cast<std::size_t>(y * size * 3 + x)] =
              static_cast<uint8_t>(noise(rng) + (band ? 150 : 0));
        }
      }
      const std::string png = trainyard::image::encode_png(pixels, size, size, 3);
      std::ofstream out(class_dir / ("img_" + std::to_string(i) + ".png"), std::ios::binary);
      out.write(png.data(), static_cast<std::streamsize>(png.size()));
      if (!out) return 1;
    }
  }
  return 0;
}
