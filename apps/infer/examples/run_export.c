/* run_export EXPORT_DIR: loads a Trainyard export with libtrainyard_infer, prints its inputs
 * and outputs, runs it on a batch of two examples whose every float is 0.5 ("num_frames" left
 * out), and prints the first example's predictions. Builds against the installed library:
 *
 *   cc -std=c99 run_export.c $(pkg-config --cflags --libs trainyard-infer) -o run_export */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <trainyard/infer.h>

static const TyInferApi* api;

/* Prints a failed call's message and exits. */
static void check(TyInferStatus* status) {
  if (status == NULL) return;
  fprintf(stderr, "error: %s\n", api->GetStatusMessage(status));
  api->ReleaseStatus(status);
  exit(1);
}

static void* allocate(size_t bytes) {
  void* memory = malloc(bytes ? bytes : 1);
  if (memory == NULL) {
    fprintf(stderr, "error: out of memory\n");
    exit(1);
  }
  return memory;
}

static void print_info(const char* kind, const TyInferTensorInfo* info) {
  size_t d;
  printf("%s %s [", kind, info->name);
  for (d = 0; d < info->rank; ++d) printf("%s%lld", d ? ", " : "", (long long)info->shape[d]);
  printf("]\n");
}

int main(int argc, char** argv) {
  enum { kBatch = 2, kMaxInputs = 8 };
  TyInferSession* session = NULL;
  TyInferTensorInfo info, output_info;
  TyInferInput inputs[kMaxInputs];
  int64_t shapes[kMaxInputs][8];
  TyInferOutput output;
  size_t count = 0, used = 0, i, d, bytes = 0, classes;
  float* values[kMaxInputs];
  float* predictions;

  if (argc != 2) {
    fprintf(stderr, "usage: run_export EXPORT_DIR\n");
    return 2;
  }
  api = TyInferGetApi(TY_INFER_API_VERSION);
  if (api == NULL) {
    TyInferStatus* why = TyInferCheckApiVersion(TY_INFER_API_VERSION);
    fprintf(stderr, "error: %s\n", TyInferGetStatusMessage(why));
    TyInferReleaseStatus(why);
    return 1;
  }
  check(api->CreateSession(argv[1], NULL, &session));

  check(api->SessionGetInputCount(session, &count));
  for (i = 0; i < count && used < kMaxInputs; ++i) {
    check(api->SessionGetInputInfo(session, i, &info));
    print_info("input", &info);
    if (strcmp(info.name, "num_frames") == 0 || info.dtype != TY_INFER_FLOAT32 || info.rank > 8) {
      continue; /* num_frames may be left out */
    }
    check(api->TensorByteSize(&info, kBatch, &bytes));
    values[used] = allocate(bytes);
    for (d = 0; d < bytes / sizeof(float); ++d) values[used][d] = 0.5f;
    for (d = 0; d < info.rank; ++d) shapes[used][d] = info.shape[d];
    shapes[used][0] = kBatch;
    inputs[used].name = info.name;
    inputs[used].dtype = info.dtype;
    inputs[used].shape = shapes[used];
    inputs[used].rank = info.rank;
    inputs[used].data = values[used];
    inputs[used].bytes = bytes;
    ++used;
  }

  check(api->SessionGetOutputInfo(session, 0, &output_info));
  print_info("output", &output_info);
  check(api->TensorByteSize(&output_info, kBatch, &bytes));
  predictions = allocate(bytes);
  output.name = output_info.name;
  output.data = predictions;
  output.bytes = bytes;
  check(api->Run(session, inputs, used, &output, 1));

  classes = bytes / sizeof(float) / kBatch;
  printf("predictions[0]:");
  for (d = 0; d < classes; ++d) printf(" %.6f", predictions[d]);
  printf("\n");

  free(predictions);
  for (i = 0; i < used; ++i) free(values[i]);
  api->ReleaseSession(session);
  return 0;
}
