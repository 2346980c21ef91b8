// JPEG through libjpeg-turbo. libjpeg reports errors through error_exit, which must not return:
// ours longjmps back to the setjmp of the step that called the library. Each such step is a
// function whose own locals are all trivially destructible, so the jump skips no destructor;
// the C++ objects (pixels, messages) live in the callers, which turn a failed step into an
// exception.
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
// jpeglib.h uses FILE and size_t without including their headers.
#include <jpeglib.h>

#include "codec_internal.h"
#include "trainyard/error.h"

namespace trainyard::image::internal {
namespace {

// A progressive stream may have any number of scans, each a pass over the whole image; real
// encoders write about 10. Far more is a crafted file that would spin the decoder.
constexpr int kMaxScans = 1000;

struct JpegError {
  jpeg_error_mgr mgr;  // first: libjpeg sees &mgr as cinfo->err
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX + 64];
};

[[noreturn]] void fail(j_common_ptr cinfo, const char* message) {
  auto* error = reinterpret_cast<JpegError*>(cinfo->err);
  std::snprintf(error->message, sizeof(error->message), "%s", message);
  std::longjmp(error->jump, 1);
}

void on_error_exit(j_common_ptr cinfo) {
  char text[JMSG_LENGTH_MAX];
  (*cinfo->err->format_message)(cinfo, text);
  fail(cinfo, text);
}

void on_output_message(j_common_ptr) {}  // warnings (recoverable corruption) are not printed

// A source over the whole buffer, handed over at once: when libjpeg asks for more, the data
// ended before the image did. (jpeg_mem_src would instead insert a fake end-of-image marker and
// return a gray-filled image with a warning.)
constexpr const char* kTruncated = "truncated data: the stream ends before the end-of-image marker";

void init_source(j_decompress_ptr) {}
void term_source(j_decompress_ptr) {}
boolean fill_input_buffer(j_decompress_ptr cinfo) {
  fail(reinterpret_cast<j_common_ptr>(cinfo), kTruncated);
}
void skip_input_data(j_decompress_ptr cinfo, long count) {
  if (count <= 0) return;
  jpeg_source_mgr* src = cinfo->src;
  if (static_cast<unsigned long>(count) > src->bytes_in_buffer) {
    fail(reinterpret_cast<j_common_ptr>(cinfo), kTruncated);
  }
  src->next_input_byte += count;
  src->bytes_in_buffer -= static_cast<std::size_t>(count);
}

void on_progress(j_common_ptr cinfo) {
  if (!cinfo->is_decompressor) return;
  if (reinterpret_cast<j_decompress_ptr>(cinfo)->input_scan_number > kMaxScans) {
    fail(cinfo, "more than 1000 progressive scans");
  }
}

struct Decoder {
  jpeg_decompress_struct cinfo{};
  JpegError error{};
  jpeg_source_mgr source{};
  jpeg_progress_mgr progress{};
  bool created = false;

  Decoder() = default;
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;
  ~Decoder() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
};

// Steps under setjmp: false with the message in decoder->error.message.
bool read_header(Decoder* d, const unsigned char* data, std::size_t size) {
  d->cinfo.err = jpeg_std_error(&d->error.mgr);
  d->error.mgr.error_exit = on_error_exit;
  d->error.mgr.output_message = on_output_message;
  if (setjmp(d->error.jump)) return false;
  jpeg_create_decompress(&d->cinfo);
  d->created = true;
  d->source.next_input_byte = data;
  d->source.bytes_in_buffer = size;
  d->source.init_source = init_source;
  d->source.fill_input_buffer = fill_input_buffer;
  d->source.skip_input_data = skip_input_data;
  d->source.resync_to_restart = jpeg_resync_to_restart;
  d->source.term_source = term_source;
  d->cinfo.src = &d->source;
  d->progress.progress_monitor = on_progress;
  d->cinfo.progress = &d->progress;
  jpeg_read_header(&d->cinfo, TRUE);
  return true;
}

bool start(Decoder* d, J_COLOR_SPACE out_space) {
  if (setjmp(d->error.jump)) return false;
  d->cinfo.out_color_space = out_space;
  // TensorFlow's decode_jpeg defaults (dct_method ""): the fast integer DCT, fancy upsampling;
  // the golden test checks that the pixels are TensorFlow's.
  d->cinfo.dct_method = JDCT_IFAST;
  d->cinfo.do_fancy_upsampling = TRUE;
  jpeg_start_decompress(&d->cinfo);
  return true;
}

// Reads every scanline into `out` (rows of `row_bytes`), then the rest of the stream up to the
// end-of-image marker.
bool read_pixels(Decoder* d, unsigned char* out, std::size_t row_bytes) {
  if (setjmp(d->error.jump)) return false;
  while (d->cinfo.output_scanline < d->cinfo.output_height) {
    JSAMPROW row = out + static_cast<std::size_t>(d->cinfo.output_scanline) * row_bytes;
    jpeg_read_scanlines(&d->cinfo, &row, 1);
  }
  jpeg_finish_decompress(&d->cinfo);
  return true;
}

[[noreturn]] void corrupt(const std::string& where, const Decoder& d) {
  throw DataLoss(where + ": corrupt JPEG: " + d.error.message);
}

uint8_t gray_of(int r, int g, int b) {
  // ITU-R 601 luma, as libjpeg's own RGB to grayscale conversion.
  return static_cast<uint8_t>((r * 19595 + g * 38470 + b * 7471 + 32768) >> 16);
}

}  // namespace

DecodedImage decode_jpeg(std::span<const std::byte> bytes, int channels, const std::string& where,
                         int64_t max_pixels) {
  Decoder d;
  if (!read_header(&d, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size())) {
    corrupt(where, d);
  }
  const int64_t height = d.cinfo.image_height;
  const int64_t width = d.cinfo.image_width;
  check_image_size("JPEG", height, width, max_pixels, where);
  // A Huffman-coded JPEG spends at least one bit on every 8x8 block of its full-resolution
  // component (the DC code of a sequential or a progressive first scan), so a header that claims
  // more blocks than the file has bits is corrupt: refused before the image is allocated (a 4 KB
  // file claiming 8000 x 8000 decoded to 64 megapixels of grey). Arithmetic coding can spend
  // less, and is not bounded so.
  if (!d.cinfo.arith_code) {
    const uint64_t blocks =
        static_cast<uint64_t>((height + 7) / 8) * static_cast<uint64_t>((width + 7) / 8);
    if (blocks > static_cast<uint64_t>(bytes.size()) * 8) {
      throw DataLoss(where + ": corrupt JPEG: its header claims " + std::to_string(height) + " x " +
                     std::to_string(width) + " pixels (" + std::to_string(blocks) +
                     " blocks of 8 x 8, at least a bit each) but the file holds " +
                     std::to_string(bytes.size()) + " bytes");
    }
  }

  // What libjpeg delivers, and what we make of it.
  J_COLOR_SPACE out_space;
  int decoded_channels;
  const bool cmyk = d.cinfo.jpeg_color_space == JCS_CMYK || d.cinfo.jpeg_color_space == JCS_YCCK;
  if (cmyk) {
    out_space = JCS_CMYK;
    decoded_channels = 4;
  } else if (d.cinfo.num_components == 1 || d.cinfo.num_components == 3) {
    const int stored = d.cinfo.num_components;
    const int want = channels == 0 ? stored : channels;
    out_space = want == 1 ? JCS_GRAYSCALE : JCS_RGB;
    decoded_channels = want;
  } else {
    throw DataLoss(where + ": JPEG with " + std::to_string(d.cinfo.num_components) +
                   " color components; expected 1 (gray), 3 (color) or 4 (CMYK)");
  }
  if (!start(&d, out_space)) corrupt(where, d);
  if (static_cast<int64_t>(d.cinfo.output_height) != height ||
      static_cast<int64_t>(d.cinfo.output_width) != width ||
      d.cinfo.output_components != decoded_channels) {
    throw DataLoss(where + ": JPEG decoder output " + std::to_string(d.cinfo.output_height) +
                   " x " + std::to_string(d.cinfo.output_width) + " x " +
                   std::to_string(d.cinfo.output_components) + " differs from its header");
  }

  DecodedImage image;
  image.height = height;
  image.width = width;
  image.format = ImageFormat::kJpeg;
  const auto pixels = static_cast<std::size_t>(height) * static_cast<std::size_t>(width);
  std::vector<uint8_t> decoded(pixels * static_cast<std::size_t>(decoded_channels));
  if (!read_pixels(&d, decoded.data(),
                   static_cast<std::size_t>(width) * static_cast<std::size_t>(decoded_channels))) {
    corrupt(where, d);
  }
  if (!cmyk) {
    image.channels = decoded_channels;
    image.pixels = std::move(decoded);
    return image;
  }
  // Adobe's inverted CMYK, as TensorFlow converts it: R = C * K / 255 and so on.
  image.channels = channels == 1 ? 1 : 3;
  image.pixels.resize(pixels * static_cast<std::size_t>(image.channels));
  for (std::size_t i = 0; i < pixels; ++i) {
    const uint8_t* p = decoded.data() + 4 * i;
    const int k = p[3];
    const int r = p[0] * k / 255, g = p[1] * k / 255, b = p[2] * k / 255;
    if (image.channels == 1) {
      image.pixels[i] = gray_of(r, g, b);
    } else {
      image.pixels[3 * i] = static_cast<uint8_t>(r);
      image.pixels[3 * i + 1] = static_cast<uint8_t>(g);
      image.pixels[3 * i + 2] = static_cast<uint8_t>(b);
    }
  }
  return image;
}

namespace {

struct Encoder {
  jpeg_compress_struct cinfo{};
  JpegError error{};
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  bool created = false;

  Encoder() = default;
  Encoder(const Encoder&) = delete;
  Encoder& operator=(const Encoder&) = delete;
  ~Encoder() {
    if (created) jpeg_destroy_compress(&cinfo);
    std::free(buffer);
  }
};

bool compress(Encoder* e, const uint8_t* pixels, int64_t height, int64_t width, int channels,
              int quality) {
  e->cinfo.err = jpeg_std_error(&e->error.mgr);
  e->error.mgr.error_exit = on_error_exit;
  e->error.mgr.output_message = on_output_message;
  if (setjmp(e->error.jump)) return false;
  jpeg_create_compress(&e->cinfo);
  e->created = true;
  jpeg_mem_dest(&e->cinfo, &e->buffer, &e->size);
  e->cinfo.image_width = static_cast<JDIMENSION>(width);
  e->cinfo.image_height = static_cast<JDIMENSION>(height);
  e->cinfo.input_components = channels;
  e->cinfo.in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&e->cinfo);
  jpeg_set_quality(&e->cinfo, quality, TRUE);
  jpeg_start_compress(&e->cinfo, TRUE);
  const std::size_t row_bytes =
      static_cast<std::size_t>(width) * static_cast<std::size_t>(channels);
  while (e->cinfo.next_scanline < e->cinfo.image_height) {
    // libjpeg takes non-const rows but only reads them.
    JSAMPROW row = const_cast<uint8_t*>(pixels) + e->cinfo.next_scanline * row_bytes;
    jpeg_write_scanlines(&e->cinfo, &row, 1);
  }
  jpeg_finish_compress(&e->cinfo);
  return true;
}

}  // namespace
}  // namespace trainyard::image::internal

namespace trainyard::image {

std::string encode_jpeg(std::span<const uint8_t> pixels, int64_t height, int64_t width,
                        int channels, int quality) {
  internal::check_encode_args("jpeg", pixels.size(), height, width, channels, {1, 3}, 65500);
  if (quality < 1 || quality > 100) {
    throw InvalidArgument("encode_jpeg: quality is " + std::to_string(quality) +
                          "; expected 1..100");
  }
  internal::Encoder e;
  if (!internal::compress(&e, pixels.data(), height, width, channels, quality)) {
    throw Error(std::string("libjpeg: encoding failed: ") + e.error.message);
  }
  return std::string(reinterpret_cast<const char*>(e.buffer), e.size);
}

}  // namespace trainyard::image
