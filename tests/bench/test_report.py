"""The harness's report says how far apart in time the peers of a cell ran the same batch."""

from __future__ import annotations

from bench import report


def test_spread_is_the_widest_batch_over_the_peers_that_ran_it() -> None:
    results = [
        {"sf": 1.0, "cell": "clustered:uniform:1", "peer": "a", "at": [10.0, 40.0, 70.0]},
        {"sf": 1.0, "cell": "clustered:uniform:1", "peer": "b", "at": [20.0, 75.0]},
        {"sf": 1.0, "cell": "clustered:uniform:1", "peer": "c", "status": "failed", "at": []},
        {"sf": 0.1, "cell": "clustered:uniform:1", "peer": "a", "at": [1.0, 2.0]},
        {"sf": 0.1, "cell": "date:recent:1", "peer": "a"},  # a result of an older harness, not stepped
    ]
    assert report.spread(results) == [
        "- SF1 clustered:uniform:1: every peer began each batch within 35 s of the first to begin it",
        "- SF0.1 clustered:uniform:1: every peer began each batch within 0 s of the first to begin it",
        "",
    ]
    assert report.spread([{"sf": 1.0, "cell": "x", "peer": "a", "times": [1.0]}]) == []
