"""Neural-network modules: Module/Param, layers, and (in ``functional``) the losses."""

from minitorch_accum.nn import functional, init, utils
from minitorch_accum.nn.activation import GELU, ReLU, Sigmoid, Tanh
from minitorch_accum.nn.container import ModuleDict, ModuleList, Sequential
from minitorch_accum.nn.dropout import Dropout
from minitorch_accum.nn.embedding import Embedding
from minitorch_accum.nn.linear import Linear
from minitorch_accum.nn.module import Buffer, IncompatibleKeys, Module, Param, RecordError
from minitorch_accum.nn.normalization import BatchNorm1d, LayerNorm

Parameter = Param  # PyTorch's name for Burn's Param

__all__ = [
    "GELU",
    "BatchNorm1d",
    "Buffer",
    "Dropout",
    "Embedding",
    "IncompatibleKeys",
    "LayerNorm",
    "Linear",
    "Module",
    "ModuleDict",
    "ModuleList",
    "Param",
    "Parameter",
    "ReLU",
    "RecordError",
    "Sequential",
    "Sigmoid",
    "Tanh",
    "functional",
    "init",
    "utils",
]
