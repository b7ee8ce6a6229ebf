"""Every peer of the harness, and the Python each one runs in: the harness's own (the installed
Spark), or an environment of another Spark line (:mod:`bench.envs`)."""

from __future__ import annotations

from bench import envs, hudi, peers
from bench.envs import Environment

PEERS = (*peers.PEERS, *hudi.PEERS)


def environment(peer: str, installed: str) -> Environment | None:
    """Where ``peer`` runs beside the installed Spark ``installed`` (``None``: in the harness's own
    interpreter): the Hudi peers on Spark 3.5, the Iceberg peers on the newest Spark line Iceberg
    publishes a runtime for here when it is not the installed one."""
    if peer in hudi.PEERS:
        return envs.SPARK35
    if peer in peers.ICEBERG_PEERS:
        return envs.iceberg_environment(installed)
    return None
