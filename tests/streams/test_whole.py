"""Whole source transactions, the rule alone: a database commits transactions over several tables,
Debezium writes each event to its table's topic partition in commit order and an END record per
transaction to the transaction topic, and a consumer reads each partition in rounds of any size.
After every round, what the source applied is the database's first k transactions, each entirely
(and the events outside transactions before them), every record applied once, what waits is
staged, and once everything is read everything is applied."""

from __future__ import annotations

from dataclasses import dataclass, replace

from hypothesis import given, settings
from hypothesis import strategies as st

from lakemerge.streams.whole import End, Seen, decide

TABLES = ("a", "b", "c", "skipped")
TX_TOPIC = "db.transaction"


def topic(table: str) -> str:
    return f"db.public.{table}"


@dataclass(frozen=True)
class Record:
    topic: str
    partition: int
    offset: int
    transaction: str | None
    order: int | None = None  # (its place among its transaction's events of its table)
    counts: tuple[tuple[str, int], ...] | None = None  # (an END record's)
    closed: bool = False  # (an END record staged after its transaction applied)

    @property
    def place(self) -> tuple[str, int]:
        return (self.topic, self.partition)


@st.composite
def database(draw: st.DrawFn) -> tuple[list[Record], dict[str, list[Record]]]:
    """Snapshot events (no transaction), then transactions: the records in the order Debezium
    writes them, and each transaction's events."""
    logs: dict[tuple[str, int], int] = {}
    records: list[Record] = []
    events: dict[str, list[Record]] = {}

    def write(where: tuple[str, int], **fields: object) -> Record:
        offset = logs.get(where, 0)
        logs[where] = offset + 1
        record = Record(where[0], where[1], offset, **fields)  # type: ignore[arg-type]
        records.append(record)
        return record

    for _ in range(draw(st.integers(0, 3))):
        write((topic(draw(st.sampled_from(TABLES[:3]))), draw(st.integers(0, 1))), transaction=None)
    for number in range(1, draw(st.integers(1, 6)) + 1):
        name = f"tx{number}"
        counts: dict[str, int] = {}
        for _ in range(draw(st.integers(1, 4))):
            table = draw(st.sampled_from(TABLES))
            counts[table] = counts.get(table, 0) + 1
            record = write((topic(table), draw(st.integers(0, 1))), transaction=name, order=counts[table])
            events.setdefault(name, []).append(record)
            if draw(st.booleans()) and draw(st.booleans()):  # (Kafka Connect sent it again)
                write(record.place, transaction=name, order=counts[table])
        end = tuple(sorted((f"public.{t}", n) for t, n in counts.items()))
        write((TX_TOPIC, 0), transaction=name, counts=end)
        if draw(st.booleans()) and draw(st.booleans()):  # (sent again after its END, and its END)
            again = events[name][-1]
            write(again.place, transaction=name, order=again.order)
            if draw(st.booleans()):
                write((TX_TOPIC, 0), transaction=name, counts=end)
    return records, events


def seen_and_ends(records: list[Record]) -> tuple[list[Seen], list[End]]:
    groups: dict[tuple[str | None, str, int], list[Record]] = {}
    ends = []
    for r in records:
        if r.counts is not None:
            ends.append(End(r.transaction or "", dict(r.counts), r.topic, r.partition, r.offset, r.offset, r.closed))
        elif r.topic != topic("skipped"):
            groups.setdefault((r.transaction, r.topic, r.partition), []).append(r)
    seen = []
    for (transaction, where, partition), found in groups.items():
        offsets = [r.offset for r in found]
        events = len({r.order for r in found}) if transaction is not None else len(found)
        seen.append(Seen(transaction, where, partition, min(offsets), max(offsets), events, min(offsets)))
    return seen, ends


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_every_round_applies_a_prefix_of_whole_transactions_each_record_once(data: st.DataObject) -> None:
    records, events = data.draw(database())
    places = sorted({r.place for r in records})
    read = {p: 0 for p in places}
    staged: list[Record] = []
    applied: list[Record] = []
    ends: dict[tuple[str, int], int] = {}
    names = sorted(
        (n for n, mine in events.items() if any(r.topic != topic("skipped") for r in mine)), key=lambda n: int(n[2:])
    )
    rounds = data.draw(st.integers(0, 6))
    for number in range(rounds + 1):
        last = number == rounds
        fresh = []
        for p in places:
            size = sum(1 for r in records if r.place == p)
            upto = size if last else min(size, read[p] + data.draw(st.integers(0, 3)))
            fresh += [r for r in records if r.place == p and read[p] <= r.offset < upto]
            read[p] = upto
        round_ = staged + fresh
        seen, closing = seen_and_ends(round_)
        decision = decide(
            seen,
            closing,
            counted=lambda collection: collection != "public.skipped",
            topic_of=lambda collection: f"db.{collection}",
        )

        def waits(r: Record, decision: object = decision) -> bool:
            cut = decision.cuts.get(r.place)  # type: ignore[attr-defined]
            if r.counts is not None:
                return r.transaction in decision.held  # type: ignore[attr-defined]
            return cut is not None and r.offset >= cut and r.topic != TX_TOPIC

        now = [r for r in round_ if not waits(r) and r.counts is None and r.topic != topic("skipped")]
        staged = [r for r in round_ if waits(r)] + [
            replace(r, closed=True) for r in round_ if r.counts and not waits(r)
        ]
        for (where, partition), (first, end) in decision.ranges.items():
            here = [r.offset for r in now if r.place == (where, partition)]
            assert here and min(here) == first and max(here) < end, "the ranges span what applies"
            assert first >= ends.get((where, partition), 0), "each partition's records applied in order"
            ends[(where, partition)] = end
        applied += now
        assert len(applied) == len(set(applied)), "every record applied once"
        whole = [n for n in names if any(r.transaction == n for r in applied)]
        assert whole == names[: len(whole)], "a prefix of the database's transactions"
        for name in names:
            mine = {r for r in events[name] if r.topic != topic("skipped")}
            done = {r for r in applied if r.transaction == name and r.counts is None}
            assert not done or {(r.place, r.order) for r in done} == {(r.place, r.order) for r in mine}, name
        for p in places:
            offsets = sorted(r.offset for r in applied if r.place == p)
            if p[0] not in (TX_TOPIC, topic("skipped")):
                assert offsets == list(range(len(offsets))), "what applied is, per partition, a prefix"
    assert all(r.closed for r in staged) and not decision.waiting, "once everything is read, nothing waits"
    assert {r for r in records if r.counts is None and r.topic != topic("skipped")} == set(applied)


def test_a_transaction_missing_events_waits_and_names_what_is_missing() -> None:
    seen = [Seen("t1", "db.public.a", 0, 4, 4, 1, 1000), Seen(None, "db.public.a", 0, 5, 5, 1, 1001)]
    ends = [End("t1", {"public.a": 2, "public.b": 1}, TX_TOPIC, 0, 9, 1002)]
    decision = decide(seen, ends, counted=lambda c: True, topic_of=lambda c: f"db.{c}")
    assert decision.cuts == {("db.public.a", 0): 4} and decision.held == {"t1"}
    assert decision.ranges == {}, "the event after the waiting one waits too"
    [waiting] = decision.waiting
    assert (waiting.topic, waiting.partition, waiting.offset, waiting.at) == ("db.public.a", 0, 4, 1000)
    assert waiting.missing == "1 of its 2 events of public.a, 1 of its 1 events of public.b"
    alone = decide(seen[:1], [], counted=lambda c: True, topic_of=lambda c: f"db.{c}")
    assert alone.waiting[0].missing == "its END record"
    only_end = decide([], ends, counted=lambda c: True, topic_of=lambda c: None)
    assert (only_end.waiting[0].topic, only_end.waiting[0].offset) == (TX_TOPIC, 9), "named by its END"
