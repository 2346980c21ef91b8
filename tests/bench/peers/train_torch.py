"""PyTorch side of the training benchmark (bench_train is the Trainyard side).

    python train_torch.py --inputs DIR --model LogisticModel|MoeModel --threads N
                          [--steps N] [--warmup N] [--losses N] [--device cpu|cuda]
                          [--autocast none|bf16]

The step of train_common.py in eager PyTorch, fp32, autograd: the forward pass and loss as
written in YouTube-8M's video_level_models.py and losses.py, clipping per tensor, and TF1's Adam
written with in-place ops as torch.optim.Adam's single-tensor path does (torch.optim.Adam
adds epsilon to sqrt(v / (1 - b2^t)), not to sqrt(v), so it is not the same optimizer).
Threads: torch.set_num_threads(N), one inter-op thread, OMP_NUM_THREADS / MKL_NUM_THREADS = N.
--device cuda: the weights, the Adam slots and the pool on GPU 0, f32 products without TF32
(as Trainyard's cuda backend; PyTorch's default for matmul too), each timed step ended by
torch.cuda.synchronize(); the JSON line gains "device".
"""

import train_common

args = train_common.parse_args(__doc__, device=True)

import torch  # noqa: E402  (after the thread variables are set)

import torch_adam  # noqa: E402

torch.set_num_threads(args.threads)
torch.set_num_interop_threads(1)
device = torch.device(args.device)
if args.device == "cuda":
    torch.backends.cuda.matmul.allow_tf32 = False


def main():
    init, features, labels, num_mixtures = train_common.read_inputs(args)
    batches = [(torch.from_numpy(features[i]).to(device), torch.from_numpy(labels[i]).to(device))
               for i in range(features.shape[0])]
    batch_size, num_classes = labels.shape[1], labels.shape[2]
    params = {name: torch.from_numpy(value).to(device).requires_grad_(True)
              for name, value in init.items()}
    names = list(params)
    weights = [params[n] for n in names if params[n].dim() == 2]
    slots = {n: (torch.zeros_like(params[n]), torch.zeros_like(params[n])) for n in names}

    # --autocast bf16: the products in bf16 under autocast (their backward too), their results
    # back in f32 before the activations, as Trainyard's --precision=bf16 computes.
    autocast = torch.autocast(args.device, dtype=torch.bfloat16, enabled=args.autocast == "bf16")

    def predictions(x):
        if args.model == "LogisticModel":
            with autocast:
                logits = torch.addmm(params["fully_connected/biases"], x,
                                     params["fully_connected/weights"])
            return torch.sigmoid(logits.float())
        m = num_mixtures
        with autocast:
            gate_activations = x @ params["gates/weights"]
            expert_activations = torch.addmm(params["experts/biases"], x,
                                             params["experts/weights"])
        gate_activations = gate_activations.float()
        expert_activations = expert_activations.float()
        gating_distribution = torch.softmax(gate_activations.reshape(-1, m + 1), dim=1)
        expert_distribution = torch.sigmoid(expert_activations.reshape(-1, m))
        probabilities = (gating_distribution[:, :m] * expert_distribution).sum(dim=1)
        return probabilities.reshape(-1, num_classes)

    def step(index, global_step):
        x, y = batches[index]
        p = predictions(x)
        eps = train_common.EPSILON
        cross_entropy = -(y * torch.log(p + eps) + (1 - y) * torch.log(1 - p + eps))
        label_loss = cross_entropy.sum(dim=1).mean()
        reg = sum(train_common.L2_PENALTY * w.square().sum() / 2 for w in weights)
        total = label_loss + 1.0 * reg
        grads = torch.autograd.grad(total, [params[n] for n in names])
        torch_adam.clip_and_adam_(params, names, grads, slots, args.learning_rate, global_step)
        return label_loss.item()

    train_common.run(args, "pytorch", step, len(batches), init, batch_size,
                     {"version": torch.__version__, "device": args.device,
                      "autocast": args.autocast},
                     torch.cuda.synchronize if args.device == "cuda" else None)


if __name__ == "__main__":
    main()
