"""TLS between the trainer and a game server, and a served seat as a plain gymnasium environment."""

from __future__ import annotations

import datetime
import ipaddress

import gymnasium
import numpy as np
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from lamarckian.games.client import fetch_hello
from lamarckian.games.env import GameEnv
from lamarckian.games.mdp import GameMDP

from .helpers import ServerProcess, play


def self_signed(folder):
    """A certificate for ``game.test`` and 127.0.0.1 and its key, in PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "game.test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.SubjectAlternativeName([x509.DNSName("game.test"),
                                                               x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                                  critical=False)
                   .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                   .sign(key, hashes.SHA256()))
    (folder / "cert.pem").write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    (folder / "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                       serialization.NoEncryption()))
    return folder / "cert.pem", folder / "key.pem"


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tls")
    certificate, key = self_signed(folder)
    server = ServerProcess(folder, ["--env", "CartPole-v1", "--tls-cert", str(certificate), "--tls-key", str(key)])
    server.certificate = certificate
    yield server
    server.stop()


def test_episodes_run_over_tls(tls_server):
    settings = tls_server.settings(tls=str(tls_server.certificate), tls_name="game.test")
    counts = play([GameMDP(settings, seed=i) for i in range(4)], 2.0)
    assert counts["finished"] >= 4
    assert counts["lost"] == 0


def test_a_server_whose_certificate_is_not_trusted_is_refused(tls_server, tmp_path):
    other, _ = self_signed(tmp_path)
    with pytest.raises(ValueError, match="handshake failed"):
        fetch_hello(tls_server.settings(tls=str(other), tls_name="game.test"))


def test_a_served_seat_is_a_gymnasium_environment(tmp_path):
    server = ServerProcess(tmp_path, ["--env", "CartPole-v1"])
    env = GameEnv(server.settings())
    observation, _ = env.reset(seed=4)
    reference = gymnasium.make("CartPole-v1")
    expected, _ = reference.reset(seed=4)
    steps, done = 0, False
    while not done:
        observation, reward, terminated, truncated, info = env.step(1)
        expected, _, *_ = reference.step(1)
        steps, done = steps + 1, terminated or truncated
    env.close()
    server.stop()
    assert np.allclose(observation, expected)
    assert info["result"]["fitness"] == steps
