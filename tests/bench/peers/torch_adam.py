"""The train op both PyTorch peers run after their backward pass, as Trainyard's TrainStep does:
each gradient clipped by its own norm (clip_gradient_norm), then TF1 Adam (bias correction folded
into the learning rate, epsilon added to sqrt(v)), in place. Import it after the thread
variables are set, as the peers import torch."""

import torch

import train_common


def clip_and_adam_(params, names, grads, slots, learning_rate, global_step):
    t = global_step + 1
    b1, b2 = train_common.BETA1, train_common.BETA2
    lr_t = learning_rate * (1 - b2**t) ** 0.5 / (1 - b1**t)
    with torch.no_grad():
        for name, g in zip(names, grads):
            norm = torch.linalg.vector_norm(g)
            g = g * (train_common.CLIP_NORM / torch.clamp(norm, min=train_common.CLIP_NORM))
            m, v = slots[name]
            m.lerp_(g, 1 - b1)
            v.mul_(b2).addcmul_(g, g, value=1 - b2)
            params[name].addcdiv_(m, v.sqrt().add_(train_common.ADAM_EPSILON), value=-lr_t)
