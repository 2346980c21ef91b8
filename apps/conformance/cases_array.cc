// Op cases of the array family (op_cases.h; the ops are declared in core/src/engine/ops/array.cc):
// data movement: concat, slice, transpose, pad, gather, scatter_add, one_hot, top_k, cast, copy.
#include <string>
#include <vector>

#include "op_cases.h"
#include "trainyard/ops.h"

namespace trainyard::conformance {

void add_array_cases(std::vector<OpCase>& c) {
  using namespace ops;
  // Data movement.
  c.push_back({"concat",
               "concat_axis1",
               {f32(Shape{2, 3}), f32(Shape{2, 2})},
               [](Backend&, const Inputs& x) { return Outputs{concat(x, 1)}; },
               kExact,
               true});
  c.push_back({"concat",
               "concat_axis0_i32",
               {ints(Shape{1, 3}, -9, 9, DType::kI32), ints(Shape{2, 3}, -9, 9, DType::kI32),
                ints(Shape{1, 3}, -9, 9, DType::kI32)},
               [](Backend&, const Inputs& x) { return Outputs{concat(x, 0)}; },
               kExact});
  c.push_back({"slice",
               "slice",
               {f32(Shape{3, 4, 2})},
               [](Backend&, const Inputs& x) {
                 return Outputs{slice(x[0], {1, 1, 0}, {2, -1, 1})};
               },
               kExact,
               true});
  c.push_back({"transpose",
               "transpose_rank3",
               {f32(Shape{2, 3, 4})},
               [](Backend&, const Inputs& x) {
                 return Outputs{transpose(x[0], {2, 0, 1})};
               },
               kExact,
               true});
  c.push_back({"transpose",
               "transpose_u8",
               {of(DType::kU8, Shape{3, 5}, 0, 255)},
               [](Backend&, const Inputs& x) {
                 return Outputs{transpose(x[0], {1, 0})};
               },
               kExact});
  c.push_back({"pad",
               "pad",
               {f32(Shape{2, 3})},
               [](Backend&, const Inputs& x) {
                 return Outputs{pad(x[0], {{1, 0}, {0, 2}}, 0.5)};
               },
               kExact,
               true});
  c.push_back({"gather",
               "gather_axis0_i64",
               {f32(Shape{4, 3}), fixed(Shape{2, 2}, DType::kI64, {3, 0, 3, 1})},
               [](Backend&, const Inputs& x) { return Outputs{gather(x[0], x[1], 0)}; },
               kExact,
               true});
  c.push_back({"gather",
               "gather_axis1_i32",
               {f32(Shape{2, 5}), fixed(Shape{3}, DType::kI32, {4, 4, 0})},
               [](Backend&, const Inputs& x) { return Outputs{gather(x[0], x[1], 1)}; },
               kExact,
               true});
  c.push_back({"scatter_add",
               "scatter_add",
               {f32(Shape{2, 4}), fixed(Shape{4}, DType::kI64, {1, 0, 1, 2})},
               [](Backend&, const Inputs& x) {
                 return Outputs{scatter_add(x[0], x[1], 1, Shape{2, 3})};
               },
               kElementwise,
               true});
  c.push_back({"one_hot",
               "one_hot",
               {fixed(Shape{2, 2}, DType::kI64, {0, 3, 4, 1})},
               [](Backend&, const Inputs& x) { return Outputs{one_hot(x[0], 5, 2.0, -1.0)}; },
               kExact});
  c.push_back({"top_k",
               "top_k",
               {f32(Shape{3, 9})},
               [](Backend&, const Inputs& x) {
                 auto [values, indices] = top_k(x[0], 4);
                 return Outputs{values, indices};
               },
               kExact});
  c.push_back({"top_k",
               "top_k_ties",
               {ints(Shape{2, 8}, 0, 2)},
               [](Backend&, const Inputs& x) {
                 auto [values, indices] = top_k(x[0], 5);
                 return Outputs{values, indices};
               },
               kExact});
  for (auto [from, to, name] : {std::tuple{DType::kF32, DType::kI32, "cast_f32_i32"},
                                std::tuple{DType::kF32, DType::kF64, "cast_f32_f64"},
                                std::tuple{DType::kI32, DType::kF32, "cast_i32_f32"},
                                std::tuple{DType::kF32, DType::kBool, "cast_f32_bool"},
                                std::tuple{DType::kF32, DType::kI64, "cast_f32_i64"},
                                std::tuple{DType::kU8, DType::kF32, "cast_u8_f32"}}) {
    DType target = to;
    InputSpec in = from == DType::kF32 ? f32(Shape{3, 5}, -5, 5) : of(from, Shape{3, 5}, 0, 200);
    if (to == DType::kBool) in = ints(Shape{3, 5}, -1, 1);
    c.push_back({"cast",
                 name,
                 {in},
                 [target](Backend&, const Inputs& x) { return Outputs{cast(x[0], target)}; },
                 kExact});
  }
  c.push_back({"copy",
               "copy",
               {f32(Shape{5, 3})},
               [](Backend&, const Inputs& x) { return Outputs{copy(x[0])}; },
               kExact,
               true});
}

}  // namespace trainyard::conformance
