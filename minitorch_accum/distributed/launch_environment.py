"""What the launcher told this process: how many ranks it started.

``mpiexec`` (MPICH's Hydra sets ``PMI_SIZE``; Open MPI sets ``OMPI_COMM_WORLD_SIZE``) starts
every rank with the world's size in its environment. Choosing a communicator and
bootstrapping NCCL both ask; a process that no launcher started is a world of one.
"""

from __future__ import annotations

import os

__all__ = ["launched_world_size"]

_SIZE_VARIABLES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS")


def launched_world_size() -> int:
    """The number of ranks the MPI launcher started (1 when not launched by one)."""
    for name in _SIZE_VARIABLES:
        value = os.environ.get(name)
        if value and value.isdigit():
            return int(value)
    return 1
