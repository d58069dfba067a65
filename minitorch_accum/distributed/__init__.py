"""Data-parallel accumulation across processes and machines, on existing libraries.

``MPICommunicator`` (mpi4py; the CPU, one machine or many) and ``NCCLCommunicator``
(NCCL through CuPy; GPUs) behind one ``Communicator`` face; ``DataParallel`` sums the
window of every rank once per window over the arena's buckets (``WindowReduction``: what each
bucket's call moved and took); ``ZeroRedundancy`` shards the reduced gradient and the optimizer
state (ZeRO-1); ``rank_windows`` slices one global data order by rank.
"""

from minitorch_accum.distributed.buckets import Bucket, plan_buckets
from minitorch_accum.distributed.communicator import CollectiveCounts, Communicator, LocalCommunicator
from minitorch_accum.distributed.data_order import WindowShare, rank_windows
from minitorch_accum.distributed.data_parallel import DataParallel
from minitorch_accum.distributed.mpi_communicator import MPICommunicator
from minitorch_accum.distributed.reduction_record import BucketReduction, WindowReduction
from minitorch_accum.distributed.zero import ZeroRedundancy, ZeroRedundancyOptimizer

__all__ = [
    "Bucket",
    "BucketReduction",
    "CollectiveCounts",
    "Communicator",
    "DataParallel",
    "LocalCommunicator",
    "MPICommunicator",
    "WindowReduction",
    "WindowShare",
    "ZeroRedundancy",
    "ZeroRedundancyOptimizer",
    "plan_buckets",
    "rank_windows",
]
