"""A small certificate authority (``cryptography``, no openssl): a CA, node and client certificates.

For ``scripts/launch_cluster.sh --secure``, the tests, and ``raftsched tls``
on real machines. Keys are ECDSA P-256; node certificates name their hosts
(IP addresses and DNS names) as subjectAltNames, which clients check against
the address they dial, and serve as client certificates too; client
certificates are for ``[tls] client_auth``. Private keys are written readable
by their owner only.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_KEY_USAGE = dict(
    content_commitment=False,
    key_encipherment=False,
    data_encipherment=False,
    key_agreement=False,
    encipher_only=False,
    decipher_only=False,
)


@dataclass(frozen=True)
class Issued:
    """A private key and its certificate."""

    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    def write(self, cert_path: str, key_path: str) -> None:
        """The key (0600) and the certificate, both PEM."""
        pem = self.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        write_private(key_path, pem)
        self.write_cert(cert_path)

    def write_cert(self, cert_path: str) -> None:
        with open(cert_path, "wb") as f:
            f.write(self.cert.public_bytes(serialization.Encoding.PEM))


def write_private(path: str, data: bytes) -> None:
    """Write ``data`` to a new or replaced file that only its owner can read (0600 from the start)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _builder(subject: str, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey, days: int) -> x509.CertificateBuilder:
    now = dt.datetime.now(dt.timezone.utc)
    return (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
    )


def make_ca(common_name: str = "raftsched CA", days: int = 3650) -> Issued:
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        _builder(common_name, _name(common_name), key.public_key(), days)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, **_KEY_USAGE), critical=True)
        .sign(key, hashes.SHA256())
    )
    return Issued(key, cert)


def _alt_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def issue(ca: Issued, common_name: str, hosts: list[str] | tuple[str, ...] = (), days: int = 825) -> Issued:
    """A certificate signed by ``ca``: for a node when ``hosts`` are given (server and client use),
    else a client certificate."""
    key = ec.generate_private_key(ec.SECP256R1())
    usages = [ExtendedKeyUsageOID.CLIENT_AUTH] + ([ExtendedKeyUsageOID.SERVER_AUTH] if hosts else [])
    builder = (
        _builder(common_name, ca.cert.subject, key.public_key(), days)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=False, crl_sign=False, **_KEY_USAGE), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), critical=False)
    )
    if hosts:
        builder = builder.add_extension(x509.SubjectAlternativeName([_alt_name(h) for h in hosts]), critical=False)
    return Issued(key, builder.sign(ca.key, hashes.SHA256()))


def load_ca(cert_path: str, key_path: str) -> Issued:
    with open(cert_path, "rb") as f:
        cert = x509.load_pem_x509_certificate(f.read())
    with open(key_path, "rb") as f:
        key = serialization.load_pem_private_key(f.read(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{key_path} is not an ECDSA key made by raftsched tls ca")
    return Issued(key, cert)
