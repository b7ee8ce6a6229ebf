"""The user's settings file gives every command its Spark settings; a pipeline's own ``[spark]``
is laid over it and the command line over both. Each mistake in it is one line naming the file
and the key."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from lakemerge.cli.app import app
from lakemerge.config.spark import SparkSettings
from lakemerge.config.user import layered, user_settings
from lakemerge.errors import ConfigError

runner = CliRunner()


@pytest.fixture
def settings_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    file = tmp_path / "config.toml"
    monkeypatch.setenv("LAKEMERGE_CONFIG", str(file))
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    return file


def test_without_a_settings_file_a_session_has_the_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LAKEMERGE_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "nothing-here"))
    assert user_settings() == SparkSettings()


def test_the_settings_file_in_the_users_configuration_folder_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LAKEMERGE_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    (tmp_path / "lakemerge").mkdir()
    (tmp_path / "lakemerge" / "config.toml").write_text('[spark]\nmaster = "local[1]"\n')
    assert user_settings().master == "local[1]"


def test_a_pipeline_is_laid_over_the_users_settings_and_the_command_line_over_both(settings_file: Path) -> None:
    settings_file.write_text(
        "[spark]\n"
        'master = "local[1]"\n'
        'packages = ["g:user:1"]\n'
        'conf = { "spark.hadoop.fs.s3a.endpoint" = "http://127.0.0.1:9", "spark.sql.shuffle.partitions" = "3" }\n'
    )
    own = SparkSettings(packages=("g:own:1",), conf={"spark.sql.shuffle.partitions": "5"})
    merged = layered(own)
    assert merged.master == "local[1]"  # (not given by the pipeline: the user's)
    assert merged.packages == ("g:user:1", "g:own:1")
    assert merged.conf == {"spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9", "spark.sql.shuffle.partitions": "5"}
    assert layered(own, master="local[2]").master == "local[2]"
    over = layered(own, remote="sc://127.0.0.1:15002")
    assert over.remote == "sc://127.0.0.1:15002" and over.conf == merged.conf


def test_a_master_on_the_command_line_leaves_the_users_server_alone_only_when_a_remote_is_given_too(
    settings_file: Path,
) -> None:
    settings_file.write_text('[spark]\nremote = "sc://127.0.0.1:15002"\n')
    assert layered(None).remote == "sc://127.0.0.1:15002"
    assert layered(None, master="local[1]").remote is None
    assert layered(None, master="local[1]", remote="sc://127.0.0.1:1").remote == "sc://127.0.0.1:1"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, "settings file does not exist"),
        ("[spark\n", "not valid TOML"),
        ('[tables.t]\npath = "x"\n', "key 'tables': a settings file holds a [spark] section only"),
        ('[spark]\nmastr = "local[1]"\n', "spark.mastr"),
        ('[spark]\nremote = "http://127.0.0.1:15002"\n', "is not a Spark Connect URL"),
    ],
)
def test_each_mistake_in_the_settings_file_is_one_line_naming_it(
    settings_file: Path, text: str | None, expected: str
) -> None:
    if text is not None:
        settings_file.write_text(text)
    with pytest.raises(ConfigError) as caught:
        user_settings()
    message = str(caught.value)
    assert expected in message and str(settings_file) in message and "\n" not in message


def test_a_command_without_a_pipeline_reports_a_mistake_in_the_settings_file_as_a_configuration_error(
    settings_file: Path, tmp_path: Path
) -> None:
    settings_file.write_text("[spark]\nmaster = 3\n")
    result = runner.invoke(app, ["history", str(tmp_path / "table")])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and str(settings_file) in lines[0]
    assert "spark.master" in lines[0]
