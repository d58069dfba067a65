"""Choosing the communicator from how the process was launched.

``mpiexec -n R python -m mpi4py -m minitorch_accum.cli train ...`` starts R processes with
the launcher's environment (MPICH's Hydra sets ``PMI_SIZE``/``PMI_RANK``; Open MPI sets
``OMPI_COMM_WORLD_SIZE``). ``"auto"`` uses MPI when such a launch has more than one rank
and the world of one process otherwise, so the same command runs alone or data-parallel.
"""

from __future__ import annotations

from minitorch_accum.distributed.communicator import Communicator, LocalCommunicator
from minitorch_accum.distributed.launch_environment import launched_world_size

__all__ = ["COMMUNICATORS", "make_communicator"]

COMMUNICATORS = ("auto", "mpi", "nccl", "local")


def make_communicator(kind: str | Communicator = "auto") -> Communicator:
    """A Communicator by name (``auto``, ``mpi``, ``nccl``, ``local``) or the one given."""
    if isinstance(kind, Communicator):
        return kind
    if kind not in COMMUNICATORS:
        raise ValueError(f"communicator must be one of {', '.join(COMMUNICATORS)} or a Communicator, got {kind!r}")
    if kind == "auto":
        kind = "mpi" if launched_world_size() > 1 else "local"
    if kind == "local":
        return LocalCommunicator()
    if kind == "mpi":
        from minitorch_accum.distributed.mpi_communicator import MPICommunicator

        return MPICommunicator()
    from minitorch_accum.distributed.nccl_communicator import NCCLCommunicator

    return NCCLCommunicator()
