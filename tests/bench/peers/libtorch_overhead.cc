// LibTorch's per-op overhead on the same tiny workloads as bench_engine's BM_TinyAdd and
// BM_TinyChainWithBackward, for BENCHMARKS.md. Built by run_libtorch_overhead.sh against the
// libtorch inside a PyPI torch wheel; not part of the CMake build.
#include <torch/torch.h>

#include <chrono>
#include <cstdio>

int main() {
  torch::set_num_threads(1);
  auto time_per_iter = [](auto&& fn, int iterations) {
    for (int i = 0; i < iterations / 10; ++i) fn();
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations; ++i) fn();
    std::chrono::duration<double, std::micro> elapsed = std::chrono::steady_clock::now() - start;
    return elapsed.count() / iterations;
  };
  torch::NoGradGuard* no_grad = new torch::NoGradGuard();
  torch::Tensor a = torch::full({}, 1.0f), b = torch::full({}, 2.0f);
  double add_us = time_per_iter(
      [&] {
        torch::Tensor c = a + b;
        (void)c;
      },
      2000000);
  delete no_grad;

  torch::Tensor x = torch::full({}, 0.5f, torch::requires_grad());
  torch::Tensor k = torch::full({}, 1.001f);
  double chain_us = time_per_iter(
      [&] {
        torch::Tensor h = x;
        for (int i = 0; i < 10; ++i) h = torch::tanh(h * k);
        auto g = torch::autograd::grad({h}, {x});
        (void)g;
      },
      20000);
  std::printf(
      "{\"peer\": \"libtorch\", \"version\": \"%s\", \"tiny_add_us\": %.3f, "
      "\"chain20_with_backward_us\": %.3f}\n",
      TORCH_VERSION, add_us, chain_us);
  return 0;
}
