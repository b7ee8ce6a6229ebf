"""Paths spelled as Hadoop spells them, and Hadoop's glob patterns, without Hadoop: the same
strings as Hadoop's own ``Path`` and ``GlobPattern`` (compared in a classic session's JVM)."""

from __future__ import annotations

from typing import Any

import pytest

from lakemerge.storage import globs, paths

#: Spellings of paths, each with its own trouble: schemes, authorities, slashes, dots, characters a
#: URI quotes or keeps, letters beyond ASCII.
SPELLINGS = (
    "file:/in/a.csv",
    "file:///in//a/",
    "/in/./x/../a b.csv",
    "/in/x/..",
    "s3a://bucket",
    "s3a://bucket/",
    "s3a://bucket/a//b/",
    "hdfs://nn:8020/lake/t",
    "file:/in/d [1] %25#/o[2]{a,b}*?\\ %20#ü日.csv",
    "file:/in/a b+c=d;e@f$g&h,i~!'()*.csv",
    "file:/in/2024-01-01T10:00:00.csv",
    "file:/in/tab\there\u00a0nbsp\u2028line",
    "file:/in/заказ_日本.csv",
    'file:/in/q"<>^`|.csv',
)


def test_split_and_spell_as_hadoop_does() -> None:
    assert paths.split("s3a://bucket/k/x") == ("s3a", "bucket", "/k/x")
    assert paths.split("/in/a:b.csv") == (None, None, "/in/a:b.csv"), "a ':' after a '/' is no scheme"
    assert paths.split("file:///in") == ("file", "", "/in")
    assert paths.spelled("file:///in//a/") == "file:/in/a"
    assert paths.spelled("/in/./x/../a") == "/in/a"
    assert paths.as_uri("file:/in/a b%.csv") == "file:/in/a%20b%25.csv"
    assert paths.as_uri("file:/in/ü日 #.csv") == "file:/in/ü日%20%23.csv"
    assert paths.relative("s3a://b/in/a/x.csv", "s3a://b/in") == "a/x.csv"
    assert paths.relative("s3a://b/inside/x.csv", "s3a://b/in") is None
    assert paths.scheme("/x") == "file" and paths.scheme("S3A://b/x") == "s3a"
    assert paths.is_object_store("gs://b/x") and not paths.is_object_store("hdfs://nn/x")


@pytest.mark.classic
@pytest.mark.parametrize("path", SPELLINGS)
def test_spellings_are_hadoop_s(spark: Any, path: str) -> None:
    from lakemerge.spark.jvm import jclass

    hpath = jclass(spark, "org.apache.hadoop.fs.Path")(path)
    assert paths.spelled(path) == str(hpath.toString())
    assert paths.as_uri(path) == str(hpath.toUri().toString())


#: Patterns and names that each one must (True) or must not (False) match, as Hadoop's does.
MATCHES = {
    "*.csv": {"a.csv": True, ".a.csv": True, "a.csv.gz": False, "a/b.csv": True},
    "o?.csv": {"o1.csv": True, "o.csv": False, "o12.csv": False},
    "o[1-3].csv": {"o2.csv": True, "o4.csv": False},
    "o[!1].csv": {"o2.csv": True, "o1.csv": False},
    "o[^1].csv": {"o2.csv": True, "o1.csv": False},
    "{a,b}*": {"a1": True, "b": True, "c": False},
    "{a,{b,c}d}": {"a": True, "bd": True, "cd": True, "b": False},
    "o\\[2\\]*.csv": {"o[2].csv": True, "o2.csv": False, "o[2]x.csv": True},
    "x$(y)|z+.*": {"x$(y)|z+.": True, "x$(y)|z+.1": True, "xy": False},
    "^a,b}*": {"^a,b}": True, "^a,b}x": True, "a,b}": False},
    "a\\*b*": {"a*b": True, "a*bc": True, "axb": False},
}


@pytest.mark.parametrize("pattern", sorted(MATCHES))
def test_a_component_matches_as_hadoop_s_glob_pattern_does(pattern: str) -> None:
    regex = globs.compiled(pattern)
    assert regex is not None
    for name, matched in MATCHES[pattern].items():
        assert bool(regex.fullmatch(name)) is matched, name


@pytest.mark.classic
@pytest.mark.parametrize("pattern", sorted(MATCHES))
def test_components_compile_as_hadoop_s(spark: Any, pattern: str) -> None:
    from lakemerge.spark.jvm import jclass

    hadoop = jclass(spark, "org.apache.hadoop.fs.GlobPattern")(pattern)
    for name in MATCHES[pattern]:
        assert bool(globs.compiled(pattern).fullmatch(name)) is bool(hadoop.matches(name)), name  # type: ignore[union-attr]


def test_patterns_and_names() -> None:
    assert globs.compiled("plain.csv") is None and globs.compiled("o\\[2\\]") is None, "no wildcard: a name"
    assert globs.unescaped("o\\[2\\]\\\\") == "o[2]\\"
    assert globs.expand("in/{a/x,b}/*.csv") == ["in/a/x/*.csv", "in/b/*.csv"]
    assert globs.expand("in/{a,b}/*.csv") == ["in/{a,b}/*.csv"], "a group without '/' stays one pattern"
    assert globs.expand("in/{a/{x,y},b/c}") == ["in/a/{x,y}", "in/b/c"]
    for bad, reason in (("o[1.csv", "Unclosed character class"), ("{a,b", "Unclosed group"), ("a*\\", "Missing")):
        with pytest.raises(globs.PatternError, match=reason):
            globs.compiled(bad)
    assert globs.literal("file:/in/o[2]{a}*?\\ #%.csv") == "file:/in/o\\[2\\]\\{a\\}\\*\\?\\\\ #%.csv"
