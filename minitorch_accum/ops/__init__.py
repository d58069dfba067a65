"""Ops: each a Function with its forward and backward side by side, on backend arrays."""

from minitorch_accum.ops.attention import ScaledDotProductAttention
from minitorch_accum.ops.conversion import Cast, Clone, Transfer
from minitorch_accum.ops.dropout import Dropout
from minitorch_accum.ops.elementwise import (
    GELU_APPROXIMATIONS,
    Abs,
    Add,
    Clamp,
    Div,
    Exp,
    Gelu,
    Log,
    MaskedFill,
    Maximum,
    Minimum,
    Mul,
    Neg,
    Pow,
    PowScalar,
    Relu,
    Rsqrt,
    Sigmoid,
    Sqrt,
    Sub,
    Tanh,
    Where,
)
from minitorch_accum.ops.embedding import Embedding
from minitorch_accum.ops.function import Context, Function, OpError
from minitorch_accum.ops.linear import Linear
from minitorch_accum.ops.loss import CrossEntropy
from minitorch_accum.ops.matmul import MatMul
from minitorch_accum.ops.normalization import BatchNorm, LayerNorm
from minitorch_accum.ops.packed_attention import PackedQKVAttention
from minitorch_accum.ops.reduce import LogSumExp, Max, Mean, Min, Sum
from minitorch_accum.ops.shape import BroadcastTo, Concatenate, Gather, GetItem, Permute, Repeat, Reshape, Stack
from minitorch_accum.ops.softmax import LogSoftmax, Softmax

__all__ = [
    "GELU_APPROXIMATIONS",
    "Abs",
    "Add",
    "BatchNorm",
    "BroadcastTo",
    "Cast",
    "Clamp",
    "Clone",
    "Concatenate",
    "Context",
    "CrossEntropy",
    "Div",
    "Dropout",
    "Embedding",
    "Exp",
    "Function",
    "Gather",
    "Gelu",
    "GetItem",
    "LayerNorm",
    "Linear",
    "Log",
    "LogSoftmax",
    "LogSumExp",
    "MaskedFill",
    "MatMul",
    "Max",
    "Maximum",
    "Mean",
    "Min",
    "Minimum",
    "Mul",
    "Neg",
    "OpError",
    "PackedQKVAttention",
    "Permute",
    "Pow",
    "PowScalar",
    "Relu",
    "Repeat",
    "Reshape",
    "Rsqrt",
    "ScaledDotProductAttention",
    "Sigmoid",
    "Softmax",
    "Sqrt",
    "Stack",
    "Sub",
    "Sum",
    "Tanh",
    "Transfer",
    "Where",
]
