"""What falkirk knows about each connector: refusals of a conditional create, default options, failures.

The servers' own answers are tested on a real S3 server in test_rootfs.py;
here, the shapes other stores and clients give them (GCS, Azure, AWS's 409),
which no server on this machine produces.
"""

from __future__ import annotations

import errno
import uuid
from typing import Any

import pytest

from falkirk.spark.errors import AlreadyPublishedError, StorageError
from falkirk.spark.pipeline.store.connectors import connector_options, refusal, storage_option
from falkirk.spark.pipeline.store.rootfs import Root


def _client_error(code: str, status: int) -> Exception:
    from botocore.exceptions import ClientError

    return ClientError({"Error": {"Code": code, "Message": code}, "ResponseMetadata": {"HTTPStatusCode": status}},
                       "PutObject")


class _HttpError(Exception):
    """The shape of azure.core's HttpResponseError: a status code, no S3 response."""

    def __init__(self, status_code: int) -> None:
        super().__init__(f"HTTP {status_code}")
        self.status_code = status_code


def test_every_way_of_saying_the_name_is_taken_is_one_answer() -> None:
    """FileExistsError (s3fs on AWS, gcsfs, adlfs), S3's 412 with or without its Condition element, an HTTP 412
    of another client, and the same behind a wrapper are "exists"; S3's 409 is "conflict"; the rest None."""
    wrapped = OSError(errno.EIO, "put failed")
    wrapped.__cause__ = _client_error("PreconditionFailed", 412)
    assert refusal(FileExistsError("gs://b/x")) == "exists"
    assert refusal(OSError(errno.EINVAL, "At least one of the pre-conditions you specified did not hold")) == "exists"
    assert refusal(_client_error("PreconditionFailed", 412)) == "exists"
    assert refusal(wrapped) == "exists"
    assert refusal(_HttpError(412)) == "exists"
    assert refusal(_client_error("ConditionalRequestConflict", 409)) == "conflict"
    assert refusal(_client_error("AccessDenied", 403)) is None
    assert refusal(OSError(errno.EINVAL, "The specified bucket is not valid.")) is None
    assert refusal(ConnectionRefusedError(errno.ECONNREFUSED, "refused")) is None


def test_a_conflicting_conditional_write_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    """S3's 409 ConditionalRequestConflict (another conditional write in flight) is retried; the retry's 412
    is "already published"; a conflict that persists is a StorageError after three attempts."""
    r = Root(f"memory://falkirk-tests/{uuid.uuid4().hex}")
    answers: list[Exception | None] = [_client_error("ConditionalRequestConflict", 409), None]
    calls: list[str] = []

    def pipe_file(path: str, data: bytes, **kwargs: Any) -> None:
        calls.append(kwargs.get("mode", "overwrite"))
        answer = answers.pop(0) if answers else _client_error("ConditionalRequestConflict", 409)
        if answer is not None:
            raise answer

    monkeypatch.setattr(r.fs, "pipe_file", pipe_file)
    r.publish("m/a.json", b"1")
    assert calls == ["create", "create"]
    answers[:] = [_client_error("ConditionalRequestConflict", 409), _client_error("PreconditionFailed", 412)]
    with pytest.raises(AlreadyPublishedError):
        r.publish("m/b.json", b"1")
    calls.clear()
    with pytest.raises(StorageError, match="publish .*m/c.json failed: ClientError.*ConditionalRequestConflict"):
        r.publish("m/c.json", b"1")
    assert len(calls) == 3


def test_default_options_and_the_users(monkeypatch: pytest.MonkeyPatch) -> None:
    """Object stores: listing cache off, S3 three standard attempts; the user's options win, and AWS_MAX_ATTEMPTS
    leaves the retries to botocore's own configuration."""
    monkeypatch.delenv("AWS_MAX_ATTEMPTS", raising=False)
    monkeypatch.delenv("AWS_RETRY_MODE", raising=False)

    class Plain:
        @staticmethod
        def _get_kwargs_from_urls(uri: str) -> dict[str, Any]:
            return {"from_url": uri}

    s3 = connector_options("s3", Plain, "s3://b/p", {"endpoint_url": "http://e", "config_kwargs": {"read_timeout": 3}})
    assert s3 == {"from_url": "s3://b/p", "use_listings_cache": False, "endpoint_url": "http://e",
                  "config_kwargs": {"read_timeout": 3, "retries": {"max_attempts": 3, "mode": "standard"}}}
    mine = connector_options("s3", Plain, "s3://b/p", {"config_kwargs": {"retries": {"max_attempts": 7}}})
    assert mine["config_kwargs"] == {"retries": {"max_attempts": 7}}
    assert connector_options("gcs", Plain, "gcs://b/p", {"project": "x"}) == {
        "from_url": "gcs://b/p", "use_listings_cache": False, "project": "x"}
    assert connector_options("file", Plain, None, {}) == {}
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    assert "config_kwargs" not in connector_options("s3", Plain, "s3://b/p", {})


def test_command_line_storage_options() -> None:
    """KEY=VALUE: JSON values parsed, anything else a string; no '=' is an error naming the option."""
    assert storage_option("use_ssl=false") == ("use_ssl", False)
    assert storage_option("key=AKIA=x") == ("key", "AKIA=x")
    with pytest.raises(ValueError, match="'endpoint' is not KEY=VALUE"):
        storage_option("endpoint")
