"""PyTorch's ``torch.nn.utils`` names that have a meaning here: clipping gradients by their norm."""

from minitorch_accum.nn.utils.clip_grad import clip_grad_norm_

__all__ = ["clip_grad_norm_"]
