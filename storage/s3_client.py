"""The one place a boto3 S3 client is built (boto3 is imported here, on first use only)."""

from __future__ import annotations

from typing import Any, Callable


def make_s3_client(
    region: str, endpoint_url: str, connect_timeout: float = 5.0, read_timeout: float = 60.0, attempts: int = 3
) -> Any:
    """An S3 client for ``region`` (empty: boto3's default) and ``endpoint_url`` (empty: AWS; else an
    S3-compatible server, addressed by path). Credentials come from boto3's usual chain."""
    import boto3
    from botocore.config import Config

    config = Config(
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        retries={"max_attempts": attempts, "mode": "standard"},
        s3={"addressing_style": "path"} if endpoint_url else None,
    )
    return boto3.session.Session().client("s3", region_name=region or None, endpoint_url=endpoint_url or None, config=config)


def lazy_s3_client(region: str, endpoint_url: str) -> Callable[[], Any]:
    """A function that builds the client on its first call and returns the same one after."""
    made: list[Any] = []

    def client() -> Any:
        if not made:
            made.append(make_s3_client(region, endpoint_url))
        return made[0]

    return client
