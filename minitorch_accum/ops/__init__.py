"""Ops: each a Function with its forward and backward side by side, on backend arrays."""

from minitorch_accum.ops.dropout import Dropout
from minitorch_accum.ops.elementwise import (
    Add,
    Cast,
    Div,
    Exp,
    Gelu,
    Log,
    Maximum,
    Mul,
    Neg,
    Pow,
    PowScalar,
    Relu,
    Sigmoid,
    Sqrt,
    Sub,
    Tanh,
    Where,
)
from minitorch_accum.ops.embedding import Embedding
from minitorch_accum.ops.function import Context, Function, OpError
from minitorch_accum.ops.loss import CrossEntropy
from minitorch_accum.ops.matmul import MatMul
from minitorch_accum.ops.normalization import BatchNorm, LayerNorm
from minitorch_accum.ops.reduce import LogSumExp, Max, Mean, Sum
from minitorch_accum.ops.shape import BroadcastTo, Concatenate, GetItem, Permute, Reshape, Stack
from minitorch_accum.ops.softmax import LogSoftmax, Softmax

__all__ = [
    "Add",
    "BatchNorm",
    "BroadcastTo",
    "Cast",
    "Concatenate",
    "Context",
    "CrossEntropy",
    "Div",
    "Dropout",
    "Embedding",
    "Exp",
    "Function",
    "Gelu",
    "GetItem",
    "LayerNorm",
    "Log",
    "LogSoftmax",
    "LogSumExp",
    "MatMul",
    "Max",
    "Maximum",
    "Mean",
    "Mul",
    "Neg",
    "OpError",
    "Permute",
    "Pow",
    "PowScalar",
    "Relu",
    "Reshape",
    "Sigmoid",
    "Softmax",
    "Sqrt",
    "Stack",
    "Sub",
    "Sum",
    "Tanh",
    "Where",
]
