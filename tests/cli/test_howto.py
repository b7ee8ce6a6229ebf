"""The how-to guides' examples run as a reader follows them (tests/cli/walkthrough.py): their files
written into a fresh folder, their commands and Python programs run in order, printing what the
page shows. A guide that cannot run in the default suite says why here: the Kafka guide runs
against a broker under the ``kafka`` marker, and the commands of guides about schedulers and
clusters are checked against the command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.walkthrough import blocks, command_lines, parse_error, walk

ROOT = Path(__file__).resolve().parents[2]
#: The guides: every page under docs/howto, and the two guides kept beside the explanations.
GUIDES = sorted(
    [str(p.relative_to(ROOT)) for p in (ROOT / "docs" / "howto").glob("*.md")] + ["docs/deploy.md", "docs/modes.md"]
)
#: Guides that run in the default suite.
WALKTHROUGHS = [
    "docs/howto/chombo.md",
    "docs/howto/dataframes.md",
    "docs/howto/debezium-dms.md",
    "docs/howto/files.md",
    "docs/howto/history.md",
    "docs/howto/poison-file.md",
    "docs/howto/rollback.md",
]
#: Guides that run with a Kafka broker: ``python -m pytest -m kafka``. The page's broker address
#: is replaced by the test broker's.
KAFKA = {"docs/howto/kafka.md": "localhost:9092"}
#: Guides whose commands need what the suite does not start (a scheduler, a cluster, a Spark
#: Connect or Thrift server, S3): the ``lakemerge`` command lines they show are parsed by the
#: command line instead (every command and option exists, every argument is given).
CHECKED = {
    "docs/howto/schedulers.md": "a crontab line and an Airflow operator around `lakemerge run`",
    "docs/deploy.md": "a Spark Connect server, a Thrift server and beeline, a cluster, S3",
}
#: Guides without an example to run.
NO_EXAMPLE = {
    "docs/howto/index.md": "the list of guides",
    "docs/modes.md": "write modes explained, their keys named in the text",
}


def test_every_guide_runs_or_says_why_not() -> None:
    listed = [*WALKTHROUGHS, *KAFKA, *CHECKED, *NO_EXAMPLE]
    assert sorted(listed) == GUIDES


@pytest.mark.parametrize("page", WALKTHROUGHS)
def test_the_guide_runs_as_shown(page: str, spark: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    wrong = walk(page, (ROOT / page).read_text(), tmp_path)
    assert wrong == [], "\n".join(wrong)


@pytest.mark.kafka
@pytest.mark.parametrize("page", sorted(KAFKA))
def test_the_kafka_guide_runs_as_shown(
    page: str, spark: object, kafka: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    wrong = walk(page, (ROOT / page).read_text(), tmp_path, replace={KAFKA[page]: kafka})
    assert wrong == [], "\n".join(wrong)


@pytest.mark.parametrize("page", sorted(CHECKED))
def test_the_commands_of_a_guide_that_cannot_run_parse(page: str) -> None:
    found = command_lines((ROOT / page).read_text())
    assert found, f"{page} shows no lakemerge command"
    assert [(line, parse_error(line)) for line in found if parse_error(line)] == []


@pytest.mark.parametrize("page", sorted(NO_EXAMPLE))
def test_a_guide_listed_without_example_has_none(page: str) -> None:
    assert blocks((ROOT / page).read_text()) == [], f"{page} has an example now: run it"


def test_a_command_line_the_command_line_refuses_is_found() -> None:
    page = (
        "```cron\n*/5 * * * * flock -n /tmp/x.lock lakemerge run /etc/sales.toml --jsn >> /var/log/x 2>&1\n```\n"
        "```bash\nspark-submit $(lakemerge conf) --class X\nlakemerge histroy lake/t\n```\n"
    )
    found = command_lines(page)
    assert found == [
        ["lakemerge", "run", "/etc/sales.toml", "--jsn"],
        ["lakemerge", "conf"],
        ["lakemerge", "histroy", "lake/t"],
    ]
    assert [bool(parse_error(line)) for line in found] == [True, True, True]
    assert parse_error(["lakemerge", "run", "/etc/sales.toml", "--json"]) is None


def test_a_walkthrough_that_prints_otherwise_or_fails_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without Spark: a command that fails on its pipeline file, a Python program's output."""
    monkeypatch.chdir(tmp_path)
    page = (
        '```toml title="p.toml"\n[spark]\nmaster = "local[1]"\n```\n\n'
        "```console\n$ lakemerge run p.toml\nnothing to apply\n```\n\n"
        '```python\nprint(open("p.toml").read().split()[0])\n```\n\n```text\n[spark]\n```\n'
    )
    wrong = walk("page.md", page, tmp_path)
    assert wrong[0] == "$ lakemerge run p.toml  (exit 2)" and "the pipeline defines no table" in wrong[1], wrong
    assert len(wrong) == 2, "the Python block printed what the page shows"
    assert walk("page.md", page.replace("nothing to apply", wrong[1]), tmp_path) == []
    wrong = walk("page.md", page.replace('print(open("p.toml")', 'print(open("q.toml")'), tmp_path)
    assert wrong[2] == "page.md, Python block of step 3" and "FileNotFoundError" in wrong[3], wrong
