/* libtrainyard_infer: the C inference library (pure C, C99 and C++).
 *
 * Loads a Trainyard export (`trainyard export --export_dir D`: checkpoint, pipeline.config, the
 * task's files; or a SavedModel Trainyard wrote, `--format saved_model`, rebuilt from the
 * pipeline in its assets.extra) with the plugins the host finds, reports its inputs and outputs
 * and runs the model on caller tensors, as `trainyard predict` runs it
 * (docs/inference_library.md).
 *
 * The style is ONNX Runtime's C API:
 *  - Every function but the status accessors is reached through a versioned table:
 *    `const TyInferApi* api = TyInferGetApi(TY_INFER_API_VERSION);` (NULL for a version this
 *    library does not provide; TyInferCheckApiVersion says why in a status).
 *  - A function that can fail returns a TyInferStatus*: NULL on success, else an object holding
 *    a code and a message naming what failed, which the caller releases with
 *    TyInferReleaseStatus. No C++ exception crosses this boundary.
 *  - Sessions, session options and statuses are opaque; each Create has its Release (NULL is
 *    accepted and ignored).
 *  - Buffers are the caller's: Run reads the inputs and writes each output into the caller's
 *    buffer, whose size the caller computes from the output's info with its batch size in place
 *    of the -1 (TyInferTensorByteSize). Nothing the library returns needs freeing but statuses.
 *  - Strings and shapes in a TyInferTensorInfo belong to the session and stay valid while it
 *    lives.
 *
 * Thread safety: a session may run on several threads at once (each Run is its own forward);
 * creating and releasing a session must not race with its use.
 *
 * Supported: models of kind `model` (image classifiers, YouTube-8M video- and frame-level
 * models) and detection models (SSD, Faster R-CNN), which take the Object Detection API's
 * `image_tensor` (uint8 [N, H, W, 3]) and give its `detection_boxes`, `detection_scores`,
 * `detection_classes` (1-based) and `num_detections` (docs/inference_library.md). Besides
 * tensors, every model runs on uint8 images (RunImages: the eval reader's preprocessing is
 * applied) and on serialized tf.Examples (RunExamples: the reader's parse, then the same).
 *
 * Compatibility: functions are only ever added at the end of the table, keeping its version;
 * a caller that needs a later function checks that struct_size covers it (TY_INFER_HAS).
 */
#ifndef TRAINYARD_INFER_H_
#define TRAINYARD_INFER_H_

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define TY_INFER_EXPORT
#else
#define TY_INFER_EXPORT __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The version of the function table this header describes. */
#define TY_INFER_API_VERSION 1u

typedef enum TyInferStatusCode {
  TY_INFER_OK = 0,
  TY_INFER_INVALID_ARGUMENT = 1, /* a wrong name, dtype, shape, size or null pointer */
  TY_INFER_NOT_FOUND = 2,        /* a missing export directory, file, checkpoint or variable */
  TY_INFER_CONFIG_ERROR = 3,     /* pipeline.config names a class or option the plugins refuse */
  TY_INFER_DATA_LOSS = 4,        /* a damaged checkpoint or config */
  TY_INFER_UNIMPLEMENTED =
      5, /* something this version does not do (a dtype without a TyInferDType) */
  TY_INFER_PLUGIN_ERROR = 6, /* a plugin library that cannot be used */
  TY_INFER_FAILED = 7        /* anything else (out of memory, an unexpected error) */
} TyInferStatusCode;

typedef enum TyInferDType {
  TY_INFER_FLOAT32 = 1,
  TY_INFER_INT32 = 2,
  TY_INFER_INT64 = 3,
  TY_INFER_UINT8 = 4
} TyInferDType;

typedef struct TyInferStatus TyInferStatus;
typedef struct TyInferSession TyInferSession;
typedef struct TyInferSessionOptions TyInferSessionOptions;

/* An input or output as the session declares it: shape[0] is -1, the batch size. */
typedef struct TyInferTensorInfo {
  const char* name;
  TyInferDType dtype;
  const int64_t* shape;
  size_t rank;
} TyInferTensorInfo;

/* A caller tensor given to Run: `bytes` bytes at `data`, row-major, of `dtype` in `shape`. */
typedef struct TyInferInput {
  const char* name;
  TyInferDType dtype;
  const int64_t* shape;
  size_t rank;
  const void* data;
  size_t bytes;
} TyInferInput;

/* Where Run writes an output: exactly the output's size for the run's batch size. */
typedef struct TyInferOutput {
  const char* name;
  void* data;
  size_t bytes;
} TyInferOutput;

/* One uint8 image, height x width x channels, row-major (HWC). */
typedef struct TyInferImage {
  const uint8_t* pixels;
  int64_t height;
  int64_t width;
  int64_t channels;
} TyInferImage;

/* One serialized record: a tf.Example (a tf.SequenceExample for frame-level YouTube-8M). */
typedef struct TyInferBytes {
  const void* data;
  size_t size;
} TyInferBytes;

typedef struct TyInferApi {
  uint32_t version;     /* TY_INFER_API_VERSION of the table */
  uint32_t struct_size; /* sizeof(TyInferApi) as the library was built */

  /* Session options: where plugins are searched. By default a session searches
   * TRAINYARD_PLUGIN_PATH, then the build tree and the installed plugin directory, as the host
   * `trainyard` does. */
  TyInferStatus* (*CreateSessionOptions)(TyInferSessionOptions** out);
  void (*ReleaseSessionOptions)(TyInferSessionOptions* options);
  /* Adds `dirs` (colon-separated) before the others, as the host's --plugin_path. */
  TyInferStatus* (*SessionOptionsAddPluginPath)(TyInferSessionOptions* options, const char* dirs);
  /* Whether TRAINYARD_PLUGIN_PATH is read (1, the default) or not (0). */
  TyInferStatus* (*SessionOptionsUseEnvironment)(TyInferSessionOptions* options, int use);

  /* Loads the export in `export_dir` (Trainyard's, or a SavedModel Trainyard wrote: a directory
   * with saved_model.pb, or the Object Detection API's with saved_model/); `options` may be NULL.
   * On failure *out is NULL. */
  TyInferStatus* (*CreateSession)(const char* export_dir, const TyInferSessionOptions* options,
                                  TyInferSession** out);
  void (*ReleaseSession)(TyInferSession* session);

  TyInferStatus* (*SessionGetInputCount)(const TyInferSession* session, size_t* count);
  TyInferStatus* (*SessionGetOutputCount)(const TyInferSession* session, size_t* count);
  TyInferStatus* (*SessionGetInputInfo)(const TyInferSession* session, size_t index,
                                        TyInferTensorInfo* info);
  TyInferStatus* (*SessionGetOutputInfo)(const TyInferSession* session, size_t index,
                                         TyInferTensorInfo* info);
  /* The model's class name ("LogisticModel"), valid while the session lives. */
  TyInferStatus* (*SessionGetModelClass)(const TyInferSession* session, const char** name);

  /* Runs the model on one batch. Every input the session declares is given once, each with the
   * same batch size first ("num_frames" may be left out: each example then has all its frames).
   * Every output is given once by name with a buffer of exactly its size for that batch. */
  TyInferStatus* (*Run)(TyInferSession* session, const TyInferInput* inputs, size_t num_inputs,
                        const TyInferOutput* outputs, size_t num_outputs);

  /* The bytes of a tensor of `info` with `batch_size` in place of its -1. */
  TyInferStatus* (*TensorByteSize)(const TyInferTensorInfo* info, int64_t batch_size,
                                   size_t* bytes);

  TyInferStatusCode (*GetStatusCode)(const TyInferStatus* status);
  const char* (*GetStatusMessage)(const TyInferStatus* status);
  void (*ReleaseStatus)(TyInferStatus* status);

  /* ---- Added in libtrainyard_infer 0.2 (check with TY_INFER_HAS(api, RunImages)). ---- */

  /* Runs the model on `num_images` uint8 images, which the session preprocesses as the
   * pipeline's eval reader does after decoding (a detector's fixed_shape_resizer, a
   * classifier's image_classification_preprocessing), then as Run. The batch size of the
   * outputs is num_images. Images of differing sizes share a call when that preprocessing
   * brings them to one size or the reader pads images to the largest (pad_to_largest, as
   * keep_aspect_ratio_resizer configs do); otherwise the status says to give one per call.
   * Channels: the reader's (3 for detectors). */
  TyInferStatus* (*RunImages)(TyInferSession* session, const TyInferImage* images,
                              size_t num_images, const TyInferOutput* outputs, size_t num_outputs);
  /* Runs the model on `num_records` serialized records, parsed by the pipeline's reader and
   * preprocessed as its eval reader does: the batch `trainyard predict` makes of them. Errors
   * name the record by its index in the call and the key. */
  TyInferStatus* (*RunExamples)(TyInferSession* session, const TyInferBytes* records,
                                size_t num_records, const TyInferOutput* outputs,
                                size_t num_outputs);
  /* Decodes a JPEG or PNG file's bytes (the format from its first bytes) to RGB, as the readers
   * decode (TensorFlow's decode_jpeg/decode_png). Sets *height and *width; writes the pixels
   * (height * width * 3 bytes, HWC) when `pixels` is not NULL, and then `pixel_bytes` must be
   * exactly that. Images over 2^26 pixels are refused (TY_INFER_DATA_LOSS, as damaged data). */
  TyInferStatus* (*DecodeImage)(const void* encoded, size_t size, int64_t* height, int64_t* width,
                                uint8_t* pixels, size_t pixel_bytes);
  /* Writes `image` (1 to 4 channels) as an 8-bit PNG file at `path`. */
  TyInferStatus* (*WritePng)(const char* path, const TyInferImage* image);
} TyInferApi;

/* Whether the table `api` (from a library possibly older than this header) has `member`. */
#define TY_INFER_HAS(api, member) \
  ((api)->struct_size >= offsetof(TyInferApi, member) + sizeof((api)->member))

/* The function table of `version`, or NULL when this library does not provide it. */
TY_INFER_EXPORT const TyInferApi* TyInferGetApi(uint32_t version);
/* NULL when TyInferGetApi(version) gives a table, else a status saying which versions exist. */
TY_INFER_EXPORT TyInferStatus* TyInferCheckApiVersion(uint32_t version);
/* The status accessors, also in every table. A NULL status is TY_INFER_OK with message "". */
TY_INFER_EXPORT TyInferStatusCode TyInferGetStatusCode(const TyInferStatus* status);
TY_INFER_EXPORT const char* TyInferGetStatusMessage(const TyInferStatus* status);
TY_INFER_EXPORT void TyInferReleaseStatus(TyInferStatus* status);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TRAINYARD_INFER_H_ */
