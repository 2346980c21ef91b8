// Models that map a batch of inputs to predictions: the YouTube-8M video- and frame-level
// models and image classifiers.
//
// The trainer owns the loop; a model fills in forward(). It creates its variables through the
// ModelContext on the first call (later calls return the same variables), composes ops on
// tensors, and returns its predictions and, optionally, its own loss and regularization loss,
// as the YouTube-8M models do. Gradients come from the tape the core records while the ops
// run, so a model never writes a backward pass.
//
// Training and inference: the trainer calls forward() with Mode::kTrain in the train step,
// Mode::kEval in evaluation and Mode::kPredict in predict and export. What TF-Slim models take
// as `is_training` is is_training(mode) below; the slim-style layers of pkg/layers
// (trainyard/pkg/layers/) derive it from the mode of their VariableScope. With is_training
// false, batch norm normalizes with its moving statistics and dropout is the identity.
//
// Update ops: state that is not trained but updated (batch norm's moving mean and variance,
// TF-Slim's UPDATE_OPS) is updated by the model itself inside forward() in Mode::kTrain, under
// a NoGradScope (ops::assign_moving_average on a non-trainable variable), so the update is
// recorded on no tape. It runs in the forward pass of the step, that is before the gradient
// step, where create_train_op's update-ops barrier puts it; such variables are checkpointed
// with the others. A model must not update them in kEval or kPredict: evaluation and export
// leave every variable as it was. There is no separate update-ops list to return.
#ifndef TRAINYARD_MODEL_H_
#define TRAINYARD_MODEL_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "trainyard/export.h"
#include "trainyard/plugin.h"
#include "trainyard/tensor.h"
#include "trainyard/variable.h"

namespace trainyard {

enum class Mode { kTrain, kEval, kPredict };
TRAINYARD_API const char* mode_name(Mode mode);
// TF-Slim's is_training: true in kTrain only.
inline bool is_training(Mode mode) { return mode == Mode::kTrain; }

// One batch as the input pipeline delivers it, already on the model's device.
struct Batch {
  std::map<std::string, Tensor> features;  // "features" [B, D] or [B, T, D]; others by name
  Tensor labels;                           // [B, num_classes], absent in kPredict
  Tensor num_frames;                       // [B] for frame-level input
  std::vector<std::string> ids;            // video ids, image keys
};

struct ModelOutput {
  Tensor predictions;                         // required: probabilities [B, num_classes]
  std::optional<Tensor> loss;                 // when the model computes its own label loss
  std::optional<Tensor> regularization_loss;  // added with regularization_penalty
};

// What the trainer gives a model while it runs. Implemented by the core.
class TRAINYARD_API ModelContext {
 public:
  virtual ~ModelContext();
  virtual Backend& backend() = 0;
  virtual int64_t num_classes() const = 0;
  // Returns the variable named spec.name, creating and initializing it on first use. Throws
  // InvalidArgument naming the variable and both shapes when an existing one differs.
  virtual Variable& variable(const VariableSpec& spec) = 0;
  // A seed for this model's own randomness (dropout, frame sampling): the same for every call
  // within one step, different across steps.
  virtual uint64_t seed() const = 0;
};

class TRAINYARD_API BaseModel : public PluginObject {
 public:
  ~BaseModel() override;
  virtual ModelOutput forward(ModelContext& ctx, const Batch& batch, Mode mode) = 0;
};

}  // namespace trainyard

#endif  // TRAINYARD_MODEL_H_
