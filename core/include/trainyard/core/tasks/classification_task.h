// The image classification task (the walkthrough's classifier trained with tf.estimator, TF-Slim's
// train_image_classifier.py and eval_image_classifier.py): images and one-hot labels moved to the
// device as they are, the run's pipeline.config recorded in and checked against train_dir,
// accuracy on logged training batches, accuracy / top-5 accuracy / loss per evaluation, and
// the "ImageId,LabelConfidencePairs" predictions CSV.
#ifndef TRAINYARD_CORE_TASKS_CLASSIFICATION_TASK_H_
#define TRAINYARD_CORE_TASKS_CLASSIFICATION_TASK_H_

#include <cstdint>
#include <span>
#include <string>

#include "trainyard/core/task.h"
#include "trainyard/export.h"

namespace trainyard {

TRAINYARD_API const Task& classification_task();

// The reader class of the task's TF-Slim layout.
inline constexpr const char* kImageClassificationReader = "ImageClassificationReader";

// train_dir/pipeline.config: the config of the run that created train_dir, written by the first
// run; a later run must keep its model, the model's options, num_classes and task, or gets a
// ConfigError naming the file and both. The record of the tasks whose runs are described by
// their pipeline config alone (classification, detection).
TRAINYARD_API void check_or_record_pipeline_config(const config::Pipeline& pipeline,
                                                   const std::string& train_dir);

// Counts over a batch of `rows` examples, the label of a row being the index of its largest
// entry (the first on ties): top1, rows whose label is the argmax of the predictions (the first
// on ties, as tf.metrics.accuracy over tf.argmax); topk, rows whose label has a finite
// prediction with fewer than k classes scoring strictly higher (tf.nn.in_top_k, which counts
// ties at the boundary in, as slim's Recall_5 does).
struct TopKCounts {
  int64_t top1 = 0;
  int64_t topk = 0;
};
TRAINYARD_API TopKCounts count_correct(std::span<const float> predictions,
                                       std::span<const float> labels, int64_t rows,
                                       int64_t num_classes, int64_t k);

}  // namespace trainyard

#endif  // TRAINYARD_CORE_TASKS_CLASSIFICATION_TASK_H_
