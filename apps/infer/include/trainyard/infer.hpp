// A header-only C++ RAII wrapper on the C API of trainyard/infer.h (libtrainyard_infer).
//
//   trainyard::infer::Session session("/models/export");       // throws trainyard::infer::Error
//   std::vector<float> p = session.run({{"features", {2, 32}, values}});  // one output
//   trainyard::infer::Outputs d = session.run_images({{pixels, 480, 640, 3}});  // every output
//   d["detection_boxes"] ...
//
// Error carries the status code and message. Session is movable, not copyable, and may run on
// several threads at once, as the C session does.
#ifndef TRAINYARD_INFER_HPP_
#define TRAINYARD_INFER_HPP_

#include <cstddef>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "trainyard/infer.h"

namespace trainyard::infer {

class Error : public std::runtime_error {
 public:
  Error(TyInferStatusCode code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  TyInferStatusCode code() const { return code_; }

 private:
  TyInferStatusCode code_;
};

// Throws Error for a non-NULL status, releasing it.
inline void check(TyInferStatus* status) {
  if (status == nullptr) return;
  const TyInferStatusCode code = TyInferGetStatusCode(status);
  std::string message = TyInferGetStatusMessage(status);
  TyInferReleaseStatus(status);
  throw Error(code, message);
}

// The table of the version this header was written for; Error when the library lacks it.
inline const TyInferApi& api() {
  const TyInferApi* table = TyInferGetApi(TY_INFER_API_VERSION);
  if (table == nullptr) check(TyInferCheckApiVersion(TY_INFER_API_VERSION));
  return *table;
}

struct TensorInfo {
  std::string name;
  TyInferDType dtype = TY_INFER_FLOAT32;
  std::vector<int64_t> shape;  // shape[0] is -1, the batch size
};

// A float input (the common case); an int32 one ("num_frames") through the other constructor.
struct Input {
  std::string name;
  std::vector<int64_t> shape;
  TyInferDType dtype = TY_INFER_FLOAT32;
  const void* data = nullptr;
  std::size_t bytes = 0;
  Input(std::string n, std::vector<int64_t> s, const std::vector<float>& values)
      : name(std::move(n)),
        shape(std::move(s)),
        data(values.data()),
        bytes(values.size() * sizeof(float)) {}
  Input(std::string n, std::vector<int64_t> s, const std::vector<int32_t>& values)
      : name(std::move(n)),
        shape(std::move(s)),
        dtype(TY_INFER_INT32),
        data(values.data()),
        bytes(values.size() * sizeof(int32_t)) {}
  // uint8 images ("image_tensor" [N, H, W, 3] of a detector).
  Input(std::string n, std::vector<int64_t> s, const std::vector<uint8_t>& values)
      : name(std::move(n)),
        shape(std::move(s)),
        dtype(TY_INFER_UINT8),
        data(values.data()),
        bytes(values.size()) {}
};

// Every output of a run by name, f32 values, the batch size first.
using Outputs = std::map<std::string, std::vector<float>>;

class SessionOptions {
 public:
  SessionOptions() { check(api().CreateSessionOptions(&options_)); }
  ~SessionOptions() { api().ReleaseSessionOptions(options_); }
  SessionOptions(const SessionOptions&) = delete;
  SessionOptions& operator=(const SessionOptions&) = delete;
  SessionOptions& add_plugin_path(const std::string& dirs) {
    check(api().SessionOptionsAddPluginPath(options_, dirs.c_str()));
    return *this;
  }
  SessionOptions& use_environment(bool use) {
    check(api().SessionOptionsUseEnvironment(options_, use ? 1 : 0));
    return *this;
  }
  const TyInferSessionOptions* get() const { return options_; }

 private:
  TyInferSessionOptions* options_ = nullptr;
};

class Session {
 public:
  explicit Session(const std::string& export_dir, const SessionOptions* options = nullptr) {
    check(api().CreateSession(export_dir.c_str(), options ? options->get() : nullptr, &session_));
  }
  ~Session() { api().ReleaseSession(session_); }
  Session(Session&& other) noexcept : session_(std::exchange(other.session_, nullptr)) {}
  Session& operator=(Session&& other) noexcept {
    std::swap(session_, other.session_);
    return *this;
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  std::string model_class() const {
    const char* name = nullptr;
    check(api().SessionGetModelClass(session_, &name));
    return name;
  }
  std::vector<TensorInfo> inputs() const {
    return infos(api().SessionGetInputCount, api().SessionGetInputInfo);
  }
  std::vector<TensorInfo> outputs() const {
    return infos(api().SessionGetOutputCount, api().SessionGetOutputInfo);
  }

  // The first (only) output, f32, for a batch of the inputs' first dimension.
  std::vector<float> run(const std::vector<Input>& inputs) const {
    std::vector<TyInferInput> c_inputs;
    int64_t batch = 0;
    for (const Input& in : inputs) {
      c_inputs.push_back(
          {in.name.c_str(), in.dtype, in.shape.data(), in.shape.size(), in.data, in.bytes});
      if (!in.shape.empty()) batch = in.shape[0];
    }
    TyInferTensorInfo out_info{};
    check(api().SessionGetOutputInfo(session_, 0, &out_info));
    std::size_t bytes = 0;
    if (batch >= 1) check(api().TensorByteSize(&out_info, batch, &bytes));
    std::vector<float> values(bytes / sizeof(float));
    TyInferOutput out{out_info.name, values.data(), bytes};
    check(api().Run(session_, c_inputs.data(), c_inputs.size(), &out, 1));
    return values;
  }

  // Every output, for tensors (a detector's "image_tensor"), images (RunImages) or serialized
  // tf.Examples (RunExamples).
  Outputs run_all(const std::vector<Input>& inputs) const {
    std::vector<TyInferInput> c_inputs;
    int64_t batch = 0;
    for (const Input& in : inputs) {
      c_inputs.push_back(
          {in.name.c_str(), in.dtype, in.shape.data(), in.shape.size(), in.data, in.bytes});
      if (!in.shape.empty()) batch = in.shape[0];
    }
    return outputs_for(batch, [&](const TyInferOutput* out, std::size_t n) {
      return api().Run(session_, c_inputs.data(), c_inputs.size(), out, n);
    });
  }
  Outputs run_images(const std::vector<TyInferImage>& images) const {
    return outputs_for(static_cast<int64_t>(images.size()),
                       [&](const TyInferOutput* out, std::size_t n) {
                         return api().RunImages(session_, images.data(), images.size(), out, n);
                       });
  }
  Outputs run_examples(const std::vector<std::string>& records) const {
    std::vector<TyInferBytes> c_records;
    for (const std::string& r : records) c_records.push_back({r.data(), r.size()});
    return outputs_for(
        static_cast<int64_t>(records.size()), [&](const TyInferOutput* out, std::size_t n) {
          return api().RunExamples(session_, c_records.data(), c_records.size(), out, n);
        });
  }

  TyInferSession* get() const { return session_; }

 private:
  template <class Call>
  Outputs outputs_for(int64_t batch, Call call) const {
    Outputs values;
    std::vector<TyInferOutput> c_outputs;
    std::vector<TensorInfo> declared = outputs();
    for (const TensorInfo& info : declared) values[info.name];  // fixes the buffers' addresses
    for (std::size_t i = 0; i < declared.size(); ++i) {
      TyInferTensorInfo info{};
      check(api().SessionGetOutputInfo(session_, i, &info));
      std::size_t bytes = 0;
      if (batch >= 1) check(api().TensorByteSize(&info, batch, &bytes));
      std::vector<float>& buffer = values[info.name];
      buffer.resize(bytes / sizeof(float));
      c_outputs.push_back({info.name, buffer.data(), bytes});
    }
    check(call(c_outputs.data(), c_outputs.size()));
    return values;
  }

  template <class Count, class Info>
  std::vector<TensorInfo> infos(Count count_fn, Info info_fn) const {
    std::size_t count = 0;
    check(count_fn(session_, &count));
    std::vector<TensorInfo> out;
    for (std::size_t i = 0; i < count; ++i) {
      TyInferTensorInfo info{};
      check(info_fn(session_, i, &info));
      out.push_back(
          {info.name, info.dtype, std::vector<int64_t>(info.shape, info.shape + info.rank)});
    }
    return out;
  }

  TyInferSession* session_ = nullptr;
};

}  // namespace trainyard::infer

#endif  // TRAINYARD_INFER_HPP_
