// pycocotools' mask API (see coco_mask.h). Built with -ffp-contract=off: the polygon walk's
// roundings must be those of separate multiplies and adds, as maskApi.c compiles on x86-64.
#include "trainyard/pkg/detection/coco_mask.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "trainyard/error.h"

namespace trainyard::detection {
namespace {

void check_size(int64_t height, int64_t width) {
  if (height < 0 || width < 0 || height > kMaxMaskSide || width > kMaxMaskSide ||
      height * width > kMaxMaskPixels) {
    throw InvalidArgument("mask size " + std::to_string(height) + " x " + std::to_string(width) +
                          " is not within 0..2^20 per side and 2^28 pixels");
  }
}

void check_counts_sum(const Rle& rle) {
  uint64_t sum = 0;
  for (uint32_t c : rle.counts) sum += c;
  if (sum != static_cast<uint64_t>(rle.height * rle.width)) {
    throw InvalidArgument("RLE counts sum to " + std::to_string(sum) + ", not height x width = " +
                          std::to_string(rle.height) + " x " + std::to_string(rle.width) + " = " +
                          std::to_string(rle.height * rle.width));
  }
}

}  // namespace

Rle rle_from_counts(int64_t height, int64_t width, std::vector<uint32_t> counts) {
  check_size(height, width);
  Rle rle{height, width, std::move(counts)};
  check_counts_sum(rle);
  return rle;
}

Rle rle_encode(const uint8_t* mask, int64_t height, int64_t width) {
  check_size(height, width);
  Rle rle{height, width, {}};
  const int64_t n = height * width;
  uint8_t value = 0;
  uint32_t run = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t v = mask[i] != 0;
    if (v != value) {
      rle.counts.push_back(run);
      run = 0;
      value = v;
    }
    ++run;
  }
  rle.counts.push_back(run);
  return rle;
}

std::vector<uint8_t> rle_decode(const Rle& rle) {
  check_size(rle.height, rle.width);
  check_counts_sum(rle);
  std::vector<uint8_t> mask;
  mask.reserve(static_cast<std::size_t>(rle.height * rle.width));
  uint8_t value = 0;
  for (uint32_t c : rle.counts) {
    mask.insert(mask.end(), c, value);
    value = !value;
  }
  return mask;
}

Rle rle_encode_row_major(const uint8_t* mask, int64_t height, int64_t width, int64_t stride) {
  check_size(height, width);
  if (stride < width) {
    throw InvalidArgument("rle_encode_row_major: the rows are " + std::to_string(stride) +
                          " bytes apart, fewer than the width " + std::to_string(width));
  }
  std::vector<uint8_t> column_major(static_cast<std::size_t>(height * width));
  for (int64_t x = 0; x < width; ++x) {
    for (int64_t y = 0; y < height; ++y) {
      column_major[static_cast<std::size_t>(x * height + y)] = mask[y * stride + x];
    }
  }
  return rle_encode(column_major.data(), height, width);
}

std::vector<uint8_t> rle_decode_row_major(const Rle& rle) {
  const std::vector<uint8_t> column_major = rle_decode(rle);
  const auto h = static_cast<std::size_t>(rle.height);
  const auto w = static_cast<std::size_t>(rle.width);
  std::vector<uint8_t> row_major(h * w);
  for (std::size_t y = 0; y < h; ++y) {
    for (std::size_t x = 0; x < w; ++x) row_major[y * w + x] = column_major[x * h + y];
  }
  return row_major;
}

std::string rle_to_string(const Rle& rle) {
  std::string out;
  for (std::size_t i = 0; i < rle.counts.size(); ++i) {
    int64_t x = rle.counts[i];
    if (i > 2) x -= rle.counts[i - 2];
    while (true) {
      int group = static_cast<int>(x & 0x1f);
      x >>= 5;  // arithmetic: the sign stays
      const bool more = (group & 0x10) ? x != -1 : x != 0;
      if (more) group |= 0x20;
      out += static_cast<char>(group + 48);
      if (!more) break;
    }
  }
  return out;
}

Rle rle_from_string(std::string_view text, int64_t height, int64_t width) {
  check_size(height, width);
  Rle rle{height, width, {}};
  std::size_t p = 0;
  while (p < text.size()) {
    int64_t x = 0;
    int shift = 0;
    while (true) {
      if (p >= text.size()) throw InvalidArgument("compressed RLE counts end inside a count");
      const int c = static_cast<unsigned char>(text[p++]) - 48;
      if (c < 0 || c > 63) {
        throw InvalidArgument("compressed RLE counts have the character '" +
                              std::string(1, text[p - 1]) + "' (byte " + std::to_string(p - 1) +
                              "), not one of '0'..'o'");
      }
      if (shift > 35) throw InvalidArgument("compressed RLE count longer than 8 characters");
      x |= static_cast<int64_t>(c & 0x1f) << shift;
      shift += 5;
      if (!(c & 0x20)) {
        if (c & 0x10) x |= -(int64_t{1} << shift);  // sign-extend
        break;
      }
    }
    const std::size_t m = rle.counts.size();
    if (m > 2) x += rle.counts[m - 2];
    if (x < 0 || x > int64_t{0xFFFFFFFF}) {
      throw InvalidArgument("compressed RLE count " + std::to_string(m) + " is " +
                            std::to_string(x) + ", not in 0..2^32-1");
    }
    rle.counts.push_back(static_cast<uint32_t>(x));
  }
  check_counts_sum(rle);
  return rle;
}

Rle rle_from_polygon(const double* xy, std::size_t num_coordinates, int64_t height, int64_t width) {
  check_size(height, width);
  if (num_coordinates % 2 != 0) {
    throw InvalidArgument("polygon has " + std::to_string(num_coordinates) +
                          " coordinates, not an even number (x, y pairs)");
  }
  if (num_coordinates > kMaxPolygonCoordinates) {
    throw InvalidArgument("polygon has " + std::to_string(num_coordinates) +
                          " coordinates, more than 2^22");
  }
  const std::size_t k = num_coordinates / 2;
  constexpr double kScale = 5;
  // The vertices at 5x, rounded as maskApi's (int)(scale * v + .5) (towards zero).
  std::vector<int> x(k + 1), y(k + 1);
  for (std::size_t j = 0; j < k; ++j) {
    for (int c = 0; c < 2; ++c) {
      const double v = xy[2 * j + c];
      if (!std::isfinite(v) || std::fabs(v) > kMaxPolygonCoordinate) {
        throw InvalidArgument("polygon coordinate " + std::to_string(2 * j + c) + " is " +
                              std::to_string(v) + ", not finite within +-1e7");
      }
      (c == 0 ? x : y)[j] = static_cast<int>(kScale * v + .5);
    }
  }
  if (k > 0) {
    x[k] = x[0];
    y[k] = y[0];
  }
  int64_t boundary_points = 0;
  for (std::size_t j = 0; j < k; ++j) {
    boundary_points += std::max(std::abs(x[j] - x[j + 1]), std::abs(y[j] - y[j + 1])) + 1;
  }
  if (boundary_points > kMaxPolygonBoundaryPoints) {
    throw InvalidArgument("polygon boundary has " + std::to_string(boundary_points) +
                          " points at 5x, more than 2^27");
  }
  // Walk the boundary point by point (each edge from its first vertex to its second, rounded
  // from the end with the smaller coordinate along the longer axis); where the walk moves to
  // another 5x column, that column's centre crossing, if it is a pixel column's, gives the
  // first pixel of a vertical run boundary.
  const double h = static_cast<double>(height);
  std::vector<uint32_t> a;
  bool has_previous = false;
  int pu = 0, pv = 0;
  const auto visit = [&](int u, int v) {
    if (has_previous && u != pu) {
      double xd = u < pu ? u : u - 1;
      xd = (xd + .5) / kScale - .5;
      if (std::floor(xd) == xd && xd >= 0 && xd <= static_cast<double>(width - 1)) {
        double yd = v < pv ? v : pv;
        yd = (yd + .5) / kScale - .5;
        if (yd < 0) {
          yd = 0;
        } else if (yd > h) {
          yd = h;
        }
        yd = std::ceil(yd);
        a.push_back(
            static_cast<uint32_t>(static_cast<int64_t>(xd) * height + static_cast<int64_t>(yd)));
      }
    }
    pu = u;
    pv = v;
    has_previous = true;
  };
  for (std::size_t j = 0; j < k; ++j) {
    int xs = x[j], xe = x[j + 1], ys = y[j], ye = y[j + 1];
    const int dx = std::abs(xe - xs), dy = std::abs(ys - ye);
    const bool flip = (dx >= dy && xs > xe) || (dx < dy && ys > ye);
    if (flip) {
      std::swap(xs, xe);
      std::swap(ys, ye);
    }
    if (dx >= dy) {
      const double s = dx == 0 ? 0.0 : static_cast<double>(ye - ys) / dx;
      for (int d = 0; d <= dx; ++d) {
        const int t = flip ? dx - d : d;
        visit(t + xs, static_cast<int>(ys + s * t + .5));
      }
    } else {
      const double s = static_cast<double>(xe - xs) / dy;
      for (int d = 0; d <= dy; ++d) {
        const int t = flip ? dy - d : d;
        visit(static_cast<int>(xs + s * t + .5), t + ys);
      }
    }
  }
  // The boundary pixels in column-major order, each toggling the value; the differences are the
  // runs, and a repeated pixel (a zero run) joins the runs around it.
  a.push_back(static_cast<uint32_t>(height * width));
  std::sort(a.begin(), a.end());
  uint32_t previous = 0;
  for (uint32_t& value : a) {
    const uint32_t t = value;
    value -= previous;
    previous = t;
  }
  Rle rle{height, width, {}};
  std::size_t j = 0;
  rle.counts.push_back(a[j++]);
  while (j < a.size()) {
    if (a[j] > 0) {
      rle.counts.push_back(a[j++]);
    } else {
      ++j;
      if (j < a.size()) rle.counts.back() += a[j++];
    }
  }
  return rle;
}

Rle rle_from_bbox(const std::array<double, 4>& bbox, int64_t height, int64_t width) {
  const double xs = bbox[0], xe = xs + bbox[2], ys = bbox[1], ye = ys + bbox[3];
  const double xy[8] = {xs, ys, xs, ye, xe, ye, xe, ys};
  return rle_from_polygon(xy, 8, height, width);
}

Rle rle_merge(const std::vector<Rle>& masks, bool intersect) {
  if (masks.empty()) return Rle{};
  if (masks.size() == 1) return masks[0];
  Rle merged = masks[0];
  for (std::size_t i = 1; i < masks.size(); ++i) {
    const Rle& b = masks[i];
    if (b.height != merged.height || b.width != merged.width) return Rle{};
    const Rle a = std::move(merged);
    merged = Rle{a.height, a.width, {}};
    if (a.counts.empty() || b.counts.empty()) {
      // maskApi reads cnts[0] of each; an RLE of a 0-pixel mask has nothing to merge.
      merged.counts = {0};
      continue;
    }
    // Walk both run lists; a run of the result ends where its value changes.
    uint32_t ca = a.counts[0], cb = b.counts[0], cc = 0;
    bool va = false, vb = false, v = false;
    std::size_t ia = 1, ib = 1;
    uint64_t remaining = 1;
    while (remaining > 0) {
      const uint32_t c = std::min(ca, cb);
      cc += c;
      ca -= c;
      if (ca == 0 && ia < a.counts.size()) {
        ca = a.counts[ia++];
        va = !va;
      }
      cb -= c;
      if (cb == 0 && ib < b.counts.size()) {
        cb = b.counts[ib++];
        vb = !vb;
      }
      remaining = uint64_t{ca} + cb;
      const bool vp = v;
      v = intersect ? (va && vb) : (va || vb);
      if (v != vp || remaining == 0) {
        merged.counts.push_back(cc);
        cc = 0;
      }
    }
  }
  return merged;
}

uint64_t rle_area(const Rle& rle) {
  uint64_t area = 0;
  for (std::size_t j = 1; j < rle.counts.size(); j += 2) area += rle.counts[j];
  return area;
}

std::array<double, 4> rle_to_bbox(const Rle& rle) {
  const std::size_t m = rle.counts.size() / 2 * 2;  // a trailing run of zeros is not a box
  if (m == 0 || rle.height == 0) return {0, 0, 0, 0};
  // maskApi's unsigned arithmetic, a 0-run first included.
  const uint32_t h = static_cast<uint32_t>(rle.height), w = static_cast<uint32_t>(rle.width);
  uint32_t xs = w, ys = h, xe = 0, ye = 0, cc = 0, xp = 0;
  for (std::size_t j = 0; j < m; ++j) {
    cc += rle.counts[j];
    const uint32_t t = cc - static_cast<uint32_t>(j % 2);
    const uint32_t y = t % h, x = (t - y) / h;
    if (j % 2 == 0) {
      xp = x;
    } else if (xp < x) {  // the run crosses a column: every row is covered
      ys = 0;
      ye = h - 1;
    }
    xs = std::min(xs, x);
    xe = std::max(xe, x);
    ys = std::min(ys, y);
    ye = std::max(ye, y);
  }
  return {static_cast<double>(xs), static_cast<double>(ys), static_cast<double>(xe - xs + 1),
          static_cast<double>(ye - ys + 1)};
}

double rle_iou(const Rle& detection, const Rle& groundtruth, bool groundtruth_is_crowd) {
  // The boxes first (maskApi's bbIou): masks whose boxes do not overlap have IoU 0.
  const std::array<double, 4> d = rle_to_bbox(detection), g = rle_to_bbox(groundtruth);
  const double bw = std::fmin(d[2] + d[0], g[2] + g[0]) - std::fmax(d[0], g[0]);
  if (bw <= 0) return 0;
  const double bh = std::fmin(d[3] + d[1], g[3] + g[1]) - std::fmax(d[1], g[1]);
  if (bh <= 0) return 0;
  const double box_union = groundtruth_is_crowd ? d[2] * d[3] : d[2] * d[3] + g[2] * g[3] - bw * bh;
  if (!(bw * bh / box_union > 0)) return 0;
  if (detection.height != groundtruth.height || detection.width != groundtruth.width) return -1;
  uint32_t ca = detection.counts[0], cb = groundtruth.counts[0];
  bool va = false, vb = false;
  std::size_t ia = 1, ib = 1;
  uint64_t intersection = 0, union_area = 0, remaining = 1;
  while (remaining > 0) {
    const uint32_t c = std::min(ca, cb);
    if (va || vb) {
      union_area += c;
      if (va && vb) intersection += c;
    }
    ca -= c;
    if (ca == 0 && ia < detection.counts.size()) {
      ca = detection.counts[ia++];
      va = !va;
    }
    cb -= c;
    if (cb == 0 && ib < groundtruth.counts.size()) {
      cb = groundtruth.counts[ib++];
      vb = !vb;
    }
    remaining = uint64_t{ca} + cb;
  }
  if (intersection == 0) {
    union_area = 1;
  } else if (groundtruth_is_crowd) {
    union_area = rle_area(detection);
  }
  return static_cast<double>(intersection) / static_cast<double>(union_area);
}

Rle coco_segmentation_rle(const CocoSegmentation& segmentation, int64_t image_height,
                          int64_t image_width) {
  switch (segmentation.kind) {
    case CocoSegmentation::Kind::kNone:
      throw InvalidArgument("no segmentation");
    case CocoSegmentation::Kind::kPolygons: {
      if (segmentation.polygons.empty()) {
        throw InvalidArgument("segmentation is an empty list of polygons");
      }
      if (segmentation.polygons[0].size() <= 4) {
        throw InvalidArgument("the first polygon has " +
                              std::to_string(segmentation.polygons[0].size()) +
                              " coordinates; pycocotools needs more than 4 (it reads 4 as a box, "
                              "and fails)");
      }
      if (image_height <= 0 || image_width <= 0) {
        throw InvalidArgument(
            "polygons need the image's height and width, which its `images` entry lacks");
      }
      std::vector<Rle> parts;
      for (std::size_t i = 0; i < segmentation.polygons.size(); ++i) {
        const std::vector<double>& polygon = segmentation.polygons[i];
        try {
          parts.push_back(
              rle_from_polygon(polygon.data(), polygon.size(), image_height, image_width));
        } catch (const InvalidArgument& e) {
          throw InvalidArgument("polygon " + std::to_string(i) + ": " + e.what());
        }
      }
      return rle_merge(parts, false);
    }
    case CocoSegmentation::Kind::kUncompressedRle:
      return rle_from_counts(segmentation.height, segmentation.width, segmentation.counts);
    case CocoSegmentation::Kind::kCompressedRle:
      return rle_from_string(segmentation.compressed, segmentation.height, segmentation.width);
  }
  throw InvalidArgument("unknown segmentation kind");
}

}  // namespace trainyard::detection
