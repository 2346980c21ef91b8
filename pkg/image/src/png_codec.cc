// PNG through libpng. As in jpeg_codec.cc, libpng's errors longjmp back to the step that
// called it (png_error never returns); each step keeps only trivially destructible locals.
#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>

#include "codec_internal.h"
#include "trainyard/error.h"

namespace trainyard::image::internal {
namespace {

struct Reader {
  png_structp png = nullptr;
  png_infop info = nullptr;
  const unsigned char* data = nullptr;
  std::size_t size = 0;
  std::size_t position = 0;
  char message[256] = {};

  Reader() = default;
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;
  ~Reader() {
    if (png != nullptr) png_destroy_read_struct(&png, info != nullptr ? &info : nullptr, nullptr);
  }
};

void on_error(png_structp png, png_const_charp message) {
  auto* reader = static_cast<Reader*>(png_get_error_ptr(png));
  std::snprintf(reader->message, sizeof(reader->message), "%s", message);
  png_longjmp(png, 1);
}

void on_warning(png_structp, png_const_charp) {}  // ancillary problems: libpng goes on

void on_read(png_structp png, png_bytep out, png_size_t count) {
  auto* reader = static_cast<Reader*>(png_get_io_ptr(png));
  if (count > reader->size - reader->position) {
    png_error(png, "truncated data: the stream ends before the image does");
  }
  std::memcpy(out, reader->data + reader->position, count);
  reader->position += count;
}

struct Header {
  png_uint_32 width = 0;
  png_uint_32 height = 0;
  int bit_depth = 0;
  int color_type = 0;
  bool transparency = false;  // a tRNS chunk
};

// Steps under setjmp: false with the message in reader->message.
bool read_header(Reader* r, Header* header) {
  r->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, r, on_error, on_warning);
  if (r->png == nullptr) {
    std::snprintf(r->message, sizeof(r->message), "libpng: cannot create a reader");
    return false;
  }
  if (setjmp(png_jmpbuf(r->png))) return false;
  r->info = png_create_info_struct(r->png);
  if (r->info == nullptr) png_error(r->png, "cannot create an info struct");
  png_set_read_fn(r->png, r, on_read);
  png_read_info(r->png, r->info);
  header->width = png_get_image_width(r->png, r->info);
  header->height = png_get_image_height(r->png, r->info);
  header->bit_depth = png_get_bit_depth(r->png, r->info);
  header->color_type = png_get_color_type(r->png, r->info);
  header->transparency = png_get_valid(r->png, r->info, PNG_INFO_tRNS) != 0;
  return true;
}

// The transformations TensorFlow's decode_png sets for uint8 output with `channels`; returns
// the channels and row bytes libpng will deliver.
bool set_transforms(Reader* r, const Header& h, int channels, int* out_channels,
                    std::size_t* row_bytes) {
  if (setjmp(png_jmpbuf(r->png))) return false;
  const bool gray = (h.color_type & PNG_COLOR_MASK_COLOR) == 0;
  if (h.color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(r->png);
  if (gray && h.bit_depth < 8) png_set_expand_gray_1_2_4_to_8(r->png);
  if (channels == 0 && h.transparency) png_set_tRNS_to_alpha(r->png);
  if (h.bit_depth == 16) png_set_strip_16(r->png);
  if (channels == 1 && !gray) {
    // png_set_rgb_to_gray(png, 1, 0.299, 0.587), in libpng's fixed point.
    png_set_rgb_to_gray_fixed(r->png, 1, 29900, 58700);
  }
  if (channels == 3 && gray) png_set_gray_to_rgb(r->png);
  if (channels != 0) png_set_strip_alpha(r->png);
  png_set_interlace_handling(r->png);
  png_read_update_info(r->png, r->info);
  *out_channels = png_get_channels(r->png, r->info);
  *row_bytes = png_get_rowbytes(r->png, r->info);
  if (png_get_bit_depth(r->png, r->info) != 8) png_error(r->png, "not 8 bits after transforms");
  return true;
}

// Reads the rows, then the chunks after the image data up to IEND (whose CRCs are checked).
bool read_rows(Reader* r, png_bytepp rows) {
  if (setjmp(png_jmpbuf(r->png))) return false;
  png_read_image(r->png, rows);
  png_read_end(r->png, nullptr);
  return true;
}

[[noreturn]] void corrupt(const std::string& where, const Reader& r) {
  throw DataLoss(where + ": corrupt PNG: " + r.message);
}

}  // namespace

DecodedImage decode_png(std::span<const std::byte> bytes, int channels, const std::string& where,
                        int64_t max_pixels) {
  Reader r;
  r.data = reinterpret_cast<const unsigned char*>(bytes.data());
  r.size = bytes.size();
  Header h;
  if (!read_header(&r, &h)) corrupt(where, r);
  check_image_size("PNG", h.height, h.width, max_pixels, where);
  int out_channels = 0;
  std::size_t row_bytes = 0;
  if (!set_transforms(&r, h, channels, &out_channels, &row_bytes)) corrupt(where, r);
  const auto width = static_cast<std::size_t>(h.width);
  if ((channels != 0 && out_channels != channels) ||
      row_bytes != width * static_cast<std::size_t>(out_channels)) {
    throw DataLoss(where + ": PNG decoder delivers " + std::to_string(out_channels) +
                   " channels in rows of " + std::to_string(row_bytes) + " bytes for width " +
                   std::to_string(h.width));
  }
  DecodedImage image;
  image.height = h.height;
  image.width = h.width;
  image.channels = out_channels;
  image.format = ImageFormat::kPng;
  image.pixels.resize(static_cast<std::size_t>(h.height) * row_bytes);
  std::vector<png_bytep> rows(h.height);
  for (std::size_t y = 0; y < rows.size(); ++y) rows[y] = image.pixels.data() + y * row_bytes;
  if (!read_rows(&r, rows.data())) corrupt(where, r);
  return image;
}

namespace {

struct Writer {
  png_structp png = nullptr;
  png_infop info = nullptr;
  char message[256] = {};

  Writer() = default;
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;
  ~Writer() {
    if (png != nullptr) png_destroy_write_struct(&png, info != nullptr ? &info : nullptr);
  }
};

void on_write_error(png_structp png, png_const_charp message) {
  auto* writer = static_cast<Writer*>(png_get_error_ptr(png));
  std::snprintf(writer->message, sizeof(writer->message), "%s", message);
  png_longjmp(png, 1);
}

void on_write(png_structp png, png_bytep data, png_size_t count) {
  static_cast<std::string*>(png_get_io_ptr(png))->append(reinterpret_cast<char*>(data), count);
}

void on_flush(png_structp) {}

bool write_png(Writer* w, std::string* out, const uint8_t* pixels, int64_t height, int64_t width,
               int channels) {
  w->png = png_create_write_struct(PNG_LIBPNG_VER_STRING, w, on_write_error, on_warning);
  if (w->png == nullptr) {
    std::snprintf(w->message, sizeof(w->message), "cannot create a writer");
    return false;
  }
  if (setjmp(png_jmpbuf(w->png))) return false;
  w->info = png_create_info_struct(w->png);
  if (w->info == nullptr) png_error(w->png, "cannot create an info struct");
  png_set_write_fn(w->png, out, on_write, on_flush);
  static constexpr int kColorTypes[] = {PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA,
                                        PNG_COLOR_TYPE_RGB, PNG_COLOR_TYPE_RGB_ALPHA};
  png_set_IHDR(w->png, w->info, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height),
               8, kColorTypes[channels - 1], PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  png_write_info(w->png, w->info);
  const std::size_t row_bytes =
      static_cast<std::size_t>(width) * static_cast<std::size_t>(channels);
  for (int64_t y = 0; y < height; ++y) {
    // libpng takes non-const rows but only reads them.
    png_write_row(w->png, const_cast<png_bytep>(pixels + static_cast<std::size_t>(y) * row_bytes));
  }
  png_write_end(w->png, nullptr);
  return true;
}

}  // namespace
}  // namespace trainyard::image::internal

namespace trainyard::image {

std::string encode_png(std::span<const uint8_t> pixels, int64_t height, int64_t width,
                       int channels) {
  internal::check_encode_args("png", pixels.size(), height, width, channels, {1, 2, 3, 4},
                              PNG_USER_WIDTH_MAX);
  std::string out;
  internal::Writer w;
  if (!internal::write_png(&w, &out, pixels.data(), height, width, channels)) {
    throw Error(std::string("libpng: encoding failed: ") + w.message);
  }
  return out;
}

}  // namespace trainyard::image
