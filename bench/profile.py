"""What the driver JVM does during warm lakemerge batches, sampled by Java Flight Recorder:
``python -m bench.profile [MODE] [COUNT] [BATCHES] [SF]``.

Creates the harness's clustered table from ``/tmp/lakemerge-bench/sfSF`` (``SF`` default 1; run ``python -m
bench`` once to generate it), applies ``COUNT`` (default 6) batches named ``BATCHES`` (default ``uniform-0.1``) in
``MODE`` (default ``log``), records the driver JVM with Flight Recorder from the third batch on (a 2 ms sampling
period, stacks up to 1,024 frames; ``jcmd`` and ``jfr`` from the JDK), and prints, for the thread that runs the
batch's calls from Python, the share of its samples in each part of Spark and Delta (a sample counts in the first
part its stack shows, in the order listed) and the JVM methods Python called that the samples fall under.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import tempfile
import time

#: Parts of a stack, by a frame's class and method name, in the order a sample is counted.
PARTS = (
    ("Delta: rebuild a version's state", ("Snapshot.stateReconstruction", "Snapshot.cachedState")),
    ("Delta: scan planning (file skipping)", ("PrepareDeltaScan",)),
    ("py4j: JVM class lookups", ("ReflectionCommand.getUnknownMember",)),
    ("Spark: closure cleaning", ("ClosureCleaner",)),
    ("Spark: code generation", ("CodeGenerator", "WholeStageCodegenExec.doCodeGen")),
    ("Spark: analyzer", ("Analyzer.execute", "CheckAnalysis")),
    ("Spark: optimizer", ("Optimizer", "RuleExecutor.execute")),
    ("Spark: physical planning", ("QueryPlanner.plan", "prepareForExecution")),
    ("Delta: commit", ("OptimisticTransactionImpl.commit",)),
    ("Delta: snapshot update", ("SnapshotManagement",)),
    ("Spark: job submission", ("SparkContext.runJob", "DAGScheduler")),
)


def main(argv: list[str]) -> int:
    defaults = ["log", "6", "uniform-0.1", "1"]
    mode, count, kind, sf = (argv + defaults[len(argv) :])[:4]
    from bench import peers
    from lakemerge import api

    root = f"/tmp/lakemerge-bench/sf{float(sf):g}"
    batches = [f"{root}/batch-{kind}-{n}.parquet" for n in range(1, int(count) + 1)]
    options = "-XX:+UseParallelGC -XX:FlightRecorderOptions:stackdepth=1024"
    spark = peers.session(extra={"spark.driver.extraJavaOptions": options})
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    pid = str(jvm.java.lang.ProcessHandle.current().pid())
    work = tempfile.mkdtemp(prefix="lakemerge-profile-")
    settings, recording = os.path.join(work, "fast.jfc"), os.path.join(work, "batches.jfr")
    subprocess.run(
        ["jfr", "configure", "--input", "profile", "jdk.ExecutionSample#period=2ms", "--output", settings],
        check=True,
        capture_output=True,
    )
    path = "/tmp/lakemerge-bench/profile-table"
    peers.clean(path)
    peers._create_delta(spark, f"{root}/orders.parquet", path, "clustered")
    table = peers.lakemerge_table(path, "clustered", mode, batches[0])
    for number, batch in enumerate(batches, start=1):
        if number == 3:
            start = ["jcmd", pid, "JFR.start", "name=lakemerge", f"settings={settings}", f"filename={recording}"]
            subprocess.run(start, check=True, capture_output=True)
        began = time.perf_counter()
        api.apply_table(table, inputs=[batch], spark=spark)
        print(f"batch {number}: {time.perf_counter() - began:.2f} s", flush=True)
    subprocess.run(["jcmd", pid, "JFR.stop", "name=lakemerge"], check=True, capture_output=True)
    spark.stop()
    peers.clean(path)
    printed = subprocess.run(
        ["jfr", "print", "--stack-depth", "1024", "--events", "jdk.ExecutionSample", "--json", recording],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    for line in summary(json.loads(printed)["recording"]["events"]):
        print(line)
    return 0


def summary(events: list[dict]) -> list[str]:  # type: ignore[type-arg]
    """Lines of the report: per part of Spark and Delta, and per JVM method called from Python."""
    stacks: dict[str, list[list[str]]] = collections.defaultdict(list)
    for event in events:
        thread = event["values"]["sampledThread"].get("javaName") or "?"
        frames = event["values"]["stackTrace"]["frames"]
        stacks[thread].append([f"{f['method']['type']['name'].split('/')[-1]}.{f['method']['name']}" for f in frames])
    # The thread that serves Python's calls: the one whose stacks start in py4j's connection loop.
    served = {t: sum(any("ClientServerConnection" in n for n in s) for s in ss) for t, ss in stacks.items()}
    driver = max(served, key=lambda t: served[t])
    samples = stacks[driver]
    parts: collections.Counter[str] = collections.Counter()
    called: collections.Counter[str] = collections.Counter()
    for names in samples:
        joined = "|".join(names)
        parts[next((label for label, marks in PARTS if any(m in joined for m in marks)), "other")] += 1
        called[_called(names)] += 1
    total = len(samples)
    lines = [f"thread {driver}: {total} samples"]
    lines += [f"  {n / total:6.1%}  {label}" for label, n in parts.most_common()]
    lines.append("JVM methods called from Python (the samples under each):")
    lines += [f"  {n / total:6.1%}  {name}" for name, n in called.most_common(12)]
    return lines


def _called(names: list[str]) -> str:
    """The method py4j invoked for a sample's stack (leaf first): the frame just inside the
    reflective call, or the py4j command when it is not a method call."""
    reflective = ("Method.invoke", "DelegatingMethodAccessorImpl.invoke", "NativeMethodAccessorImpl.invoke")
    outer = [i for i, n in enumerate(names) if n == "Method.invoke"]
    if not outer:
        inside = [n for n in names if n.startswith(("ReflectionCommand.", "CallCommand.", "ConstructorCommand."))]
        return f"(py4j {inside[-1]})" if inside else "(no py4j call)"
    i = outer[-1] - 1
    while i >= 0 and (names[i] in reflective or names[i].startswith(("NativeMethodAccessorImpl", "GeneratedMethod"))):
        i -= 1
    return names[i] if i >= 0 else "?"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
