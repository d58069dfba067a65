"""The all-reduce benchmark as a program: ``python benchmarks/all_reduce.py [--quick] [--out DIR]
[--repeats N] [--no-plot] [--hosts N]`` (also ``maccum bench all-reduce ...`` from a checkout).

``--hosts N`` runs it over N hosts made as network namespaces on this machine (root and ``ip``
needed; see hosts.py): results named ``all_reduce_hosts-...``, so they never replace the
one-machine figures."""

from __future__ import annotations

import argparse
from dataclasses import replace

from benchmarks.all_reduce.hosts import check_hosts_possible
from benchmarks.all_reduce.measure import BENCHMARK, measure
from benchmarks.all_reduce.report import format_table, plot
from benchmarks.all_reduce.settings import (
    Settings,
    full_settings,
    hosts_full_settings,
    hosts_quick_settings,
    quick_settings,
)
from benchmarks.harness import program

__all__ = ["ALL_REDUCE", "ALL_REDUCE_HOSTS", "main"]


def _hosts_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--hosts", type=program.positive_int, default=None, metavar="N",
                        help="run over N hosts made as network namespaces on this machine, one rank each "
                             "(TCP over veth links: not a real NIC; needs root and ip)")


def _apply(settings: Settings, args: argparse.Namespace) -> Settings:
    settings = program.override_repeats("repeats")(settings, args)
    if args.hosts is None:
        return settings
    if args.hosts < 2:
        raise ValueError(f"--hosts needs at least 2 hosts, got {args.hosts}")
    check_hosts_possible()
    return replace(settings, hosts=args.hosts, ranks=args.hosts)


ALL_REDUCE = program.Benchmark(
    name=BENCHMARK,
    description="The window's all-reduce of the gradient arena against the memory copy; step time R=1 vs R=2.",
    quick_help="two small arenas, a small MLP, few rounds",
    full_settings=full_settings, quick_settings=quick_settings, add_arguments=_hosts_option, apply_arguments=_apply,
    measure=measure, format_table=format_table, plot=plot,
)

ALL_REDUCE_HOSTS = replace(
    ALL_REDUCE, name=f"{BENCHMARK}_hosts",
    description="The all-reduce benchmark over hosts made as network namespaces (TCP over veth: not a NIC).",
    full_settings=hosts_full_settings, quick_settings=hosts_quick_settings)


def main(argv: list[str]) -> int:
    """The one-machine benchmark, or the namespace-hosts one when ``--hosts`` is given."""
    hosts = any(arg == "--hosts" or arg.startswith("--hosts=") for arg in argv)
    return program.main(ALL_REDUCE_HOSTS if hosts else ALL_REDUCE, argv)


