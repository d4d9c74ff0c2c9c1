# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""TLS material of the test equipment (the fault proxy, tests/support/fault_proxy.py, and the client-certificate
tests): a throwaway CA with a server certificate (make_tls), client certificates from that CA (make_client_cert), the
server's TLS context (server_ssl_context), which asks for a client certificate as kube-apiserver's --client-ca-file
does, and who a client certificate names (user_from_peer_cert).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import ipaddress
import os


def make_tls(directory, sans=()):
    """Write a throwaway CA and a server certificate for 127.0.0.1/localhost (and the names or addresses of sans).

    Returns (ca_cert_path, server_cert_path, server_key_path). EC P-256 keys keep this at a
    few milliseconds, so every test can have its own cluster and its own trust root.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    not_before = now - datetime.timedelta(minutes=5)
    not_after = now + datetime.timedelta(days=2)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, u"kubehw-test-ca")])
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                     key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, key_cert_sign=True, crl_sign=True,
                                     encipher_only=False, decipher_only=False), critical=True)
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    server_key = ec.generate_private_key(ec.SECP256R1())
    server_cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, u"kube-apiserver")]))
        .issuer_name(ca_name)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                     key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, key_cert_sign=False, crl_sign=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName([
            x509.DNSName(u"localhost"),
            x509.DNSName(u"kubernetes.default.svc"),
            x509.IPAddress(ipaddress.ip_address(u"127.0.0.1")),
            x509.IPAddress(ipaddress.ip_address(u"::1")),
        ] + [_general_name(name) for name in sans]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    if not os.path.isdir(directory):
        os.makedirs(directory)
    ca_path = os.path.join(directory, "ca.crt")
    cert_path = os.path.join(directory, "apiserver.crt")
    key_path = os.path.join(directory, "apiserver.key")
    with open(ca_path, "wb") as f:
        f.write(ca_cert.public_bytes(serialization.Encoding.PEM))
    with open(cert_path, "wb") as f:
        f.write(server_cert.public_bytes(serialization.Encoding.PEM))
    write_private_key(key_path, server_key)
    # kept next to ca.crt so make_client_cert can issue client certificates from the same CA
    write_private_key(os.path.join(directory, "ca.key"), ca_key)
    return ca_path, cert_path, key_path


def _general_name(name):
    from cryptography import x509

    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def write_private_key(path, key):
    from cryptography.hazmat.primitives import serialization

    # the keys are throwaways, but keep them private like real ones
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))


def make_client_cert(directory, user, groups=(), name=None):
    """Issue a client certificate from the CA that make_tls wrote into directory.

    As with kubeadm's admin.conf, the subject CN is the user and each O is a group.
    Returns (cert_path, key_path).
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    with open(os.path.join(directory, "ca.crt"), "rb") as f:
        ca_cert = x509.load_pem_x509_certificate(f.read())
    with open(os.path.join(directory, "ca.key"), "rb") as f:
        ca_key = serialization.load_pem_private_key(f.read(), password=None)
    now = datetime.datetime.now(datetime.timezone.utc)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
    subject.append(x509.NameAttribute(NameOID.COMMON_NAME, user))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(subject))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    base = name or "client-" + "".join(c if c.isalnum() else "-" for c in user)
    cert_path = os.path.join(directory, base + ".crt")
    key_path = os.path.join(directory, base + ".key")
    with open(cert_path, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    write_private_key(key_path, key)
    return cert_path, key_path


def server_ssl_context(ca_path, cert_path, key_path):
    """The server side TLS context: serves cert_path, and asks for (but does not require) a
    client certificate signed by the cluster CA, as kube-apiserver's --client-ca-file does."""
    import ssl

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert_path, key_path)
    ctx.load_verify_locations(cafile=ca_path)
    ctx.verify_mode = ssl.CERT_OPTIONAL
    return ctx


def user_from_peer_cert(peer_cert):
    """Who a verified client certificate names, as kube-apiserver reads it: CN the user, each O a group (plus
    system:authenticated); None without a certificate or a CN."""
    if not peer_cert:
        return None
    user, groups = None, []
    for rdn in peer_cert.get("subject") or ():
        for key, value in rdn:
            if key == "commonName":
                user = value
            elif key == "organizationName":
                groups.append(value)
    if not user:
        return None
    return {"user": user, "groups": groups + ["system:authenticated"]}
