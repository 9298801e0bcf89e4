"""What falkirk knows about each fsspec connector: its options, its failures, its conditional create.

:class:`~falkirk.spark.pipeline.store.rootfs.Root` is the one user of this
module; it exists so that the root's semantics (``rootfs``) are not buried
under the stores' dialects.

* :func:`connector_options`: the options a root opens its filesystem with —
  the URI's own (an Azure account from ``abfss://c@account…``), listing cache
  off on object stores, bounded retries on S3 — under the user's
  ``storage_options``, which win.
* :func:`store_errors`: what a storage failure can be raised as (``OSError``
  and the loaded connectors' own exception roots).
* :func:`refusal`: how a conditional create said "that name is taken" —
  every server says it its own way.
* :func:`storage_option`: one ``KEY=VALUE`` of a command line (the value
  parsed as JSON when it is JSON, else a string).

>>> refusal(FileExistsError("x")), refusal(OSError(22, "At least one of the pre-conditions you specified did not hold"))
('exists', 'exists')
>>> refusal(ConnectionRefusedError(111, "Connection refused")) is None
True
>>> storage_option("endpoint_url=http://127.0.0.1:8333"), storage_option('client_kwargs={"region_name": "eu-west-1"}')
(('endpoint_url', 'http://127.0.0.1:8333'), ('client_kwargs', {'region_name': 'eu-west-1'}))
"""

from __future__ import annotations

import errno
import json
import os
import sys
from collections.abc import Mapping
from typing import Any

__all__ = ["CONDITIONAL_CREATE", "connector_options", "refusal", "storage_option", "store_errors"]

#: Object stores: their conditional create, as the store calls it (what :meth:`Root.publish` relies on).
CONDITIONAL_CREATE = {"s3": "If-None-Match: *", "gcs": "ifGenerationMatch=0", "abfs": "If-None-Match: *"}

#: botocore's default ("legacy", 5 attempts) takes ~12-20 s to give up on a dead endpoint; three standard
#: attempts ~4 s. Used unless ``storage_options["config_kwargs"]["retries"]`` or
#: ``AWS_MAX_ATTEMPTS``/``AWS_RETRY_MODE`` say.
S3_RETRIES = {"max_attempts": 3, "mode": "standard"}


def connector_options(protocol: str, cls: Any, uri: str | None, user: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments ``fsspec.filesystem(protocol, ...)`` gets for a root at ``uri`` (``None``: a
    plain path)."""
    options: dict[str, Any] = dict(cls._get_kwargs_from_urls(uri)) if uri else {}
    mine = dict(user)
    if protocol in CONDITIONAL_CREATE:
        options["use_listings_cache"] = False
    if protocol == "s3" and not {"AWS_MAX_ATTEMPTS", "AWS_RETRY_MODE"} & set(os.environ):
        config = dict(mine.get("config_kwargs") or {})
        config.setdefault("retries", dict(S3_RETRIES))
        mine["config_kwargs"] = config
    return {**options, **mine}


def store_errors() -> tuple[type[BaseException], ...]:
    """What a storage failure can be raised as: ``OSError``/``ValueError`` and the loaded connectors' own
    errors."""
    found: list[type[BaseException]] = [OSError, ValueError]
    for module, name in (
        ("botocore.exceptions", "BotoCoreError"),
        ("botocore.exceptions", "ClientError"),
        ("aiohttp", "ClientError"),
        ("google.auth.exceptions", "GoogleAuthError"),
        ("azure.core.exceptions", "AzureError"),
    ):
        cls = getattr(sys.modules.get(module), name, None)
        if isinstance(cls, type) and issubclass(cls, BaseException):
            found.append(cls)
    return tuple(found)


def refusal(exc: BaseException) -> str | None:
    """How a conditional create was refused: ``"exists"`` (the name is taken), ``"conflict"`` (retry), or
    ``None``.

    Walks the exception and its causes: ``FileExistsError`` (s3fs on AWS and
    moto, gcsfs, adlfs), S3 ``412 PreconditionFailed`` without the
    ``Condition`` element (SeaweedFS: s3fs raises ``OSError(EINVAL)``), an
    HTTP 412 of any client, and S3's ``409 ConditionalRequestConflict``
    (a concurrent conditional write in flight: AWS says retry).
    """
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return None
        if isinstance(seen, FileExistsError):
            return "exists"
        response = getattr(seen, "response", None)
        error = response.get("Error", {}) if isinstance(response, dict) else {}
        status = (
            response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if isinstance(response, dict)
            else getattr(seen, "status_code", None) or getattr(seen, "status", None)
        )
        if error.get("Code") == "ConditionalRequestConflict" or status == 409 and error.get("Code") is None:
            return "conflict"
        if error.get("Code") == "PreconditionFailed" or status == 412:
            return "exists"
        if isinstance(seen, OSError) and seen.errno == errno.EINVAL and "pre-condition" in str(seen):
            return "exists"
        seen = seen.__cause__ or seen.__context__
    return None


def storage_option(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` as ``(key, value)``; the value is JSON (``false``, ``3``, ``{...}``) or else the plain
    string."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"storage option {text!r} is not KEY=VALUE")
    try:
        return key.strip(), json.loads(value)
    except ValueError:
        return key.strip(), value
