/* libtrainyard_infer from C (this file is compiled as C99) on the exports infer_exports.sh made:
 * the function table and its version check, the inputs and outputs a session reports, a batch
 * that gives what its examples give one at a time, several threads running one session that
 * give the single-thread results, and statuses whose messages name what is wrong.
 *
 * usage: infer_c_test WORKDIR   (infer_exports.sh's) */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainyard/infer.h"

static const TyInferApi* api;
static int failures = 0;

#define CHECK(cond)                                                      \
  do {                                                                   \
    if (!(cond)) {                                                       \
      fprintf(stderr, "%s:%d: FAILED: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                        \
    }                                                                    \
  } while (0)

/* Succeeds, or reports the status's message and exits. */
static void ok(TyInferStatus* status, const char* what) {
  if (status == NULL) return;
  fprintf(stderr, "FAILED: %s: %s\n", what, api->GetStatusMessage(status));
  api->ReleaseStatus(status);
  exit(1);
}

/* The status has `code` and its message contains `text`; releases it. */
static void expect_error(TyInferStatus* status, TyInferStatusCode code, const char* text,
                         const char* what) {
  if (status == NULL) {
    fprintf(stderr, "FAILED: %s succeeded; expected an error naming '%s'\n", what, text);
    ++failures;
    return;
  }
  if (api->GetStatusCode(status) != code || strstr(api->GetStatusMessage(status), text) == NULL) {
    fprintf(stderr, "FAILED: %s: code %d, message '%s'; expected code %d naming '%s'\n", what,
            (int)api->GetStatusCode(status), api->GetStatusMessage(status), (int)code, text);
    ++failures;
  } else {
    printf("ok: %s: %s\n", what, api->GetStatusMessage(status));
  }
  api->ReleaseStatus(status);
}

enum { kDim = 32, kClasses = 10, kExamples = 6, kThreads = 4, kRounds = 20 };
static float inputs[kExamples][kDim];
static float single[kExamples][kClasses];
static TyInferSession* session;

static TyInferStatus* run_one(const float* x, int64_t batch, float* out) {
  int64_t shape[2];
  TyInferInput in;
  TyInferOutput output;
  shape[0] = batch;
  shape[1] = kDim;
  in.name = "features";
  in.dtype = TY_INFER_FLOAT32;
  in.shape = shape;
  in.rank = 2;
  in.data = x;
  in.bytes = (size_t)batch * kDim * sizeof(float);
  output.name = "predictions";
  output.data = out;
  output.bytes = (size_t)batch * kClasses * sizeof(float);
  return api->Run(session, &in, 1, &output, 1);
}

static void* worker(void* arg) {
  const int t = (int)(size_t)arg;
  int round, c, mismatches = 0;
  for (round = 0; round < kRounds; ++round) {
    const int e = (t + round) % kExamples;
    float out[kClasses];
    TyInferStatus* status = run_one(inputs[e], 1, out);
    if (status != NULL) {
      fprintf(stderr, "thread %d: %s\n", t, api->GetStatusMessage(status));
      api->ReleaseStatus(status);
      return (void*)1;
    }
    for (c = 0; c < kClasses; ++c) {
      if (fabsf(out[c] - single[e][c]) > 1e-6f) ++mismatches;
    }
  }
  return mismatches ? (void*)1 : NULL;
}

int main(int argc, char** argv) {
  char path[4096];
  size_t count = 0, i;
  int e, c, t;
  TyInferTensorInfo info;
  TyInferStatus* status;
  float batched[kExamples * kClasses];
  pthread_t threads[kThreads];

  if (argc != 2) {
    fprintf(stderr, "usage: infer_c_test WORKDIR\n");
    return 2;
  }
  /* The table and its version. */
  CHECK(TyInferGetApi(TY_INFER_API_VERSION + 1000u) == NULL);
  status = TyInferCheckApiVersion(TY_INFER_API_VERSION + 1000u);
  CHECK(status != NULL && TyInferGetStatusCode(status) == TY_INFER_INVALID_ARGUMENT &&
        strstr(TyInferGetStatusMessage(status), "API version 1001") != NULL);
  if (status) printf("ok: unknown version: %s\n", TyInferGetStatusMessage(status));
  TyInferReleaseStatus(status);
  CHECK(TyInferCheckApiVersion(TY_INFER_API_VERSION) == NULL);
  api = TyInferGetApi(TY_INFER_API_VERSION);
  CHECK(api != NULL);
  if (api == NULL) return 1;
  CHECK(api->version == TY_INFER_API_VERSION && api->struct_size == sizeof(TyInferApi));

  /* A bad path. */
  snprintf(path, sizeof path, "%s/no_such_export", argv[1]);
  session = (TyInferSession*)&path; /* must be set to NULL on failure */
  expect_error(api->CreateSession(path, NULL, &session), TY_INFER_NOT_FOUND, path,
               "CreateSession of a missing directory");
  CHECK(session == NULL);
  snprintf(path, sizeof path, "%s/images", argv[1]);
  expect_error(api->CreateSession(path, NULL, &session), TY_INFER_NOT_FOUND, "pipeline.config",
               "CreateSession of a directory that is no export");

  /* The video-level export: what it reports. */
  snprintf(path, sizeof path, "%s/logistic_export", argv[1]);
  ok(api->CreateSession(path, NULL, &session), "CreateSession");
  ok(api->SessionGetInputCount(session, &count), "SessionGetInputCount");
  CHECK(count == 2); /* features and num_frames */
  for (i = 0; i < count; ++i) {
    ok(api->SessionGetInputInfo(session, i, &info), "SessionGetInputInfo");
    if (strcmp(info.name, "features") == 0) {
      CHECK(info.dtype == TY_INFER_FLOAT32 && info.rank == 2 && info.shape[0] == -1 &&
            info.shape[1] == kDim);
    } else {
      CHECK(strcmp(info.name, "num_frames") == 0 && info.dtype == TY_INFER_INT32 &&
            info.rank == 1 && info.shape[0] == -1);
    }
  }
  expect_error(api->SessionGetInputInfo(session, 7, &info), TY_INFER_INVALID_ARGUMENT,
               "input index 7", "SessionGetInputInfo out of range");
  ok(api->SessionGetOutputCount(session, &count), "SessionGetOutputCount");
  CHECK(count == 1);
  ok(api->SessionGetOutputInfo(session, 0, &info), "SessionGetOutputInfo");
  CHECK(strcmp(info.name, "predictions") == 0 && info.dtype == TY_INFER_FLOAT32 && info.rank == 2 &&
        info.shape[0] == -1 && info.shape[1] == kClasses);
  {
    size_t bytes = 0;
    ok(api->TensorByteSize(&info, 3, &bytes), "TensorByteSize");
    CHECK(bytes == 3 * kClasses * sizeof(float));
  }

  /* A batch gives what its examples give alone. */
  for (e = 0; e < kExamples; ++e) {
    for (i = 0; i < kDim; ++i) inputs[e][i] = (float)sin(0.1 * (double)(e * kDim + (int)i));
  }
  for (e = 0; e < kExamples; ++e) ok(run_one(inputs[e], 1, single[e]), "Run of one example");
  ok(run_one(&inputs[0][0], kExamples, batched), "Run of a batch");
  for (e = 0; e < kExamples; ++e) {
    for (c = 0; c < kClasses; ++c) {
      CHECK(fabsf(batched[e * kClasses + c] - single[e][c]) <= 1e-6f);
      CHECK(single[e][c] > 0.0f && single[e][c] < 1.0f); /* sigmoid probabilities */
    }
  }

  /* Several threads, one session. */
  for (t = 0; t < kThreads; ++t) {
    CHECK(pthread_create(&threads[t], NULL, worker, (void*)(size_t)t) == 0);
  }
  for (t = 0; t < kThreads; ++t) {
    void* result = NULL;
    pthread_join(threads[t], &result);
    CHECK(result == NULL);
  }

  /* Wrong input name, shape, dtype, byte count; a wrong output buffer. */
  {
    int64_t shape[2] = {1, kDim};
    int64_t bad_shape[2] = {1, kDim + 1};
    float out[kClasses];
    TyInferInput in = {"mean_rgb", TY_INFER_FLOAT32, NULL, 2, NULL, kDim * sizeof(float)};
    TyInferOutput output = {"predictions", NULL, sizeof out};
    in.shape = shape;
    in.data = inputs[0];
    output.data = out;
    expect_error(api->Run(session, &in, 1, &output, 1), TY_INFER_INVALID_ARGUMENT,
                 "no input named 'mean_rgb'", "Run with a wrong input name");
    in.name = "features";
    in.shape = bad_shape;
    expect_error(api->Run(session, &in, 1, &output, 1), TY_INFER_INVALID_ARGUMENT,
                 "'features' has shape [1, 33]; expected [-1, 32]", "Run with a wrong shape");
    in.shape = shape;
    in.dtype = TY_INFER_INT32;
    expect_error(api->Run(session, &in, 1, &output, 1), TY_INFER_INVALID_ARGUMENT,
                 "'features' is i32; expected f32", "Run with a wrong dtype");
    in.dtype = TY_INFER_FLOAT32;
    in.bytes = 4;
    expect_error(api->Run(session, &in, 1, &output, 1), TY_INFER_INVALID_ARGUMENT,
                 "needs 128 bytes", "Run with a wrong byte count");
    in.bytes = kDim * sizeof(float);
    output.bytes = 4;
    expect_error(api->Run(session, &in, 1, &output, 1), TY_INFER_INVALID_ARGUMENT,
                 "output 'predictions' for a batch of 1 needs a buffer of 40 bytes",
                 "Run with a short output buffer");
    output.bytes = sizeof out;
    output.name = "logits";
    expect_error(api->Run(session, &in, 1, &output, 1), TY_INFER_INVALID_ARGUMENT,
                 "no output named 'logits'", "Run with a wrong output name");
    output.name = "predictions";
    expect_error(api->Run(session, NULL, 0, &output, 1), TY_INFER_INVALID_ARGUMENT,
                 "input 'features'", "Run without inputs");
  }
  api->ReleaseSession(session);

  /* The image classifier reports its image input. */
  snprintf(path, sizeof path, "%s/lenet_export", argv[1]);
  {
    TyInferSessionOptions* options = NULL;
    const char* model = NULL;
    ok(api->CreateSessionOptions(&options), "CreateSessionOptions");
    ok(api->SessionOptionsUseEnvironment(options, 0), "SessionOptionsUseEnvironment");
    ok(api->CreateSession(path, options, &session), "CreateSession lenet");
    api->ReleaseSessionOptions(options);
    ok(api->SessionGetModelClass(session, &model), "SessionGetModelClass");
    CHECK(strcmp(model, "lenet") == 0);
    ok(api->SessionGetInputInfo(session, 0, &info), "SessionGetInputInfo lenet");
    CHECK(strcmp(info.name, "image") == 0 && info.rank == 4 && info.shape[0] == -1 &&
          info.shape[1] == 28 && info.shape[2] == 28 && info.shape[3] == 3);
    api->ReleaseSession(session);
  }
  api->ReleaseSession(NULL);
  TyInferReleaseStatus(NULL);

  if (failures != 0) {
    fprintf(stderr, "FAILED: %d checks\n", failures);
    return 1;
  }
  printf("PASS\n");
  return 0;
}
