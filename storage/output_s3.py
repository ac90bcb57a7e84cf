"""The S3 output store (boto3): any S3-compatible server, credentials by boto3's usual chain.

Objects (the contract: ``raftsched.cluster.executor.ports.OutputStore``):

    s3://<bucket>/<prefix>/<job_id>/<run_id>/attempt-<n>-token-<t>.log
    s3://<bucket>/<prefix>/<job_id>/<run_id>/attempt-<n>-token-<t>.result
    s3://<bucket>/<prefix>/<job_id>/<run_id>/attempt-<n>-token-<t>.log.part-<offset>

The ``.part-`` objects are a running attempt's live output
(``raftsched.cluster.domain.live_output``): S3 has no append, so each ship is one
small object named by its byte offset, and the reader lists and concatenates
them (a reader that already has bytes up to an offset lists only the parts
from there: ``StartAfter``). Once the whole log is stored the executor
deletes the parts it shipped (``delete_objects``): the bucket keeps one copy.

A log up to ``part_size`` bytes is one ``put_object``; a larger one is
streamed from its spool file in a multipart upload of ``part_size`` parts
(``create_multipart_upload`` / ``upload_part`` / ``complete_multipart_upload``),
so at most one part is in memory; a failed upload is aborted so no parts are
left behind. botocore retries each call a little; the executor retries a
failed ``put`` as a whole with backoff (``raftsched.cluster.executor.worker``).

Errors become ``OutputStoreError`` (writing) or ``OutputMissing`` (reading)
with a message naming the bucket, the endpoint and what to fix.
"""

from __future__ import annotations

import re
import threading
from typing import Any

from raftsched.cluster.domain.live_output import MAX_PART_OFFSET, LogSlice, Part, parse_part, part_name
from raftsched.cluster.domain.output import OutputKey, OutputMissing, OutputStoreError, is_log_name, result_name
from raftsched.cluster.executor.ports import LogSource, as_log_source
from raftsched.storage.log_slices import live_slice, window_slice
from raftsched.storage.s3_client import make_s3_client

PART_SIZE = 8 * 1024 * 1024
MIN_PART_SIZE = 5 * 1024 * 1024  # S3's floor for every part but the last

_NOT_RETRYABLE = {
    "301",
    "400",
    "403",
    "404",
    "NoSuchBucket",
    "AccessDenied",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "AllAccessDisabled",
    "InvalidBucketName",
    "AuthorizationHeaderMalformed",
    "PermanentRedirect",
    "InvalidArgument",
    "EntityTooLarge",
    "AccountProblem",
    "InvalidToken",
    "ExpiredToken",
    "InvalidObjectState",
}
_META_SAFE = re.compile(r"[^A-Za-z0-9_.@:-]")


def _error_code(exc: BaseException) -> tuple[str, int]:
    response = getattr(exc, "response", None) or {}
    code = str(response.get("Error", {}).get("Code", ""))
    status = int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    return code, status


def describe_error(exc: BaseException, where: str) -> tuple[str, bool]:
    """(a message a person can act on, whether trying again may help) for a boto3/botocore failure."""
    from botocore import exceptions as bx

    if isinstance(exc, (bx.NoCredentialsError, bx.PartialCredentialsError)):
        return (
            f"no usable AWS credentials for {where}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
            "AWS_PROFILE, or run with an instance/task role",
            False,
        )
    if isinstance(exc, (bx.EndpointConnectionError, bx.ConnectTimeoutError, bx.ReadTimeoutError, bx.ConnectionClosedError)):
        return f"{where} is unreachable: {exc}", True
    if isinstance(exc, bx.ClientError):
        code, status = _error_code(exc)
        retryable = status >= 500 or status in (408, 429) or code not in _NOT_RETRYABLE and status < 400
        hint = {
            "NoSuchBucket": "the bucket does not exist: create it or fix [logs] bucket / --s3-bucket",
            "404": "the bucket does not exist: create it or fix [logs] bucket / --s3-bucket",
            "InvalidAccessKeyId": "the access key is not known there: check AWS_ACCESS_KEY_ID or the profile",
            "SignatureDoesNotMatch": "the secret key does not match the access key: check AWS_SECRET_ACCESS_KEY",
            "AccessDenied": "these credentials may not use the bucket: grant s3:ListBucket, s3:PutObject, "
            "s3:GetObject and s3:AbortMultipartUpload on it",
            "403": "access denied: check the credentials and the bucket policy",
            "301": "the bucket is in another region: set [logs] region / --s3-region",
            "PermanentRedirect": "the bucket is in another region: set [logs] region / --s3-region",
            "AuthorizationHeaderMalformed": "the bucket is in another region: set [logs] region / --s3-region",
            "InvalidObjectState": "the object is archived (e.g. moved to GLACIER by a lifecycle rule): restore it to read it",
        }.get(code, "")
        text = f"{where} answered {code or status}" + (f" ({hint})" if hint else f": {exc}")
        return text, retryable
    if isinstance(exc, bx.BotoCoreError):
        return f"{where} failed: {exc}", True
    return f"{where} failed: {type(exc).__name__}: {exc}", True


class S3OutputStore:
    """Writes run output to ``s3://bucket/prefix/...``; ``check()`` is a ``head_bucket``."""

    def __init__(
        self,
        bucket: str,
        prefix: str = "raftsched",
        region: str = "",
        endpoint_url: str = "",
        part_size: int = PART_SIZE,
        client: Any = None,
    ) -> None:
        if not bucket:
            raise ValueError("an S3 output store needs a bucket")
        if part_size < MIN_PART_SIZE:
            raise ValueError(f"part_size must be at least {MIN_PART_SIZE} bytes (S3's minimum part size)")
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.region = region
        self.endpoint_url = endpoint_url
        self.part_size = part_size
        self._client = client or make_s3_client(region, endpoint_url, 5.0, 60.0, 3)

    @property
    def _where(self) -> str:
        return f"bucket {self.bucket!r} at {self.endpoint_url or 'AWS S3'}"

    def describe(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" + (f" at {self.endpoint_url}" if self.endpoint_url else "")

    def object_key(self, key: OutputKey, suffix: str = ".log") -> str:
        return "/".join(p for p in (self.prefix, key.relpath() + suffix) if p)

    def uri_for(self, key: OutputKey) -> str:
        return f"s3://{self.bucket}/{self.object_key(key)}"

    def check(self) -> None:
        try:
            self._client.head_bucket(Bucket=self.bucket)
        except Exception as exc:  # noqa: BLE001 - mapped to a message below
            code, _ = _error_code(exc)
            if code == "403":  # HEAD answers carry no body: ask once more for the reason
                try:
                    self._client.list_objects_v2(Bucket=self.bucket, MaxKeys=1)
                except Exception as detail:  # noqa: BLE001
                    exc = detail
            text, retryable = describe_error(exc, self._where)
            raise OutputStoreError(f"cannot use S3 output store {self.bucket!r}: {text}", retryable) from exc

    def put(self, key: OutputKey, log: bytes | LogSource, result: bytes) -> str:
        source = as_log_source(log)
        meta = {
            "raftsched-job-id": _META_SAFE.sub("_", key.job_id),
            "raftsched-run-id": _META_SAFE.sub("_", key.run_id),
            "raftsched-attempt": str(key.attempt),
            "raftsched-fencing-token": str(key.fencing_token),
        }
        log_key, result_key = self.object_key(key, ".log"), self.object_key(key, ".result")
        try:
            self._client.put_object(Bucket=self.bucket, Key=result_key, Body=bytes(result), Metadata=meta)
            with source.open_reader() as reader:
                if source.size <= self.part_size:
                    body = reader.read()
                    self._client.put_object(Bucket=self.bucket, Key=log_key, Body=body, ContentType="text/plain", Metadata=meta)
                else:
                    self._multipart(log_key, reader, meta)
        except OutputStoreError:
            raise
        except Exception as exc:  # noqa: BLE001 - every failure becomes an OutputStoreError
            text, retryable = describe_error(exc, self._where)
            raise OutputStoreError(text, retryable) from exc
        return f"s3://{self.bucket}/{log_key}"

    def put_part(self, key: OutputKey, offset: int, data: bytes, held: bool = False) -> None:
        try:
            self._client.put_object(Bucket=self.bucket, Key=part_name(self.object_key(key), offset, held), Body=bytes(data))
        except Exception as exc:  # noqa: BLE001 - every failure becomes an OutputStoreError
            text, retryable = describe_error(exc, self._where)
            raise OutputStoreError(text, retryable) from exc

    def delete_parts(self, key: OutputKey, parts: list[tuple[int, bool]]) -> None:
        names = [{"Key": part_name(self.object_key(key), offset, held)} for offset, held in parts]
        try:
            for i in range(0, len(names), 1000):  # delete_objects takes up to 1,000 keys
                self._client.delete_objects(Bucket=self.bucket, Delete={"Objects": names[i : i + 1000], "Quiet": True})
        except Exception as exc:  # noqa: BLE001
            text, retryable = describe_error(exc, self._where)
            raise OutputStoreError(text, retryable) from exc

    def _multipart(self, log_key: str, reader: Any, meta: dict[str, str]) -> None:
        c, bucket = self._client, self.bucket
        upload_id = c.create_multipart_upload(Bucket=bucket, Key=log_key, ContentType="text/plain", Metadata=meta)["UploadId"]
        try:
            parts: list[dict[str, Any]] = []
            while True:
                chunk = reader.read(self.part_size)
                if not chunk and parts:
                    break
                number = len(parts) + 1
                etag = c.upload_part(Bucket=bucket, Key=log_key, UploadId=upload_id, PartNumber=number, Body=chunk)["ETag"]
                parts.append({"PartNumber": number, "ETag": etag})
                del chunk
                if number >= 10_000:
                    raise OutputStoreError(f"log for s3://{bucket}/{log_key} needs over 10,000 parts: raise the part size", False)
            c.complete_multipart_upload(Bucket=bucket, Key=log_key, UploadId=upload_id, MultipartUpload={"Parts": parts})
        except BaseException:
            try:
                c.abort_multipart_upload(Bucket=bucket, Key=log_key, UploadId=upload_id)
            except Exception:  # noqa: BLE001 - best effort; a lifecycle rule cleans up the rest
                pass
            raise


class S3OutputReader:
    """Reads ``s3://bucket/key`` log URIs (``raftsched.storage.reader.OutputReader``'s S3 side); raises ``OutputMissing``.

    ``read_at``: a stored log from an offset (offset 0 and a log over
    ``max_bytes``: head, note and tail, two ranged GETs); ``read_live``: the
    live parts beside it. Short timeouts: an RPC waits for it.
    """

    def __init__(self, endpoint_url: str = "", region: str = "", client: Any = None) -> None:
        self.endpoint_url = endpoint_url
        self._client = client or make_s3_client(region, endpoint_url, 2.0, 10.0, 2)
        self._lock = threading.Lock()

    def __call__(self, uri: str, max_bytes: int = 0) -> tuple[bytes, bytes]:
        piece, result = self.read_at(uri, 0, max_bytes)
        return piece.data, result

    def _split(self, uri: str) -> tuple[str, str, str]:
        bucket, _, key = uri[len("s3://") :].partition("/")
        if not uri.startswith("s3://") or not bucket or not is_log_name(key):
            raise OutputMissing(f"{uri} is not a raftsched run log (expected s3://bucket/.../attempt-N-token-T.log)")
        return bucket, key, f"log {uri} (S3 at {self.endpoint_url or 'AWS'})"

    def read_at(self, uri: str, offset: int, max_bytes: int = 0) -> tuple[LogSlice, bytes]:
        bucket, key, where = self._split(uri)
        try:
            size = int(self._client.head_object(Bucket=bucket, Key=key)["ContentLength"])
            piece = window_slice(size, offset, max_bytes, uri, lambda a, b: self._get(bucket, key, f"bytes={a}-{b - 1}"))
            try:
                result = self._get(bucket, result_name(key))
            except Exception as exc:  # noqa: BLE001 - no result object: an empty result
                if _error_code(exc)[0] not in ("NoSuchKey", "404"):
                    raise
                result = b""
        except Exception as exc:  # noqa: BLE001 - every failure is a missing output with its reason
            raise self._missing(exc, where) from exc
        return piece, result

    def read_live(self, uri: str, offset: int, max_bytes: int = 0) -> LogSlice:
        """The live parts of the log at ``uri`` from ``offset``: none yet is an empty slice."""
        bucket, key, where = self._split(uri)
        try:
            parts = self._list_parts(bucket, key, offset)
            return live_slice(parts, offset, max_bytes, lambda part, a, b: self._get_part(bucket, part, a, b))
        except Exception as exc:  # noqa: BLE001
            raise self._missing(exc, f"live output of {where}") from exc

    def _list_parts(self, bucket: str, key: str, offset: int) -> list[Part]:
        """The parts beside ``key``; with an offset that a part starts at, only those from there on (the
        bytes before it were read already: one placeholder stands for them)."""
        if 0 < offset <= MAX_PART_OFFSET:
            after = self._list(bucket, key, part_name(key, offset - 1, held=True))
            if any(p.offset == offset and not p.held for p in after):
                return [Part(0, offset, False, ""), *after]
        return self._list(bucket, key, "")

    def _list(self, bucket: str, key: str, start_after: str) -> list[Part]:
        parts, extra = [], {"StartAfter": start_after} if start_after else {}
        for page in self._client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=key + ".part-", **extra):
            for obj in page.get("Contents", []):
                found = parse_part(key, obj["Key"])
                if found is not None:
                    parts.append(Part(found[0], int(obj["Size"]), found[1], obj["Key"]))
        return parts

    def _get_part(self, bucket: str, part: Part, start: int, end: int) -> bytes | None:
        try:
            return self._get(bucket, part.name, f"bytes={start}-{end - 1}" if end > start else "")
        except Exception as exc:  # noqa: BLE001 - removed since it was listed: the whole log is stored by now
            if _error_code(exc)[0] in ("NoSuchKey", "404"):
                return None
            raise

    def _missing(self, exc: BaseException, where: str) -> OutputMissing:
        if isinstance(exc, OutputMissing):
            return exc
        code, _ = _error_code(exc)
        if code in ("NoSuchKey", "404"):
            return OutputMissing(f"{where} is not in the bucket: never uploaded, or expired by a lifecycle rule")
        return OutputMissing(describe_error(exc, where)[0])

    def _get(self, bucket: str, key: str, byte_range: str = "") -> bytes:
        extra = {"Range": byte_range} if byte_range else {}
        body = self._client.get_object(Bucket=bucket, Key=key, **extra)["Body"]
        try:
            return bytes(body.read())
        finally:
            body.close()
