// Reference implementations of Trainyard's ops for the forward tests: plain loops over
// std::vector<double> with explicit row-major index arithmetic, written from the semantics in
// op.h and ops.h. They share no code with the core or any backend and favour obviousness over
// speed; every function takes and returns host arrays.
#ifndef TRAINYARD_TESTS_UNIT_REFERENCE_OPS_H_
#define TRAINYARD_TESTS_UNIT_REFERENCE_OPS_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace trainyard::reference {

using Dims = std::vector<int64_t>;

// A dense row-major array of doubles (integer and bool tensors hold their values as doubles).
struct Array {
  Dims shape;
  std::vector<double> values;
};

inline int64_t count(const Dims& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

inline Array filled(const Dims& shape, double value) {
  return {shape, std::vector<double>(static_cast<std::size_t>(count(shape)), value)};
}

// Flat row-major position -> index per dimension.
inline Dims unravel(int64_t flat, const Dims& shape) {
  Dims index(shape.size(), 0);
  for (std::size_t i = shape.size(); i-- > 0;) {
    index[i] = flat % shape[i];
    flat /= shape[i];
  }
  return index;
}

// Index per dimension -> flat row-major position.
inline int64_t ravel(const Dims& index, const Dims& shape) {
  int64_t flat = 0;
  for (std::size_t i = 0; i < shape.size(); ++i) flat = flat * shape[i] + index[i];
  return flat;
}

inline double at(const Array& a, const Dims& index) {
  return a.values[static_cast<std::size_t>(ravel(index, a.shape))];
}

inline int64_t normalize_axis(int64_t axis, std::size_t rank) {
  int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) throw std::invalid_argument("reference: axis out of range");
  return axis < 0 ? axis + r : axis;
}

// ---- Elementwise ----

inline Array map(const Array& x, const std::function<double(double)>& f) {
  Array y = x;
  for (double& v : y.values) v = f(v);
  return y;
}

// NumPy broadcasting: align trailing dimensions; each pair must be equal or contain a 1.
inline Dims broadcast_shape(const Dims& a, const Dims& b) {
  std::size_t rank = std::max(a.size(), b.size());
  Dims out(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) throw std::invalid_argument("reference: not broadcastable");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// The element of an operand of `shape` that output index `out_index` reads under broadcasting.
inline double broadcast_at(const Array& a, const Dims& out_index) {
  std::size_t lead = out_index.size() - a.shape.size();
  Dims index(a.shape.size());
  for (std::size_t i = 0; i < a.shape.size(); ++i) {
    index[i] = a.shape[i] == 1 ? 0 : out_index[lead + i];
  }
  return at(a, index);
}

inline Array binary(const Array& a, const Array& b,
                    const std::function<double(double, double)>& f) {
  Array y = filled(broadcast_shape(a.shape, b.shape), 0.0);
  for (int64_t i = 0; i < count(y.shape); ++i) {
    Dims index = unravel(i, y.shape);
    y.values[static_cast<std::size_t>(i)] = f(broadcast_at(a, index), broadcast_at(b, index));
  }
  return y;
}

inline Array where(const Array& condition, const Array& a, const Array& b) {
  Array y = filled(broadcast_shape(condition.shape, broadcast_shape(a.shape, b.shape)), 0.0);
  for (int64_t i = 0; i < count(y.shape); ++i) {
    Dims index = unravel(i, y.shape);
    y.values[static_cast<std::size_t>(i)] =
        broadcast_at(condition, index) != 0.0 ? broadcast_at(a, index) : broadcast_at(b, index);
  }
  return y;
}

// ---- Reductions ----

enum class Reduction { kSum, kMean, kMax, kMin, kLogSumExp };

// Reduces `axes` (negative allowed; empty = every axis). A reduction over zero elements gives
// 0 for sum, NaN for mean, -inf / +inf for max / min and -inf for logsumexp.
inline Array reduce(const Array& x, const Dims& axes, bool keepdims, Reduction kind) {
  std::size_t rank = x.shape.size();
  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t axis : axes) reduced[static_cast<std::size_t>(normalize_axis(axis, rank))] = true;
  Dims kept_shape(rank), out_shape;
  for (std::size_t i = 0; i < rank; ++i) {
    kept_shape[i] = reduced[i] ? 1 : x.shape[i];
    if (!reduced[i]) out_shape.push_back(x.shape[i]);
  }
  std::vector<std::vector<double>> groups(static_cast<std::size_t>(count(kept_shape)));
  for (int64_t i = 0; i < count(x.shape); ++i) {
    Dims index = unravel(i, x.shape);
    for (std::size_t d = 0; d < rank; ++d) {
      if (reduced[d]) index[d] = 0;
    }
    groups[static_cast<std::size_t>(ravel(index, kept_shape))].push_back(
        x.values[static_cast<std::size_t>(i)]);
  }
  constexpr double kInf = std::numeric_limits<double>::infinity();
  Array y{keepdims ? kept_shape : out_shape, {}};
  for (const std::vector<double>& group : groups) {
    double sum = 0.0, max = -kInf, min = kInf;
    for (double v : group) {
      sum += v;
      max = std::max(max, v);
      min = std::min(min, v);
    }
    double result = 0.0;
    switch (kind) {
      case Reduction::kSum:
        result = sum;
        break;
      case Reduction::kMean:
        result = group.empty() ? std::numeric_limits<double>::quiet_NaN()
                               : sum / static_cast<double>(group.size());
        break;
      case Reduction::kMax:
        result = max;
        break;
      case Reduction::kMin:
        result = min;
        break;
      case Reduction::kLogSumExp: {
        if (group.empty()) {
          result = -kInf;
          break;
        }
        double exp_sum = 0.0;
        for (double v : group) exp_sum += std::exp(v - max);
        result = max + std::log(exp_sum);
        break;
      }
    }
    y.values.push_back(result);
  }
  return y;
}

// The index along `axis` of the first maximum, for every other index.
inline Array argmax(const Array& x, int64_t axis) {
  std::size_t a = static_cast<std::size_t>(normalize_axis(axis, x.shape.size()));
  Dims out_shape;
  for (std::size_t i = 0; i < x.shape.size(); ++i) {
    if (i != a) out_shape.push_back(x.shape[i]);
  }
  Array y = filled(out_shape, 0.0);
  for (int64_t o = 0; o < count(out_shape); ++o) {
    Dims out_index = unravel(o, out_shape);
    Dims index(out_index.begin(), out_index.begin() + static_cast<int64_t>(a));
    index.push_back(0);
    index.insert(index.end(), out_index.begin() + static_cast<int64_t>(a), out_index.end());
    int64_t best = 0;
    double best_value = at(x, index);
    for (int64_t k = 1; k < x.shape[a]; ++k) {
      index[a] = k;
      if (at(x, index) > best_value) {
        best_value = at(x, index);
        best = k;
      }
    }
    y.values[static_cast<std::size_t>(o)] = static_cast<double>(best);
  }
  return y;
}

// softmax (or log_softmax) along `axis`: exp(x - max) / sum, computed per line.
inline Array softmax(const Array& x, int64_t axis, bool log) {
  std::size_t a = static_cast<std::size_t>(normalize_axis(axis, x.shape.size()));
  Array y = x;
  for (int64_t i = 0; i < count(x.shape); ++i) {
    Dims index = unravel(i, x.shape);
    if (index[a] != 0) continue;  // visit each line once, from its first element
    double max = -std::numeric_limits<double>::infinity();
    for (int64_t k = 0; k < x.shape[a]; ++k) {
      index[a] = k;
      max = std::max(max, at(x, index));
    }
    double sum = 0.0;
    for (int64_t k = 0; k < x.shape[a]; ++k) {
      index[a] = k;
      sum += std::exp(at(x, index) - max);
    }
    for (int64_t k = 0; k < x.shape[a]; ++k) {
      index[a] = k;
      double shifted = at(x, index) - max;
      y.values[static_cast<std::size_t>(ravel(index, x.shape))] =
          log ? shifted - std::log(sum) : std::exp(shifted) / sum;
    }
  }
  return y;
}

// ---- Linear algebra ----

// a [..., M, K] (or [..., K, M] transposed) times b [..., K, N] (or [..., N, K]); a side of
// rank 2 is shared by every batch of the other.
inline Array matmul(const Array& a, const Array& b, bool transpose_a, bool transpose_b) {
  std::size_t ra = a.shape.size(), rb = b.shape.size();
  int64_t m = transpose_a ? a.shape[ra - 1] : a.shape[ra - 2];
  int64_t k = transpose_a ? a.shape[ra - 2] : a.shape[ra - 1];
  int64_t n = transpose_b ? b.shape[rb - 2] : b.shape[rb - 1];
  const Dims& batched = ra >= rb ? a.shape : b.shape;
  Dims batch_shape(batched.begin(), batched.end() - 2);
  int64_t batches = count(batch_shape);
  Dims out_shape = batch_shape;
  out_shape.push_back(m);
  out_shape.push_back(n);
  Array y = filled(out_shape, 0.0);
  int64_t a_rows = a.shape[ra - 2], a_cols = a.shape[ra - 1];
  int64_t b_rows = b.shape[rb - 2], b_cols = b.shape[rb - 1];
  for (int64_t batch = 0; batch < batches; ++batch) {
    int64_t a_base = ra == 2 ? 0 : batch * a_rows * a_cols;
    int64_t b_base = rb == 2 ? 0 : batch * b_rows * b_cols;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0.0;
        for (int64_t p = 0; p < k; ++p) {
          int64_t ai = transpose_a ? a_base + p * a_cols + i : a_base + i * a_cols + p;
          int64_t bi = transpose_b ? b_base + j * b_cols + p : b_base + p * b_cols + j;
          sum += a.values[static_cast<std::size_t>(ai)] * b.values[static_cast<std::size_t>(bi)];
        }
        y.values[static_cast<std::size_t>((batch * m + i) * n + j)] = sum;
      }
    }
  }
  return y;
}

enum class Act { kNone, kRelu, kSigmoid, kTanh };

inline Array matmul_bias_act(const Array& x, const Array& w, const Array& bias, Act act) {
  Array y = matmul(x, w, false, false);
  int64_t n = w.shape[1];
  for (std::size_t i = 0; i < y.values.size(); ++i) {
    double v = y.values[i] + bias.values[i % static_cast<std::size_t>(n)];
    switch (act) {
      case Act::kNone:
        break;
      case Act::kRelu:
        v = std::max(v, 0.0);
        break;
      case Act::kSigmoid:
        v = 1.0 / (1.0 + std::exp(-v));
        break;
      case Act::kTanh:
        v = std::tanh(v);
        break;
    }
    y.values[i] = v;
  }
  return y;
}

// ---- Convolution and pooling (NHWC) ----

struct Window {
  int64_t stride_h = 1, stride_w = 1;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
};

// TensorFlow's SAME rule: out = ceil(in / stride); the total padding needed is split with the
// extra element (if odd) after. Returns {before, after}.
inline std::pair<int64_t, int64_t> same_padding(int64_t in, int64_t window, int64_t stride,
                                                int64_t dilation) {
  int64_t out = (in + stride - 1) / stride;
  int64_t effective = (window - 1) * dilation + 1;
  int64_t total = std::max<int64_t>((out - 1) * stride + effective - in, 0);
  return {total / 2, total - total / 2};
}

inline Window same_window(int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t stride_h,
                          int64_t stride_w, int64_t dilation_h = 1, int64_t dilation_w = 1) {
  Window win{stride_h, stride_w, dilation_h, dilation_w};
  std::tie(win.pad_top, win.pad_bottom) = same_padding(h, kh, stride_h, dilation_h);
  std::tie(win.pad_left, win.pad_right) = same_padding(w, kw, stride_w, dilation_w);
  return win;
}

inline int64_t window_out(int64_t in, int64_t window, int64_t stride, int64_t dilation,
                          int64_t pad_before, int64_t pad_after) {
  return (in + pad_before + pad_after - ((window - 1) * dilation + 1)) / stride + 1;
}

// input [N, H, W, C], filter [KH, KW, C / groups, O]; out channel o belongs to group
// o / (O / groups) and reads input channels [g * C / groups, (g + 1) * C / groups).
inline Array conv2d(const Array& input, const Array& filter, const Window& win,
                    int64_t groups = 1) {
  int64_t batch = input.shape[0], h = input.shape[1], w = input.shape[2], c = input.shape[3];
  int64_t kh = filter.shape[0], kw = filter.shape[1], cg = filter.shape[2], o = filter.shape[3];
  int64_t oh = window_out(h, kh, win.stride_h, win.dilation_h, win.pad_top, win.pad_bottom);
  int64_t ow = window_out(w, kw, win.stride_w, win.dilation_w, win.pad_left, win.pad_right);
  int64_t out_per_group = o / groups;
  Array y = filled({batch, oh, ow, o}, 0.0);
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t i = 0; i < oh; ++i) {
      for (int64_t j = 0; j < ow; ++j) {
        for (int64_t oc = 0; oc < o; ++oc) {
          int64_t group = oc / out_per_group;
          double sum = 0.0;
          for (int64_t di = 0; di < kh; ++di) {
            for (int64_t dj = 0; dj < kw; ++dj) {
              int64_t y_in = i * win.stride_h - win.pad_top + di * win.dilation_h;
              int64_t x_in = j * win.stride_w - win.pad_left + dj * win.dilation_w;
              if (y_in < 0 || y_in >= h || x_in < 0 || x_in >= w) continue;
              for (int64_t ci = 0; ci < cg; ++ci) {
                sum += at(input, {n, y_in, x_in, group * cg + ci}) * at(filter, {di, dj, ci, oc});
              }
            }
          }
          y.values[static_cast<std::size_t>(ravel({n, i, j, oc}, y.shape))] = sum;
        }
      }
    }
  }
  (void)c;
  return y;
}

// TensorFlow's depthwise_conv2d: filter [KH, KW, C, M]; out channel c * M + m is input channel
// c convolved with filter[:, :, c, m].
inline Array depthwise_conv2d(const Array& input, const Array& filter, const Window& win) {
  int64_t batch = input.shape[0], h = input.shape[1], w = input.shape[2], c = input.shape[3];
  int64_t kh = filter.shape[0], kw = filter.shape[1], mult = filter.shape[3];
  int64_t oh = window_out(h, kh, win.stride_h, win.dilation_h, win.pad_top, win.pad_bottom);
  int64_t ow = window_out(w, kw, win.stride_w, win.dilation_w, win.pad_left, win.pad_right);
  Array y = filled({batch, oh, ow, c * mult}, 0.0);
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t i = 0; i < oh; ++i) {
      for (int64_t j = 0; j < ow; ++j) {
        for (int64_t ch = 0; ch < c; ++ch) {
          for (int64_t m = 0; m < mult; ++m) {
            double sum = 0.0;
            for (int64_t di = 0; di < kh; ++di) {
              for (int64_t dj = 0; dj < kw; ++dj) {
                int64_t y_in = i * win.stride_h - win.pad_top + di * win.dilation_h;
                int64_t x_in = j * win.stride_w - win.pad_left + dj * win.dilation_w;
                if (y_in < 0 || y_in >= h || x_in < 0 || x_in >= w) continue;
                sum += at(input, {n, y_in, x_in, ch}) * at(filter, {di, dj, ch, m});
              }
            }
            y.values[static_cast<std::size_t>(ravel({n, i, j, ch * mult + m}, y.shape))] = sum;
          }
        }
      }
    }
  }
  return y;
}

// Max or average over each window; padded positions are skipped (never the max, not counted
// in the average).
inline Array pool2d(const Array& input, int64_t window_h, int64_t window_w, const Window& win,
                    bool average) {
  int64_t batch = input.shape[0], h = input.shape[1], w = input.shape[2], c = input.shape[3];
  int64_t oh = window_out(h, window_h, win.stride_h, 1, win.pad_top, win.pad_bottom);
  int64_t ow = window_out(w, window_w, win.stride_w, 1, win.pad_left, win.pad_right);
  Array y = filled({batch, oh, ow, c}, 0.0);
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t i = 0; i < oh; ++i) {
      for (int64_t j = 0; j < ow; ++j) {
        for (int64_t ch = 0; ch < c; ++ch) {
          double sum = 0.0, max = -std::numeric_limits<double>::infinity();
          int64_t used = 0;
          for (int64_t di = 0; di < window_h; ++di) {
            for (int64_t dj = 0; dj < window_w; ++dj) {
              int64_t y_in = i * win.stride_h - win.pad_top + di;
              int64_t x_in = j * win.stride_w - win.pad_left + dj;
              if (y_in < 0 || y_in >= h || x_in < 0 || x_in >= w) continue;
              double v = at(input, {n, y_in, x_in, ch});
              sum += v;
              max = std::max(max, v);
              ++used;
            }
          }
          y.values[static_cast<std::size_t>(ravel({n, i, j, ch}, y.shape))] =
              average ? sum / static_cast<double>(used) : max;
        }
      }
    }
  }
  return y;
}

// ---- Batch normalization over the last axis ----

struct BatchNorm {
  Array y, mean, variance;  // variance is biased (divides by the count)
};

inline Array batch_norm_inference(const Array& x, const Array& gamma, const Array& beta,
                                  const Array& mean, const Array& variance, double epsilon) {
  std::size_t c = static_cast<std::size_t>(x.shape.back());
  Array y = x;
  for (std::size_t i = 0; i < x.values.size(); ++i) {
    std::size_t ch = i % c;
    y.values[i] = gamma.values[ch] * (x.values[i] - mean.values[ch]) /
                      std::sqrt(variance.values[ch] + epsilon) +
                  beta.values[ch];
  }
  return y;
}

inline BatchNorm batch_norm_training(const Array& x, const Array& gamma, const Array& beta,
                                     double epsilon) {
  std::size_t c = static_cast<std::size_t>(x.shape.back());
  std::size_t rows = x.values.size() / c;
  Array mean = filled({static_cast<int64_t>(c)}, 0.0);
  Array variance = mean;
  for (std::size_t i = 0; i < x.values.size(); ++i) mean.values[i % c] += x.values[i];
  for (double& m : mean.values) m /= static_cast<double>(rows);
  for (std::size_t i = 0; i < x.values.size(); ++i) {
    double d = x.values[i] - mean.values[i % c];
    variance.values[i % c] += d * d;
  }
  for (double& v : variance.values) v /= static_cast<double>(rows);
  return {batch_norm_inference(x, gamma, beta, mean, variance, epsilon), mean, variance};
}

// ---- Data movement ----

// x[begin : begin + size] per dimension; size -1 runs to the end.
inline Array slice(const Array& x, const Dims& begin, Dims size) {
  for (std::size_t i = 0; i < size.size(); ++i) {
    if (size[i] == -1) size[i] = x.shape[i] - begin[i];
  }
  Array y = filled(size, 0.0);
  for (int64_t i = 0; i < count(size); ++i) {
    Dims index = unravel(i, size);
    for (std::size_t d = 0; d < index.size(); ++d) index[d] += begin[d];
    y.values[static_cast<std::size_t>(i)] = at(x, index);
  }
  return y;
}

inline Array concat(const std::vector<Array>& inputs, int64_t axis) {
  std::size_t a = static_cast<std::size_t>(normalize_axis(axis, inputs[0].shape.size()));
  Dims shape = inputs[0].shape;
  shape[a] = 0;
  for (const Array& t : inputs) shape[a] += t.shape[a];
  Array y = filled(shape, 0.0);
  for (int64_t i = 0; i < count(shape); ++i) {
    Dims index = unravel(i, shape);
    std::size_t part = 0;
    while (index[a] >= inputs[part].shape[a]) index[a] -= inputs[part++].shape[a];
    y.values[static_cast<std::size_t>(i)] = at(inputs[part], index);
  }
  return y;
}

// Output dimension i is input dimension perm[i].
inline Array transpose(const Array& x, const Dims& perm) {
  std::size_t rank = x.shape.size();
  Dims p(rank), shape(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    p[i] = normalize_axis(perm[i], rank);
    shape[i] = x.shape[static_cast<std::size_t>(p[i])];
  }
  Array y = filled(shape, 0.0);
  for (int64_t i = 0; i < count(shape); ++i) {
    Dims out_index = unravel(i, shape);
    Dims in_index(rank);
    for (std::size_t d = 0; d < rank; ++d) in_index[static_cast<std::size_t>(p[d])] = out_index[d];
    y.values[static_cast<std::size_t>(i)] = at(x, in_index);
  }
  return y;
}

inline Array pad(const Array& x, const std::vector<std::pair<int64_t, int64_t>>& paddings,
                 double value) {
  Dims shape = x.shape;
  for (std::size_t i = 0; i < shape.size(); ++i) shape[i] += paddings[i].first + paddings[i].second;
  Array y = filled(shape, value);
  for (int64_t i = 0; i < count(x.shape); ++i) {
    Dims index = unravel(i, x.shape);
    for (std::size_t d = 0; d < index.size(); ++d) index[d] += paddings[d].first;
    y.values[static_cast<std::size_t>(ravel(index, shape))] = x.values[static_cast<std::size_t>(i)];
  }
  return y;
}

// params[:axis] + indices.shape + params[axis + 1:].
inline Array gather(const Array& params, const Array& indices, int64_t axis) {
  std::size_t a = static_cast<std::size_t>(normalize_axis(axis, params.shape.size()));
  Dims shape(params.shape.begin(), params.shape.begin() + static_cast<int64_t>(a));
  shape.insert(shape.end(), indices.shape.begin(), indices.shape.end());
  shape.insert(shape.end(), params.shape.begin() + static_cast<int64_t>(a) + 1, params.shape.end());
  std::size_t ir = indices.shape.size();
  Array y = filled(shape, 0.0);
  for (int64_t i = 0; i < count(shape); ++i) {
    Dims out_index = unravel(i, shape);
    Dims index_index(out_index.begin() + static_cast<int64_t>(a),
                     out_index.begin() + static_cast<int64_t>(a + ir));
    Dims params_index(out_index.begin(), out_index.begin() + static_cast<int64_t>(a));
    params_index.push_back(static_cast<int64_t>(at(indices, index_index)));
    params_index.insert(params_index.end(), out_index.begin() + static_cast<int64_t>(a + ir),
                        out_index.end());
    y.values[static_cast<std::size_t>(i)] = at(params, params_index);
  }
  return y;
}

// Zeros of `output_shape` with each update added at its index along `axis` (the gradient of
// gather): updates have shape output[:axis] + indices.shape + output[axis + 1:].
inline Array scatter_add(const Array& updates, const Array& indices, int64_t axis,
                         const Dims& output_shape) {
  std::size_t a = static_cast<std::size_t>(normalize_axis(axis, output_shape.size()));
  std::size_t ir = indices.shape.size();
  Array y = filled(output_shape, 0.0);
  for (int64_t i = 0; i < count(updates.shape); ++i) {
    Dims u = unravel(i, updates.shape);
    Dims index_index(u.begin() + static_cast<int64_t>(a), u.begin() + static_cast<int64_t>(a + ir));
    Dims out_index(u.begin(), u.begin() + static_cast<int64_t>(a));
    out_index.push_back(static_cast<int64_t>(at(indices, index_index)));
    out_index.insert(out_index.end(), u.begin() + static_cast<int64_t>(a + ir), u.end());
    y.values[static_cast<std::size_t>(ravel(out_index, output_shape))] +=
        updates.values[static_cast<std::size_t>(i)];
  }
  return y;
}

// indices.shape + [depth]; an index outside [0, depth) gives a row of off values.
inline Array one_hot(const Array& indices, int64_t depth, double on, double off) {
  Dims shape = indices.shape;
  shape.push_back(depth);
  Array y = filled(shape, off);
  for (std::size_t i = 0; i < indices.values.size(); ++i) {
    auto index = static_cast<int64_t>(indices.values[i]);
    if (index >= 0 && index < depth) {
      y.values[i * static_cast<std::size_t>(depth) + static_cast<std::size_t>(index)] = on;
    }
  }
  return y;
}

// The k largest along the last axis, descending; equal values keep their order (lower index
// first). Returns {values, indices}.
inline std::pair<Array, Array> top_k(const Array& x, int64_t k) {
  int64_t n = x.shape.back();
  Dims shape = x.shape;
  shape.back() = k;
  Array values = filled(shape, 0.0), indices = filled(shape, 0.0);
  int64_t rows = n == 0 ? 0 : count(x.shape) / n;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int64_t> order(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = i;
    const double* row = x.values.data() + r * n;
    std::stable_sort(order.begin(), order.end(),
                     [row](int64_t p, int64_t q) { return row[p] > row[q]; });
    for (int64_t j = 0; j < k; ++j) {
      values.values[static_cast<std::size_t>(r * k + j)] = row[order[static_cast<std::size_t>(j)]];
      indices.values[static_cast<std::size_t>(r * k + j)] =
          static_cast<double>(order[static_cast<std::size_t>(j)]);
    }
  }
  return {values, indices};
}

// x / sqrt(max(sum(x^2 along axis), epsilon)).
inline Array l2_normalize(const Array& x, int64_t axis, double epsilon) {
  Array sum_sq = reduce(map(x, [](double v) { return v * v; }), {axis}, true, Reduction::kSum);
  return binary(x, sum_sq,
                [epsilon](double v, double s) { return v / std::sqrt(std::max(s, epsilon)); });
}

// max(x, 0) - x z + log(1 + exp(-|x|)).
inline Array sigmoid_cross_entropy(const Array& labels, const Array& logits) {
  return binary(labels, logits, [](double z, double x) {
    return std::max(x, 0.0) - x * z + std::log1p(std::exp(-std::abs(x)));
  });
}

// ---- Optimizer updates (op.h), in place ----

inline void gradient_descent(Array& var, const Array& grad, double learning_rate) {
  for (std::size_t i = 0; i < var.values.size(); ++i)
    var.values[i] -= learning_rate * grad.values[i];
}

inline void momentum(Array& var, Array& accum, const Array& grad, double learning_rate,
                     double momentum, bool use_nesterov) {
  for (std::size_t i = 0; i < var.values.size(); ++i) {
    accum.values[i] = momentum * accum.values[i] + grad.values[i];
    double step = use_nesterov ? grad.values[i] + momentum * accum.values[i] : accum.values[i];
    var.values[i] -= learning_rate * step;
  }
}

inline void adam(Array& var, Array& m, Array& v, const Array& grad, double learning_rate,
                 double beta1, double beta2, double epsilon, int64_t step) {
  double t = static_cast<double>(step);
  double scale = learning_rate * std::sqrt(1.0 - std::pow(beta2, t)) / (1.0 - std::pow(beta1, t));
  for (std::size_t i = 0; i < var.values.size(); ++i) {
    double g = grad.values[i];
    m.values[i] += (g - m.values[i]) * (1.0 - beta1);
    v.values[i] += (g * g - v.values[i]) * (1.0 - beta2);
    var.values[i] -= scale * m.values[i] / (std::sqrt(v.values[i]) + epsilon);
  }
}

}  // namespace trainyard::reference

#endif  // TRAINYARD_TESTS_UNIT_REFERENCE_OPS_H_
