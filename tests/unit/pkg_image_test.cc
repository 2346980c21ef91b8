// pkg/image: JPEG and PNG decoding against what TensorFlow's tf.io.decode_image makes of the
// same files (tests/golden/images, written by tests/golden/make_images_golden.py), encoding
// round trips, and bad data: every truncation, a PNG CRC mismatch, corrupt JPEG headers,
// images over the pixel limit. Every error is DataLoss starting with the caller's `where`.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "trainyard/error.h"
#include "trainyard/pkg/image/image_codec.h"

namespace trainyard::image {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::string kGolden = std::string(TRAINYARD_SOURCE_DIR) + "/tests/golden/images/";
constexpr int64_t kHeight = 13, kWidth = 17;  // every golden image

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::span<const std::byte> bytes_of(const std::string& s) {
  return std::as_bytes(std::span<const char>(s.data(), s.size()));
}

// The pattern the generator encodes: plane c of pixel (y, x).
std::vector<uint8_t> pattern(int channels) {
  std::vector<uint8_t> out;
  for (int64_t y = 0; y < kHeight; ++y) {
    for (int64_t x = 0; x < kWidth; ++x) {
      for (int c = 0; c < channels; ++c) {
        out.push_back(static_cast<uint8_t>(
            (x * (37 + 11 * c) + y * (23 + 7 * c) + (x * y) % (5 + c) * 9) % 256));
      }
    }
  }
  return out;
}

struct GoldenCase {
  const char* file;
  int channels;         // asked for
  int output_channels;  // what TensorFlow returned
};

class DecodeGolden : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(DecodeGolden, EqualsTensorFlow) {
  const GoldenCase& c = GetParam();
  const std::string data = read_file(kGolden + c.file);
  const std::string expected =
      read_file(kGolden + c.file + ".c" + std::to_string(c.channels) + ".u8");
  DecodedImage image = decode_image(bytes_of(data), c.channels, c.file);
  EXPECT_EQ(image.height, kHeight);
  EXPECT_EQ(image.width, kWidth);
  ASSERT_EQ(image.channels, c.output_channels);
  ASSERT_EQ(image.pixels.size(), expected.size());
  int64_t differ = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (image.pixels[i] != static_cast<uint8_t>(expected[i])) ++differ;
  }
  EXPECT_EQ(differ, 0) << c.file << " channels=" << c.channels << ": " << differ << " of "
                       << expected.size() << " values differ from TensorFlow's";
}

INSTANTIATE_TEST_SUITE_P(
    TensorFlow, DecodeGolden,
    ::testing::Values(
        GoldenCase{"rgb.png", 0, 3}, GoldenCase{"rgb.png", 1, 1}, GoldenCase{"rgb.png", 3, 3},
        GoldenCase{"gray.png", 0, 1}, GoldenCase{"gray.png", 1, 1}, GoldenCase{"gray.png", 3, 3},
        GoldenCase{"rgba.png", 0, 4}, GoldenCase{"rgba.png", 1, 1}, GoldenCase{"rgba.png", 3, 3},
        GoldenCase{"rgb16.png", 0, 3}, GoldenCase{"rgb16.png", 1, 1}, GoldenCase{"rgb16.png", 3, 3},
        GoldenCase{"palette.png", 0, 4}, GoldenCase{"palette.png", 1, 1},
        GoldenCase{"palette.png", 3, 3}, GoldenCase{"rgb.jpg", 0, 3}, GoldenCase{"rgb.jpg", 1, 1},
        GoldenCase{"rgb.jpg", 3, 3}, GoldenCase{"gray.jpg", 0, 1}, GoldenCase{"gray.jpg", 1, 1},
        GoldenCase{"gray.jpg", 3, 3}, GoldenCase{"progressive.jpg", 0, 3},
        GoldenCase{"progressive.jpg", 1, 1}, GoldenCase{"progressive.jpg", 3, 3}),
    [](const ::testing::TestParamInfo<GoldenCase>& info) {
      std::string name = info.param.file;
      for (char& ch : name) {
        if (ch == '.') ch = '_';
      }
      return name + "_c" + std::to_string(info.param.channels);
    });

TEST(ImageFormat, NamesAndMagic) {
  EXPECT_EQ(image_format_named("jpeg"), ImageFormat::kJpeg);
  EXPECT_EQ(image_format_named("jpg"), ImageFormat::kJpeg);
  EXPECT_EQ(image_format_named("JPEG"), ImageFormat::kJpeg);
  EXPECT_EQ(image_format_named("png"), ImageFormat::kPng);
  EXPECT_EQ(image_format_named("PNG"), ImageFormat::kPng);
  EXPECT_EQ(image_format_named("raw"), std::nullopt);
  EXPECT_EQ(sniff_image_format(bytes_of(read_file(kGolden + "rgb.jpg"))), ImageFormat::kJpeg);
  EXPECT_EQ(sniff_image_format(bytes_of(read_file(kGolden + "rgb.png"))), ImageFormat::kPng);
  EXPECT_EQ(sniff_image_format(bytes_of(std::string("GIF89a"))), std::nullopt);
}

TEST(EncodePng, RoundTripsExactlyForEveryChannelCount) {
  for (int channels : {1, 2, 3, 4}) {
    const std::vector<uint8_t> pixels = pattern(channels);
    const std::string png = encode_png(pixels, kHeight, kWidth, channels);
    DecodedImage image = decode_image(bytes_of(png), 0, "round trip");
    EXPECT_EQ(image.format, ImageFormat::kPng);
    EXPECT_EQ(image.height, kHeight);
    EXPECT_EQ(image.width, kWidth);
    EXPECT_EQ(image.channels, channels);
    EXPECT_EQ(image.pixels, pixels) << channels << " channels";
  }
}

TEST(EncodeJpeg, RoundTripsWithinTolerance) {
  // A smooth image: JPEG at quality 95 keeps it within a few levels.
  for (int channels : {1, 3}) {
    std::vector<uint8_t> pixels;
    for (int64_t y = 0; y < 32; ++y) {
      for (int64_t x = 0; x < 40; ++x) {
        for (int c = 0; c < channels; ++c) {
          pixels.push_back(static_cast<uint8_t>(20 + 2 * x + 2 * y + 20 * c));
        }
      }
    }
    const std::string jpeg = encode_jpeg(pixels, 32, 40, channels, 95);
    DecodedImage image = decode_image(bytes_of(jpeg), 0, "round trip");
    EXPECT_EQ(image.format, ImageFormat::kJpeg);
    ASSERT_EQ(image.channels, channels);
    ASSERT_EQ(image.pixels.size(), pixels.size());
    int worst = 0;
    for (std::size_t i = 0; i < pixels.size(); ++i) {
      worst = std::max(worst, std::abs(int{image.pixels[i]} - int{pixels[i]}));
    }
    EXPECT_LE(worst, 6) << channels << " channels";
  }
}

TEST(EncodeArgs, BadSizesAreInvalidArgument) {
  const std::vector<uint8_t> pixels(12);
  EXPECT_THROW(encode_png(pixels, 2, 2, 5), InvalidArgument);
  EXPECT_THROW(encode_png(pixels, 2, 3, 1), InvalidArgument);  // 6 values expected
  EXPECT_THROW(encode_jpeg(pixels, 2, 2, 3, 0), InvalidArgument);
  EXPECT_THROW(encode_jpeg(pixels, 2, 3, 2), InvalidArgument);
}

TEST(DecodeImage, BadChannelsAreInvalidArgument) {
  const std::string png = read_file(kGolden + "rgb.png");
  EXPECT_THROW(decode_image(bytes_of(png), 2, "x"), InvalidArgument);
  EXPECT_THROW(decode_image(bytes_of(png), 4, "x"), InvalidArgument);
}

// PNG's CRC-32 (ISO 3309), bit by bit.
uint32_t crc32_of(const std::string& data) {
  uint32_t crc = 0xFFFFFFFFu;
  for (char ch : data) {
    crc ^= static_cast<uint8_t>(ch);
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return crc ^ 0xFFFFFFFFu;
}

void expect_data_loss(const std::string& data, const std::string& where, const char* substring) {
  try {
    decode_image(bytes_of(data), 3, where);
    ADD_FAILURE() << where << ": decoded without an error";
  } catch (const DataLoss& e) {
    EXPECT_THAT(e.what(), StartsWith(where + ": "));
    EXPECT_THAT(e.what(), HasSubstr(substring));
  }
}

TEST(DecodeImage, NotAnImageNamesWhatItIs) {
  expect_data_loss("", "f, record 1: image/encoded", "is empty");
  expect_data_loss("GIF89a....", "f, record 2: image/encoded", "GIF");
  expect_data_loss("hello world", "f, record 3: image/encoded", "not a JPEG or PNG image");
}

TEST(DecodeImage, EveryTruncationIsDataLoss) {
  for (const char* file : {"rgb.png", "gray.png", "palette.png", "rgb16.png", "rgb.jpg", "gray.jpg",
                           "progressive.jpg"}) {
    const std::string data = read_file(kGolden + file);
    for (std::size_t n = 0; n < data.size(); ++n) {
      const std::string where = std::string(file) + " cut at " + std::to_string(n);
      try {
        decode_image(bytes_of(data.substr(0, n)), 3, where);
        ADD_FAILURE() << where << ": decoded without an error";
      } catch (const DataLoss& e) {
        EXPECT_THAT(e.what(), StartsWith(where + ": "));
      }
    }
  }
}

TEST(DecodeImage, PngCrcMismatchIsDataLoss) {
  std::string data = read_file(kGolden + "rgb.png");
  const std::size_t idat = data.find("IDAT");
  ASSERT_NE(idat, std::string::npos);
  // The CRC after the chunk's data (the data itself would first fail in zlib).
  auto length = [&](std::size_t at) {
    return (static_cast<std::size_t>(static_cast<uint8_t>(data[at])) << 24) |
           (static_cast<std::size_t>(static_cast<uint8_t>(data[at + 1])) << 16) |
           (static_cast<std::size_t>(static_cast<uint8_t>(data[at + 2])) << 8) |
           static_cast<std::size_t>(static_cast<uint8_t>(data[at + 3]));
  };
  const std::size_t crc_at = idat + 4 + length(idat - 4);
  data[crc_at] = static_cast<char>(data[crc_at] ^ 0x01);
  expect_data_loss(data, "train.tfrecord, record 17: image/encoded", "CRC");
}

TEST(DecodeImage, CorruptJpegHeaderIsDataLoss) {
  std::string data = read_file(kGolden + "rgb.jpg");
  // Start of frame (FF C0): precision, height, width; a height of 0 is refused.
  const std::size_t sof = data.find("\xFF\xC0", 2);
  ASSERT_NE(sof, std::string::npos);
  std::string no_height = data;
  no_height[sof + 5] = 0;
  no_height[sof + 6] = 0;
  expect_data_loss(no_height, "w", "corrupt JPEG");
  // An unknown marker where the frame header was.
  std::string bad_marker = data;
  bad_marker[sof + 1] = static_cast<char>(0x01);
  expect_data_loss(bad_marker, "w", "corrupt JPEG");
}

TEST(DecodeImage, EverySingleByteCorruptionThrowsDataLossOrDecodes) {
  // Flipped bits inside entropy-coded data may still decode (as TensorFlow's decoder lets
  // them); anything else must be DataLoss, never a crash or another exception.
  for (const char* file : {"rgb.png", "rgb.jpg", "progressive.jpg"}) {
    const std::string data = read_file(kGolden + file);
    for (std::size_t i = 0; i < data.size(); ++i) {
      std::string bad = data;
      bad[i] = static_cast<char>(bad[i] ^ 0x5A);
      try {
        DecodedImage image = decode_image(bytes_of(bad), 3, "x", 1 << 20);
        EXPECT_EQ(image.pixels.size(),
                  static_cast<std::size_t>(image.height * image.width * image.channels));
      } catch (const DataLoss&) {
      }
    }
  }
}

TEST(DecodeImage, PixelLimitIsCheckedBeforeDecoding) {
  for (const char* file : {"rgb.png", "rgb.jpg"}) {
    const std::string data = read_file(kGolden + file);
    EXPECT_EQ(decode_image(bytes_of(data), 3, file, kHeight * kWidth).pixels.size(),
              static_cast<std::size_t>(kHeight * kWidth * 3));
    try {
      decode_image(bytes_of(data), 3, "big", kHeight * kWidth - 1);
      ADD_FAILURE() << file << ": over the limit but decoded";
    } catch (const DataLoss& e) {
      EXPECT_THAT(e.what(), StartsWith("big: "));
      EXPECT_THAT(e.what(), HasSubstr("13 x 17 = 221 pixels, over the limit of 220"));
    }
  }
  // Headers claiming 60000 x 60000 pixels are refused before anything is allocated for them.
  std::string png = read_file(kGolden + "rgb.png");
  for (std::size_t at : {16, 20}) {  // IHDR width, height (big-endian)
    png[at] = 0;
    png[at + 1] = 0;
    png[at + 2] = static_cast<char>(0xEA);
    png[at + 3] = 0x60;
  }
  const uint32_t crc = crc32_of(png.substr(12, 17));  // "IHDR" and its 13 bytes
  for (int i = 0; i < 4; ++i) png[29 + i] = static_cast<char>(crc >> (24 - 8 * i));
  expect_data_loss(png, "huge png",
                   "60000 x 60000 = 3600000000 pixels, over the limit of 67108864");
  std::string jpeg = read_file(kGolden + "rgb.jpg");
  const std::size_t sof = jpeg.find("\xFF\xC0", 2);
  ASSERT_NE(sof, std::string::npos);
  for (std::size_t at : {sof + 5, sof + 7}) {  // height, width (big-endian)
    jpeg[at] = static_cast<char>(0xEA);
    jpeg[at + 1] = 0x60;
  }
  expect_data_loss(jpeg, "huge jpeg", "60000 x 60000 = 3600000000 pixels, over the limit");
}

// A JPEG of a few KB whose header claims 8000 x 8000 (under the pixel limit) is corrupt, found
// from its size before 64 megapixels are allocated and decoded to grey.
TEST(DecodeImage, AJpegClaimingMoreBlocksThanItHasBitsIsCorrupt) {
  std::string jpeg = read_file(kGolden + "rgb.jpg");
  ASSERT_LT(jpeg.size(), 8000u);
  const std::size_t sof = jpeg.find("\xFF\xC0", 2);
  ASSERT_NE(sof, std::string::npos);
  for (std::size_t at : {sof + 5, sof + 7}) {  // height, width (big-endian): 8000 = 0x1F40
    jpeg[at] = 0x1F;
    jpeg[at + 1] = 0x40;
  }
  const std::string message =
      "corrupt JPEG: its header claims 8000 x 8000 pixels (1000000 blocks of 8 x 8, at least a "
      "bit each) but the file holds " +
      std::to_string(jpeg.size()) + " bytes";
  expect_data_loss(jpeg, "claims", message.c_str());
  // The golden files themselves, and a progressive one, are well inside the bound.
  for (const char* file : {"rgb.jpg", "progressive.jpg"}) {
    const std::string data = read_file(kGolden + file);
    EXPECT_EQ(decode_image(bytes_of(data), 3, file, 1 << 20).height, kHeight) << file;
  }
}

}  // namespace
}  // namespace trainyard::image
