"""The root by URI: round trips, write-once publish under races, directory markers, storage failures.

The tests taking ``place`` run on a local directory and on a real S3 server
(SeaweedFS on loopback, ``tests/spark/objectstore.py``); the failure tests
need a server to fail against and run on S3 only.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from objectstore import BUCKET, SeaweedS3
from places import Place

from falkirk.spark.errors import AlreadyPublishedError, StorageError
from falkirk.spark.pipeline.store import writeonce
from falkirk.spark.pipeline.store.rootfs import Root
from falkirk.spark.pipeline.store.storage import Storage

RACE_ROUNDS = 50


def test_round_trip(place: Place) -> None:
    """Publish, replace, read, list, walk, size, checksum and delete read back what was written."""
    r = place.root()
    r.publish("m/a.json", b'{"a": 1}')
    r.replace("pipeline.json", b"one")
    r.replace("pipeline.json", b"two")
    r.publish("data/s/x/part-0.parquet", b"0123456789")
    r.publish("data/s/x/sub/part-1.parquet", b"01234")
    assert r.read_bytes("m/a.json") == b'{"a": 1}' and r.read_bytes("pipeline.json") == b"two"
    assert r.exists("m/a.json") and not r.exists("m/b.json") and r.isdir("data/s")
    assert r.listdir("") == ["data", "m", "pipeline.json"] and r.listdir("nowhere") == []
    assert list(r.walk_files("data/s/x")) == [("part-0.parquet", 10), ("sub/part-1.parquet", 5)]
    assert r.size("data") == 15
    assert r.checksum("data/s/x/part-0.parquet") != r.checksum("data/s/x/sub/part-1.parquet")
    with pytest.raises(FileNotFoundError):
        r.read_bytes("m/b.json")
    r.delete("data/s", recursive=True)
    r.delete("m/none.json")
    assert list(r.walk_files("data")) == [] and not r.exists("data/s/x/part-0.parquet")
    assert place.root().read_bytes("pipeline.json") == b"two"  # a second driver sees the same


def test_publish_is_write_once(place: Place) -> None:
    """A second publish of a name is one AlreadyPublishedError (a FileExistsError); the first document stays."""
    r = place.root()
    r.publish("m/a.json", b"first")
    with pytest.raises(AlreadyPublishedError, match=r"m/a\.json is already published") as err:
        place.root().publish("m/a.json", b"second")
    assert isinstance(err.value, FileExistsError) and isinstance(err.value, StorageError)
    assert r.read_bytes("m/a.json") == b"first"


def _racers(place: Place, n: int = 2) -> list[subprocess.Popen[str]]:
    script = Path(__file__).with_name("racer.py")
    procs = [subprocess.Popen([sys.executable, str(script), place.uri, json.dumps(place.options or {}), f"w{i}"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for i in range(n)]
    for p in procs:
        assert p.stdout is not None and "ready" in p.stdout.readline()
    return procs


def test_publish_race_between_two_processes(place: Place) -> None:
    """Two processes publishing the same names at once, round after round (Root.publish, then Storage.put of
    manifests): exactly one wins each name, the stored document is the winner's, intact, and the loser is told."""
    procs = _racers(place)
    reader = place.root()
    outcomes: dict[str, list[str]] = {"publish": [], "put": []}
    try:
        for verb in ("publish", "put"):
            for rnd in range(RACE_ROUNDS):
                arg = f"race/{rnd:03d}.json" if verb == "publish" else str(rnd)
                for p in procs:
                    assert p.stdin is not None
                    p.stdin.write(f"{verb} {arg}\n")
                    p.stdin.flush()
                answers = [json.loads(p.stdout.readline()) for p in procs if p.stdout is not None]
                winners = [f"w{i}" for i, a in enumerate(answers) if a["won"]]
                assert len(winners) == 1, (verb, rnd, answers)
                loser = next(a for a in answers if not a["won"])
                if verb == "publish":
                    assert loser["error"] == "AlreadyPublishedError", loser
                    stored = json.loads(reader.read_bytes(arg))
                    assert stored == {"writer": winners[0], "name": arg}
                else:
                    assert loser["error"] == "StorageError" and "already published with different contents" in loser["message"]
                    assert Storage(reader).get("race", "checkpoint", rnd).extra == {"writer": winners[0]}
                outcomes[verb].append(winners[0])
    finally:
        for p in procs:
            if p.stdin is not None:
                p.stdin.close()
            p.wait(timeout=60)
    print(f"\n{place.kind}: {RACE_ROUNDS} publish rounds won by {sorted(set(outcomes['publish']))}, "
          f"{RACE_ROUNDS} put rounds by {sorted(set(outcomes['put']))}; 0 double successes")


def test_directory_markers_are_not_files(place: Place) -> None:
    """``dir/`` marker objects (pyarrow and Hadoop S3A write them) are neither entries nor data files."""
    place.arrow.create_dir(place.arrow_path("d/empty"))
    place.write("d/full/part-0", b"abc")
    place.arrow.delete_file(place.arrow_path("d/full/part-0"))  # pyarrow leaves a marker for the emptied dir
    place.write("d/kept/part-1", b"xy")
    r = place.root()
    assert r.listdir("d/empty") == [] and r.listdir("d/full") == [] and r.listdir("d/kept") == ["part-1"]
    assert list(r.walk_files("d")) == [("kept/part-1", 2)]


def test_listing_cache_cannot_be_asked_for(s3_server: SeaweedS3) -> None:
    """use_listings_cache=True would hide other writers' files: refused, naming the option."""
    with pytest.raises(StorageError, match="use_listings_cache=True is refused"):
        Root(f"s3a://{BUCKET}/x", storage_options=s3_server.options(use_listings_cache=True))


def test_an_option_the_filesystem_does_not_take_is_named(s3_server: SeaweedS3) -> None:
    """A storage option the connector refuses is a StorageError naming the options, not a TypeError."""
    with pytest.raises(StorageError, match=r"the s3 filesystem refuses storage_options \[.*'retries'.*\]"):
        Root(f"s3a://{BUCKET}/x", storage_options=s3_server.options(retries=2))


def _silent_port() -> tuple[socket.socket, int]:
    """A loopback port that accepts connections and never answers."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    return s, int(s.getsockname()[1])


@pytest.mark.parametrize("failure", ["refused", "timeout", "credentials", "permissions", "bucket"])
def test_storage_failures_name_root_operation_and_cause(s3_server: SeaweedS3, failure: str) -> None:
    """Connection refused, no answer, wrong credentials, missing permissions, a missing bucket: each is a
    StorageError naming the root, the operation and the cause (never a botocore error), and no bucket is made."""
    uri = f"s3a://{BUCKET}/failures"
    silent = None
    if failure == "refused":
        closed, port = _silent_port()
        closed.close()
        expect = f"root {uri}: look up bucket '{BUCKET}' of {uri} failed: EndpointConnectionError"
        make = lambda: Root(uri, storage_options=s3_server.options(endpoint_url=f"http://127.0.0.1:{port}"))  # noqa: E731
    elif failure == "timeout":
        silent, port = _silent_port()
        expect = "failed: no answer within 2 s"
        make = lambda: Root(uri, storage_options=s3_server.options(endpoint_url=f"http://127.0.0.1:{port}"),  # noqa: E731
                            timeout=2)
    elif failure == "credentials":
        expect = f"root {uri}: look up bucket '{BUCKET}' of {uri} failed: PermissionError"
        make = lambda: Root(uri, storage_options=s3_server.options(secret="wrong"))  # noqa: E731
    elif failure == "permissions":
        reader = Root(uri, storage_options=s3_server.options(key=s3_server.READER_KEY, secret=s3_server.READER_SECRET))
        assert reader.listdir("") == []  # reading is allowed
        expect = f"root {uri}: .* {uri}/.*failed: PermissionError: Access Denied"
        make = lambda: reader.publish("m/a.json", b"1")  # noqa: E731
    else:
        uri = "s3a://no-such-bucket-falkirk/p"
        expect = "bucket 'no-such-bucket-falkirk' does not exist \\(falkirk never creates buckets"
        make = lambda: Root(uri, storage_options=s3_server.options())  # noqa: E731
    try:
        with pytest.raises(StorageError, match=expect) as err:
            make()
    finally:
        if silent is not None:
            silent.close()
    assert type(err.value) is StorageError
    assert not Root(f"s3a://{BUCKET}/x", storage_options=s3_server.options()).fs.exists("no-such-bucket-falkirk")


def test_store_that_ignores_conditional_writes_is_refused(s3_server: SeaweedS3, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that accepts a second conditional create (ignores If-None-Match) is refused before publishing."""
    r = Root(f"s3a://{BUCKET}/{uuid.uuid4().hex[:8]}", storage_options=s3_server.options())
    unconditional = r.fs.pipe_file
    monkeypatch.setattr(r.fs, "pipe_file", lambda path, data, mode="overwrite", **kw: unconditional(path, data, **kw))
    monkeypatch.setattr(writeonce, "_WRITE_ONCE_SEEN", set())
    with pytest.raises(StorageError, match=r"accepted a second conditional create \(If-None-Match: \*\).*refuses to run"):
        r.publish("m/a.json", b"1")
    assert r.listdir("") == []  # nothing published, the probe removed


def test_hdfs_publish_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """HDFS through pyarrow has no create-if-absent and its rename replaces: publishing is refused, naming why."""
    r = Root(f"memory://falkirk-tests/{uuid.uuid4().hex}")
    monkeypatch.setattr(r, "protocol", "hdfs")
    with pytest.raises(StorageError, match="cannot publish write-once on HDFS.*refuses to run rather than publish unsafely"):
        r.publish("m/a.json", b"1")


def test_local_filesystem_without_hard_links_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A local filesystem that refuses hard links cannot publish write-once: a StorageError, no file left."""
    r = Root(tmp_path, fsync=False)

    def no_links(src: Any, dst: Any) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    with pytest.raises(StorageError, match="refuses hard links"):
        r.publish("m/a.json", b"1")
    assert list(tmp_path.rglob("*.json")) == [] and list(tmp_path.rglob("*.tmp")) == []


def _fresh_driver(place: Place, cache: Path) -> dict[str, Any]:
    script = Path(__file__).with_name("fresh_driver.py")
    out = subprocess.run([sys.executable, str(script), place.uri, json.dumps(place.options or {})],
                         capture_output=True, text=True, timeout=600, env={**os.environ, "FALKIRK_CACHE": str(cache)},
                         check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    answer: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return answer


def test_metadata_cache_is_rebuilt_in_a_fresh_process(place: Place, tmp_path: Path) -> None:
    """A driver process that has nothing but the root rebuilds the monitor's database from the manifests, and a
    later one rebuilds it again with what other processes published since (a stale cache is never trusted)."""
    from fresh_driver import build

    from falkirk.spark import Manifest

    pipe = build(place.uri, place.options)
    pipe.check_root()
    log, storage = pipe.inputs["events"].log, place.storage()

    def publish(epochs: range, checkpoints: list[int]) -> None:
        for e in epochs:
            log.append([{"user": e, "v": e}], batch=f"e{e}")
            log.cut(e)
            storage.put(Manifest("sink", "output", e))
        for e in checkpoints:
            storage.put(Manifest("cc", "checkpoint", e))

    publish(range(4), [1, 3])
    first = _fresh_driver(place, tmp_path / "cache")
    assert first["available"] == {"events": [3], "cc": [1, 3], "sink": [0, 1, 2, 3]}
    assert first["held"]["cc"][-2:] == ["1", "3"] and first["held"]["sink"][-1] == "3"
    assert Path(first["cache"]).exists() and (place.kind == "local") == Path(first["cache"]).is_relative_to(place.uri)
    publish(range(4, 6), [5])  # another process goes on
    second = _fresh_driver(place, tmp_path / "cache")
    assert second["cache"] == first["cache"]
    assert second["available"] == {"events": [5], "cc": [1, 3, 5], "sink": [0, 1, 2, 3, 4, 5]}
    assert second["held"]["cc"][-3:] == ["1", "3", "5"] and second["held"]["sink"][-1] == "5"


def test_the_s3_example_of_the_storage_docs_runs(s3_server: SeaweedS3, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """docs/storage.md's S3 example (skipped by tests/test_docs.py) runs against the server, credentials and
    endpoint from the environment as the docs say."""
    import re

    text = (Path(__file__).resolve().parents[4] / "docs" / "storage.md").read_text()
    blocks = re.findall(r"test_rootfs\.py[^\n]*-->\n```python\n(.*?)^```", text, re.M | re.S)
    assert len(blocks) == 1
    for name, value in {"AWS_ENDPOINT_URL_S3": s3_server.endpoint, "AWS_ACCESS_KEY_ID": s3_server.KEY,
                        "AWS_SECRET_ACCESS_KEY": s3_server.SECRET}.items():
        monkeypatch.setenv(name, value)
    exec(compile(blocks[0], "docs/storage.md", "exec"), {"__name__": "docs:storage.md"})
    # the segment's manifest and its Parquet data file (docs/storage.md, "Input logs: Parquet segments")
    assert re.fullmatch(r"\['000000000000@b0\.[0-9a-f]+-0\.parquet', '000000000000@b0\.json'\]\n",
                        capsys.readouterr().out)


def test_the_durable_directories_remembered_stay_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every output epoch is a new directory whose entry a local root with ``fsync`` flushes; the set of
    directories it remembers as durable stays under its limit over a long run, and a forgotten one has its
    parent flushed again when it is synced next."""
    from falkirk.spark.pipeline.store.localdisk import DurableDirs

    monkeypatch.setattr(DurableDirs, "LIMIT", 16)
    flushed: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        flushed.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    root = Root(tmp_path, fsync=True)
    for e in range(100):
        root.makedirs(f"output/report/epoch={e}")
        root.sync_dir(f"output/report/epoch={e}", created=True)
        assert len(root._dirs.done) <= DurableDirs.LIMIT
    monkeypatch.setattr(os, "fsync", fsync)
    root.sync_dir("output/report/epoch=0")  # forgotten long ago: its entry in output/report is flushed again
    assert str(tmp_path / "output" / "report") in flushed
    flushed.clear()
    root.sync_dir("output/report/epoch=99")  # remembered: only itself
    assert flushed == [str(tmp_path / "output" / "report" / "epoch=99")]
