// The C API of trainyard/infer.h over ExportedModel (trainyard/core/exported_model.h). Every
// entry point catches what the C++ below throws and returns it as a status.
#include "trainyard/infer.h"

#include <cstring>
#include <exception>
#include <fstream>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "trainyard/core/exported_model.h"
#include "trainyard/core/registry.h"
#include "trainyard/error.h"
#include "trainyard/pkg/image/image_codec.h"

struct TyInferStatus {
  TyInferStatusCode code;
  std::string message;
};

struct TyInferSessionOptions {
  trainyard::PluginRegistry::Settings settings;
};

struct TyInferSession {
  // The registry outlives the model: declared first, destroyed last.
  std::unique_ptr<trainyard::PluginRegistry> registry;
  std::unique_ptr<trainyard::ExportedModel> model;
  std::vector<TyInferTensorInfo> inputs, outputs;
};

namespace {

using trainyard::DType;

TyInferStatus* make_status(TyInferStatusCode code, std::string message) {
  try {
    return new TyInferStatus{code, std::move(message)};
  } catch (...) {
    // No memory for the message: the code alone (an empty string allocates nothing).
    return new (std::nothrow) TyInferStatus{code, std::string()};
  }
}

// The current exception as a status whose message starts with `what` (the call that failed).
TyInferStatus* status_of_exception(const char* what) {
  const std::string prefix = std::string(what) + ": ";
  try {
    throw;
  } catch (const trainyard::InvalidArgument& e) {
    return make_status(TY_INFER_INVALID_ARGUMENT, prefix + e.what());
  } catch (const trainyard::NotFound& e) {
    return make_status(TY_INFER_NOT_FOUND, prefix + e.what());
  } catch (const trainyard::ConfigError& e) {
    return make_status(TY_INFER_CONFIG_ERROR, prefix + e.what());
  } catch (const trainyard::DataLoss& e) {
    return make_status(TY_INFER_DATA_LOSS, prefix + e.what());
  } catch (const trainyard::Unimplemented& e) {
    return make_status(TY_INFER_UNIMPLEMENTED, prefix + e.what());
  } catch (const trainyard::PluginError& e) {
    return make_status(TY_INFER_PLUGIN_ERROR, prefix + e.what());
  } catch (const std::bad_alloc&) {
    return make_status(TY_INFER_FAILED, prefix + "out of memory");
  } catch (const std::exception& e) {
    return make_status(TY_INFER_FAILED, prefix + e.what());
  } catch (...) {
    return make_status(TY_INFER_FAILED, prefix + "an unknown exception");
  }
}

// Runs `fn`, turning anything it throws into a status.
template <class Fn>
TyInferStatus* guarded(const char* what, Fn&& fn) noexcept {
  try {
    fn();
    return nullptr;
  } catch (...) {
    return status_of_exception(what);
  }
}

// `argument` (of the call named by guarded()) must not be NULL.
void require(const void* pointer, const char* /*call*/, const char* argument) {
  if (pointer == nullptr) throw trainyard::InvalidArgument(std::string(argument) + " is NULL");
}

TyInferDType c_dtype(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return TY_INFER_FLOAT32;
    case DType::kI32:
      return TY_INFER_INT32;
    case DType::kI64:
      return TY_INFER_INT64;
    case DType::kU8:
      return TY_INFER_UINT8;
    default:
      throw trainyard::Unimplemented(std::string("a tensor of dtype ") +
                                     trainyard::dtype_name(dtype) +
                                     ", which the C inference library has no TyInferDType for");
  }
}

DType cpp_dtype(TyInferDType dtype, const std::string& name) {
  switch (dtype) {
    case TY_INFER_FLOAT32:
      return DType::kF32;
    case TY_INFER_INT32:
      return DType::kI32;
    case TY_INFER_INT64:
      return DType::kI64;
    case TY_INFER_UINT8:
      return DType::kU8;
  }
  throw trainyard::InvalidArgument("input '" + name + "' has dtype " +
                                   std::to_string(static_cast<int>(dtype)) +
                                   ", not a TyInferDType");
}

std::vector<TyInferTensorInfo> c_infos(const std::vector<trainyard::ExportedTensorInfo>& infos) {
  std::vector<TyInferTensorInfo> out;
  for (const auto& info : infos) {
    out.push_back({info.name.c_str(), c_dtype(info.dtype), info.shape.data(), info.shape.size()});
  }
  return out;
}

TyInferStatus* create_session_options(TyInferSessionOptions** out) {
  return guarded("CreateSessionOptions", [&] {
    require(out, "CreateSessionOptions", "out");
    *out = new TyInferSessionOptions();
  });
}

void release_session_options(TyInferSessionOptions* options) { delete options; }

TyInferStatus* add_plugin_path(TyInferSessionOptions* options, const char* dirs) {
  return guarded("SessionOptionsAddPluginPath", [&] {
    require(options, "SessionOptionsAddPluginPath", "options");
    require(dirs, "SessionOptionsAddPluginPath", "dirs");
    const std::string list = dirs;
    std::size_t start = 0;
    while (start <= list.size()) {
      const std::size_t colon = list.find(':', start);
      const std::string part = list.substr(start, colon - start);
      if (!part.empty()) options->settings.plugin_path.emplace_back(part);
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
  });
}

TyInferStatus* use_environment(TyInferSessionOptions* options, int use) {
  return guarded("SessionOptionsUseEnvironment", [&] {
    require(options, "SessionOptionsUseEnvironment", "options");
    options->settings.use_environment = use != 0;
  });
}

TyInferStatus* create_session(const char* export_dir, const TyInferSessionOptions* options,
                              TyInferSession** out) {
  const std::string what = std::string("CreateSession(") + (export_dir ? export_dir : "NULL") + ")";
  return guarded(what.c_str(), [&] {
    require(out, "CreateSession", "out");
    *out = nullptr;
    require(export_dir, "CreateSession", "export_dir");
    auto session = std::make_unique<TyInferSession>();
    session->registry = std::make_unique<trainyard::PluginRegistry>(
        options ? options->settings : trainyard::PluginRegistry::Settings{});
    session->model = std::make_unique<trainyard::ExportedModel>(*session->registry, export_dir);
    session->inputs = c_infos(session->model->inputs());
    session->outputs = c_infos(session->model->outputs());
    *out = session.release();
  });
}

void release_session(TyInferSession* session) { delete session; }

TyInferStatus* input_count(const TyInferSession* session, size_t* count) {
  return guarded("SessionGetInputCount", [&] {
    require(session, "SessionGetInputCount", "session");
    require(count, "SessionGetInputCount", "count");
    *count = session->inputs.size();
  });
}

TyInferStatus* output_count(const TyInferSession* session, size_t* count) {
  return guarded("SessionGetOutputCount", [&] {
    require(session, "SessionGetOutputCount", "session");
    require(count, "SessionGetOutputCount", "count");
    *count = session->outputs.size();
  });
}

void info_at(const std::vector<TyInferTensorInfo>& infos, size_t index, const char* kind,
             TyInferTensorInfo* info) {
  require(info, kind, "info");
  if (index >= infos.size()) {
    throw trainyard::InvalidArgument(std::string(kind) + " index " + std::to_string(index) +
                                     " is out of range; the session has " +
                                     std::to_string(infos.size()));
  }
  *info = infos[index];
}

TyInferStatus* input_info(const TyInferSession* session, size_t index, TyInferTensorInfo* info) {
  return guarded("SessionGetInputInfo", [&] {
    require(session, "SessionGetInputInfo", "session");
    info_at(session->inputs, index, "input", info);
  });
}

TyInferStatus* output_info(const TyInferSession* session, size_t index, TyInferTensorInfo* info) {
  return guarded("SessionGetOutputInfo", [&] {
    require(session, "SessionGetOutputInfo", "session");
    info_at(session->outputs, index, "output", info);
  });
}

TyInferStatus* model_class(const TyInferSession* session, const char** name) {
  return guarded("SessionGetModelClass", [&] {
    require(session, "SessionGetModelClass", "session");
    require(name, "SessionGetModelClass", "name");
    *name = session->model->model_class().c_str();
  });
}

TyInferStatus* tensor_byte_size(const TyInferTensorInfo* info, int64_t batch_size, size_t* bytes) {
  return guarded("TensorByteSize", [&] {
    require(info, "TensorByteSize", "info");
    require(bytes, "TensorByteSize", "bytes");
    if (batch_size < 1) {
      throw trainyard::InvalidArgument("batch_size is " + std::to_string(batch_size) +
                                       "; expected at least 1");
    }
    std::vector<int64_t> shape(info->shape, info->shape + info->rank);
    if (!shape.empty() && shape[0] == -1) shape[0] = batch_size;
    const std::size_t elements = static_cast<std::size_t>(trainyard::Shape(shape).num_elements());
    *bytes = elements * trainyard::dtype_size(cpp_dtype(info->dtype, info->name ? info->name : ""));
  });
}

// The caller's buffer of each declared output, checked for a batch of `batch_size` before the
// model runs.
std::vector<const TyInferOutput*> output_targets(const TyInferSession& session,
                                                 const TyInferOutput* outputs, size_t num_outputs,
                                                 int64_t batch_size) {
  if (num_outputs > 0) require(outputs, "Run", "outputs");
  const std::vector<TyInferTensorInfo>& declared = session.outputs;
  std::string names;
  for (const TyInferTensorInfo& info : declared) {
    names += (names.empty() ? "'" : ", '") + std::string(info.name) + "'";
  }
  std::vector<const TyInferOutput*> targets(declared.size(), nullptr);
  for (size_t i = 0; i < num_outputs; ++i) {
    const TyInferOutput& out = outputs[i];
    const std::string name = out.name ? out.name : "";
    size_t at = 0;
    while (at < declared.size() && name != declared[at].name) ++at;
    if (at == declared.size()) {
      throw trainyard::InvalidArgument("no output named '" + name + "'; the outputs are " + names);
    }
    if (targets[at] != nullptr) {
      throw trainyard::InvalidArgument("output '" + name + "' is given twice");
    }
    targets[at] = &out;
  }
  for (size_t at = 0; at < declared.size(); ++at) {
    if (targets[at] == nullptr) {
      throw trainyard::InvalidArgument("no buffer for output '" + std::string(declared[at].name) +
                                       "'");
    }
    if (batch_size < 1) continue;
    size_t bytes = 0;
    if (TyInferStatus* s = tensor_byte_size(&declared[at], batch_size, &bytes)) {
      const std::string message = s->message;
      delete s;
      throw trainyard::InvalidArgument(message);
    }
    if (targets[at]->bytes != bytes || targets[at]->data == nullptr) {
      throw trainyard::InvalidArgument("output '" + std::string(declared[at].name) +
                                       "' for a batch of " + std::to_string(batch_size) +
                                       " needs a buffer of " + std::to_string(bytes) +
                                       " bytes; given " + std::to_string(targets[at]->bytes) +
                                       (targets[at]->data == nullptr ? " at NULL" : ""));
    }
  }
  return targets;
}

void write_outputs(const TyInferSession& session, const std::vector<const TyInferOutput*>& targets,
                   const std::vector<std::vector<float>>& values) {
  for (size_t at = 0; at < targets.size(); ++at) {
    const size_t bytes = values[at].size() * sizeof(float);
    if (targets[at]->bytes != bytes) {
      throw trainyard::InvalidArgument("output '" + std::string(session.outputs[at].name) +
                                       "' needs " + std::to_string(bytes) + " bytes; given " +
                                       std::to_string(targets[at]->bytes));
    }
    if (bytes > 0) std::memcpy(targets[at]->data, values[at].data(), bytes);
  }
}

TyInferStatus* run(TyInferSession* session, const TyInferInput* inputs, size_t num_inputs,
                   const TyInferOutput* outputs, size_t num_outputs) {
  return guarded("Run", [&] {
    require(session, "Run", "session");
    if (num_inputs > 0) require(inputs, "Run", "inputs");
    std::vector<trainyard::HostTensorView> views;
    int64_t batch_size = 0;
    for (size_t i = 0; i < num_inputs; ++i) {
      const TyInferInput& in = inputs[i];
      if (in.name == nullptr) {
        throw trainyard::InvalidArgument("inputs[" + std::to_string(i) + "].name is NULL");
      }
      if (in.rank > 0 && in.shape == nullptr) {
        throw trainyard::InvalidArgument("input '" + std::string(in.name) + "' has rank " +
                                         std::to_string(in.rank) + " and a NULL shape");
      }
      views.push_back({in.name, cpp_dtype(in.dtype, in.name),
                       std::vector<int64_t>(in.shape, in.shape + in.rank), in.data, in.bytes});
      if (in.rank > 0) batch_size = in.shape[0];
    }
    const auto targets = output_targets(*session, outputs, num_outputs, batch_size);
    write_outputs(*session, targets, session->model->run_outputs(views));
  });
}

TyInferStatus* run_images(TyInferSession* session, const TyInferImage* images, size_t num_images,
                          const TyInferOutput* outputs, size_t num_outputs) {
  return guarded("RunImages", [&] {
    require(session, "RunImages", "session");
    if (num_images > 0) require(images, "RunImages", "images");
    std::vector<trainyard::HostTensorView> views;
    for (size_t i = 0; i < num_images; ++i) {
      const TyInferImage& image = images[i];
      const std::vector<int64_t> shape{image.height, image.width, image.channels};
      size_t bytes = 0;
      if (image.height > 0 && image.width > 0 && image.channels > 0) {
        bytes = static_cast<size_t>(image.height) * static_cast<size_t>(image.width) *
                static_cast<size_t>(image.channels);
      }
      views.push_back({"image", DType::kU8, shape, image.pixels, bytes});
    }
    const auto targets =
        output_targets(*session, outputs, num_outputs, static_cast<int64_t>(num_images));
    write_outputs(*session, targets, session->model->run_images(views));
  });
}

TyInferStatus* run_examples(TyInferSession* session, const TyInferBytes* records,
                            size_t num_records, const TyInferOutput* outputs, size_t num_outputs) {
  return guarded("RunExamples", [&] {
    require(session, "RunExamples", "session");
    if (num_records > 0) require(records, "RunExamples", "records");
    std::vector<std::string_view> views;
    for (size_t i = 0; i < num_records; ++i) {
      if (records[i].data == nullptr && records[i].size > 0) {
        throw trainyard::InvalidArgument("records[" + std::to_string(i) + "] has " +
                                         std::to_string(records[i].size) + " bytes at NULL");
      }
      views.emplace_back(static_cast<const char*>(records[i].data), records[i].size);
    }
    const auto targets =
        output_targets(*session, outputs, num_outputs, static_cast<int64_t>(num_records));
    write_outputs(*session, targets, session->model->run_examples(views));
  });
}

TyInferStatus* decode_image(const void* encoded, size_t size, int64_t* height, int64_t* width,
                            uint8_t* pixels, size_t pixel_bytes) {
  return guarded("DecodeImage", [&] {
    require(encoded, "DecodeImage", "encoded");
    require(height, "DecodeImage", "height");
    require(width, "DecodeImage", "width");
    const trainyard::image::DecodedImage image = trainyard::image::decode_image(
        std::span<const std::byte>(static_cast<const std::byte*>(encoded), size), 3, "DecodeImage");
    *height = image.height;
    *width = image.width;
    if (pixels == nullptr) return;
    if (pixel_bytes != image.pixels.size()) {
      throw trainyard::InvalidArgument("the image is " + std::to_string(image.height) + " x " +
                                       std::to_string(image.width) + " x 3 and needs " +
                                       std::to_string(image.pixels.size()) + " bytes; given " +
                                       std::to_string(pixel_bytes));
    }
    std::memcpy(pixels, image.pixels.data(), pixel_bytes);
  });
}

TyInferStatus* write_png(const char* path, const TyInferImage* image) {
  const std::string what = std::string("WritePng(") + (path ? path : "NULL") + ")";
  return guarded(what.c_str(), [&] {
    require(path, "WritePng", "path");
    require(image, "WritePng", "image");
    require(image->pixels, "WritePng", "image->pixels");
    if (image->height < 1 || image->width < 1 || image->channels < 1 || image->channels > 4) {
      throw trainyard::InvalidArgument("the image is " + std::to_string(image->height) + " x " +
                                       std::to_string(image->width) + " x " +
                                       std::to_string(image->channels) +
                                       "; expected sizes of at least 1, 1 to 4 channels");
    }
    const size_t bytes = static_cast<size_t>(image->height) * static_cast<size_t>(image->width) *
                         static_cast<size_t>(image->channels);
    const std::string png =
        trainyard::image::encode_png(std::span<const uint8_t>(image->pixels, bytes), image->height,
                                     image->width, static_cast<int>(image->channels));
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(png.data(), static_cast<std::streamsize>(png.size()));
    out.close();
    if (!out) throw trainyard::NotFound(std::string("cannot write ") + path);
  });
}

TyInferStatusCode status_code(const TyInferStatus* status) {
  return status ? status->code : TY_INFER_OK;
}

const char* status_message(const TyInferStatus* status) {
  return status ? status->message.c_str() : "";
}

void release_status(TyInferStatus* status) { delete status; }

const TyInferApi kApiV1 = {
    1u,
    sizeof(TyInferApi),
    create_session_options,
    release_session_options,
    add_plugin_path,
    use_environment,
    create_session,
    release_session,
    input_count,
    output_count,
    input_info,
    output_info,
    model_class,
    run,
    tensor_byte_size,
    status_code,
    status_message,
    release_status,
    run_images,
    run_examples,
    decode_image,
    write_png,
};

}  // namespace

extern "C" {

const TyInferApi* TyInferGetApi(uint32_t version) { return version == 1u ? &kApiV1 : nullptr; }

TyInferStatus* TyInferCheckApiVersion(uint32_t version) {
  if (version == 1u) return nullptr;
  return make_status(TY_INFER_INVALID_ARGUMENT,
                     "TyInferGetApi: API version " + std::to_string(version) +
                         " is not provided by this libtrainyard_infer; it provides version 1 "
                         "(TY_INFER_API_VERSION of its trainyard/infer.h)");
}

TyInferStatusCode TyInferGetStatusCode(const TyInferStatus* status) { return status_code(status); }
const char* TyInferGetStatusMessage(const TyInferStatus* status) { return status_message(status); }
void TyInferReleaseStatus(TyInferStatus* status) { release_status(status); }

}  // extern "C"
