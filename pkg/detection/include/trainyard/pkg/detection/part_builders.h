// The smaller parts of a detector built by the choice of their config oneof, as the Object
// Detection API's builders do (anchor_generator_builder.py, box_coder_builder.py,
// matcher_builder.py, region_similarity_calculator_builder.py, losses_builder.py,
// post_processing_builder.py's score converters): one registry per family, holding
// pkg/detection's own parts from the tables below, to which a plugin adds its own.
//
// A builder reads the fields of its message from the model's flattened options at `prefix`
// ("box_coder.faster_rcnn_box_coder") and throws InvalidArgument naming the field of a bad
// value. build_part() reads the choice at a oneof's path ("box_coder"), finds its builder and
// calls it; an unknown choice is refused naming the field and listing the registered names.
#ifndef TRAINYARD_PKG_DETECTION_PART_BUILDERS_H_
#define TRAINYARD_PKG_DETECTION_PART_BUILDERS_H_

#include <functional>
#include <memory>
#include <string>

#include "trainyard/pkg/detection/anchor_generator.h"
#include "trainyard/pkg/detection/box_coder.h"
#include "trainyard/pkg/detection/losses.h"
#include "trainyard/pkg/detection/matcher.h"
#include "trainyard/pkg/detection/model_options.h"
#include "trainyard/pkg/detection/part_registry.h"
#include "trainyard/pkg/detection/region_similarity_calculator.h"
#include "trainyard/tensor.h"

// pkg/detection's parts of each family, X(config name, builder): the registries start with
// these, and a model's option help lists them with TRAINYARD_OD_PART_NAMES.
#define TRAINYARD_OD_ANCHOR_GENERATORS(X)             \
  X(ssd_anchor_generator, build_ssd_anchor_generator) \
  X(multiscale_anchor_generator, build_multiscale_anchor_generator)
#define TRAINYARD_OD_BOX_CODERS(X)                      \
  X(faster_rcnn_box_coder, build_faster_rcnn_box_coder) \
  X(mean_stddev_box_coder, build_mean_stddev_box_coder)
#define TRAINYARD_OD_MATCHERS(X)          \
  X(argmax_matcher, build_argmax_matcher) \
  X(bipartite_matcher, build_bipartite_matcher)
#define TRAINYARD_OD_SIMILARITY_CALCULATORS(X) \
  X(iou_similarity, build_iou_similarity)      \
  X(ioa_similarity, build_ioa_similarity)      \
  X(neg_sq_dist_similarity, build_neg_sq_dist_similarity)
#define TRAINYARD_OD_LOCALIZATION_LOSSES(X)       \
  X(weighted_smooth_l1, build_weighted_smooth_l1) \
  X(weighted_l2, build_weighted_l2)               \
  X(weighted_iou, build_weighted_iou)
#define TRAINYARD_OD_CLASSIFICATION_LOSSES(X)             \
  X(weighted_sigmoid, build_weighted_sigmoid)             \
  X(weighted_softmax, build_weighted_softmax)             \
  X(weighted_sigmoid_focal, build_weighted_sigmoid_focal) \
  X(bootstrapped_sigmoid, build_bootstrapped_sigmoid)

// post_processing.score_converter's values (an enum, not a oneof: no fields to read).
#define TRAINYARD_OD_SCORE_CONVERTERS(X) \
  X(IDENTITY, identity_scores)           \
  X(SIGMOID, sigmoid_scores)             \
  X(SOFTMAX, softmax_scores)

// "registered: a b c" for an option's help, from a table of the form above.
#define TRAINYARD_OD_PART_NAME(name, ...) " " #name
#define TRAINYARD_OD_PART_NAMES(TABLE) "registered:" TABLE(TRAINYARD_OD_PART_NAME)

namespace trainyard::detection {

template <class Part>
using PartBuilder =
    std::function<std::shared_ptr<const Part>(const DetectionOptionReader&, const std::string&)>;

PartRegistry<PartBuilder<AnchorGenerator>>& anchor_generators();
PartRegistry<PartBuilder<BoxCoder>>& box_coders();
PartRegistry<PartBuilder<Matcher>>& matchers();
PartRegistry<PartBuilder<RegionSimilarityCalculator>>& region_similarity_calculators();
PartRegistry<PartBuilder<LocalizationLoss>>& localization_losses();
PartRegistry<PartBuilder<ClassificationLoss>>& classification_losses();

// A score converter: class logits [..., num_classes + 1], already divided by logit_scale, to
// scores, as ops on their backend.
using ScoreConverterFn = std::function<Tensor(const Tensor& scaled_logits)>;
PartRegistry<ScoreConverterFn>& score_converters();

// The part the oneof at `field` chooses: registry.find(model, field, choice) called with the
// prefix "<field>.<choice>".
template <class Part>
std::shared_ptr<const Part> build_part(const PartRegistry<PartBuilder<Part>>& registry,
                                       const DetectionOptionReader& r, const std::string& field) {
  const std::string& choice = r.options().get_string(field);
  return registry.find(r.model(), field, choice)(r, field + "." + choice);
}

}  // namespace trainyard::detection

#endif  // TRAINYARD_PKG_DETECTION_PART_BUILDERS_H_
