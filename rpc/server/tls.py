"""A node's gRPC server credentials from ``[tls]``, with the files checked before gRPC sees them.

gRPC reports a bad key or certificate only at the first handshake, as a
cryptic SSL error on the client; ``server_credentials`` refuses them at start
instead, naming the file and what is wrong: unreadable, not PEM, a key that is
not the certificate's, an expired certificate, a key file readable by others.
``host_warnings`` says when the certificate does not name the address clients
dial (they would refuse it).
"""

from __future__ import annotations

import datetime as dt
import ipaddress

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from raftsched.cluster.node.config import ConfigError, TlsConfig, check_private_file


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror}") from exc


def load_certificate(path: str, what: str) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(_read(path, what))
    except ValueError as exc:
        raise ConfigError(f"{what} {path} is not a PEM certificate: {exc}") from exc


def _check_pair(tls: TlsConfig, cert: x509.Certificate, key_pem: bytes) -> None:
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"[tls] key_file {tls.key_file} is not an unencrypted PEM private key: {exc}") from exc
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    if key.public_key().public_bytes(serialization.Encoding.DER, spki) != cert.public_key().public_bytes(
        serialization.Encoding.DER, spki
    ):
        raise ConfigError(
            f"[tls] key_file {tls.key_file} is not the key of cert_file {tls.cert_file}: use the pair issued together"
        )
    now = dt.datetime.now(dt.timezone.utc)
    if cert.not_valid_after_utc < now:
        raise ConfigError(f"[tls] cert_file {tls.cert_file} expired on {cert.not_valid_after_utc:%Y-%m-%d}: issue a new one")


def server_credentials(tls: TlsConfig) -> grpc.ServerCredentials:
    """TLS credentials for ``tls`` (already filled in for the node); client certificates required with ``client_auth``."""
    check_private_file(tls.key_file, "[tls] key_file")
    key_pem = _read(tls.key_file, "[tls] key_file")
    cert_pem = _read(tls.cert_file, "[tls] cert_file")
    _check_pair(tls, load_certificate(tls.cert_file, "[tls] cert_file"), key_pem)
    ca_pem = None
    if tls.client_auth:
        load_certificate(tls.ca_file, "[tls] ca_file")
        ca_pem = _read(tls.ca_file, "[tls] ca_file")
    return grpc.ssl_server_credentials([(key_pem, cert_pem)], root_certificates=ca_pem, require_client_auth=tls.client_auth)


def host_warnings(tls: TlsConfig, address: str) -> list[str]:
    """Why clients dialling ``address`` would refuse this certificate (empty: they would not)."""
    cert = load_certificate(tls.cert_file, "[tls] cert_file")
    host = address.rsplit(":", 1)[0].strip("[]")
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return [f"[tls] cert_file {tls.cert_file} has no subjectAltName: clients will refuse it; issue one naming {host}"]
    try:
        ip = ipaddress.ip_address(host)
        ok = ip in names.get_values_for_type(x509.IPAddress)
    except ValueError:
        ok = any(_dns_match(pattern, host) for pattern in names.get_values_for_type(x509.DNSName))
    if ok:
        return []
    return [f"[tls] cert_file {tls.cert_file} does not name {host}, the gRPC address clients dial: they will refuse it"]


def _dns_match(pattern: str, host: str) -> bool:
    pattern, host = pattern.lower().rstrip("."), host.lower().rstrip(".")
    if pattern.startswith("*."):
        return host.count(".") == pattern.count(".") and host.endswith(pattern[1:])
    return pattern == host
